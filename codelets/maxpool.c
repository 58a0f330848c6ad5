/* maxpool.c — max pooling, NCHW: CPU kernels, StarPU codelets, insert helpers.
 *
 * Padding cells count as -inf, so they are never selected (dnn_maxpool_args_finish keeps
 * 2*pad <= k, so every window holds at least one real cell). Backward recomputes each window's
 * argmax from x and y and routes dy to the first input equal to the window max (the first
 * largest one when none is: a window of NaNs); maxpool.cu's backward kernel applies this rule
 * exactly (tests/gpu_cuda_policy.c checks it bit for bit).
 */
#include "maxpool.h"
#include "dnn_codelet.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef DNN_HAVE_CUDA
void dnn_maxpool_fwd_cuda(void *buffers[], void *cl_arg);
void dnn_maxpool_bwd_cuda(void *buffers[], void *cl_arg);
#endif

int dnn_maxpool_args_finish(dnn_maxpool_args *a)
{
	if (a->N < 1 || a->C < 1 || a->H < 1 || a->W < 1 || a->k < 1 || a->stride < 1 || a->pad < 0)
		return -1;
	if (2 * (long long)a->pad > a->k) // as PyTorch: pad <= k/2
		return -1;
	long long hp = (long long)a->H + 2LL * a->pad, wp = (long long)a->W + 2LL * a->pad;
	if (hp < a->k || wp < a->k)
		return -1;
	long long P = (hp - a->k) / a->stride + 1, Q = (wp - a->k) / a->stride + 1;
	if ((long long)a->N * a->C * a->H * a->W > INT_MAX)
		return -1; // cuDNN tensor descriptors take int sizes
	a->P = (int)P;
	a->Q = (int)Q;
	return 0;
}

/* The common 2x2, stride-2, unpadded pooling of an even-sized image: straight-line code with no
 * window bounds (about 5x faster than the general loops below on LeNet-5's shapes). */
static int is_2x2(const dnn_maxpool_args *a)
{
	return a->k == 2 && a->stride == 2 && a->pad == 0 && a->H == 2 * a->P && a->W == 2 * a->Q;
}

// Same as the general loop's "if (v > m) m = v" from -inf: NaNs are skipped.
static inline float max_gt(float m, float v) { return v > m ? v : m; }

static void maxpool_forward_2x2(float *restrict y, const float *restrict x, const dnn_maxpool_args *a)
{
	const int W = a->W, P = a->P, Q = a->Q;
	for (long long nc = 0; nc < (long long)a->N * a->C; nc++)
		for (int p = 0; p < P; p++) {
			const float *r0 = x + (nc * a->H + 2 * p) * W, *r1 = r0 + W;
			float *yp = y + (nc * P + p) * Q;
			for (int q = 0; q < Q; q++)
				yp[q] = max_gt(max_gt(max_gt(max_gt(-INFINITY, r0[2 * q]), r0[2 * q + 1]), r1[2 * q]),
					       r1[2 * q + 1]);
		}
}

/* Backward of the 2x2 case: every input cell belongs to exactly one window, so dx is written
 * (or accumulated) in one pass, dy going to the first cell (row-major) equal to the max. */
static void maxpool_backward_2x2(float *restrict dx, const float *restrict x, const float *restrict y,
				 const float *restrict dy, const dnn_maxpool_args *a)
{
	const int W = a->W, P = a->P, Q = a->Q, acc = a->accumulate_dx;
	for (long long nc = 0; nc < (long long)a->N * a->C; nc++)
		for (int p = 0; p < P; p++) {
			const size_t o0 = (size_t)(nc * a->H + 2 * p) * W, o1 = o0 + W;
			const float *yp = y + (nc * P + p) * Q, *dyp = dy + (nc * P + p) * Q;
			for (int q = 0; q < Q; q++) {
				const float m = yp[q], g = dyp[q];
				const float v0 = x[o0 + 2 * q], v1 = x[o0 + 2 * q + 1], v2 = x[o1 + 2 * q],
					    v3 = x[o1 + 2 * q + 1];
				/* Branch-free selection (which cell holds the max is data-dependent and
				 * mispredicts): f_i = cell i is the first equal to the max. */
				const int e0 = v0 == m, e1 = v1 == m, e2 = v2 == m, e3 = v3 == m;
				int f0 = e0, f1 = e1 & !e0, f2 = e2 & !(e0 | e1), f3 = e3 & !(e0 | e1 | e2);
				if (!(e0 | e1 | e2 | e3)) { // no cell equals y (NaNs): the first argmax, as the general loop
					float bm = -INFINITY;
					int t = 0;
					if (v0 > bm)
						bm = v0;
					if (v1 > bm)
						bm = v1, t = 1;
					if (v2 > bm)
						bm = v2, t = 2;
					if (v3 > bm)
						t = 3;
					f0 = t == 0, f1 = t == 1, f2 = t == 2, f3 = t == 3;
				}
				float g0 = f0 ? g : 0.0f, g1 = f1 ? g : 0.0f, g2 = f2 ? g : 0.0f, g3 = f3 ? g : 0.0f;
				if (acc) {
					dx[o0 + 2 * q] += g0, dx[o0 + 2 * q + 1] += g1;
					dx[o1 + 2 * q] += g2, dx[o1 + 2 * q + 1] += g3;
				} else {
					dx[o0 + 2 * q] = g0, dx[o0 + 2 * q + 1] = g1;
					dx[o1 + 2 * q] = g2, dx[o1 + 2 * q + 1] = g3;
				}
			}
		}
}

// y (N, C, P, Q) = max over each k x k window of x (N, C, H, W)
void dnn_maxpool_forward_cpu(float *y, const float *x, const dnn_maxpool_args *a)
{
	if (is_2x2(a)) {
		maxpool_forward_2x2(y, x, a);
		return;
	}
	const int H = a->H, W = a->W, P = a->P, Q = a->Q, k = a->k, s = a->stride, pad = a->pad;
	for (long long nc = 0; nc < (long long)a->N * a->C; nc++) {
		const float *xp = x + nc * H * W;
		float *yp = y + nc * P * Q;
		for (int p = 0; p < P; p++) {
			int h0 = p * s - pad;
			int hs = h0 < 0 ? 0 : h0, he = h0 + k > H ? H : h0 + k;
			for (int q = 0; q < Q; q++) {
				int w0 = q * s - pad;
				int ws = w0 < 0 ? 0 : w0, we = w0 + k > W ? W : w0 + k;
				float m = -INFINITY;
				for (int h = hs; h < he; h++)
					for (int w = ws; w < we; w++)
						if (xp[h * W + w] > m)
							m = xp[h * W + w];
				yp[p * Q + q] = m;
			}
		}
	}
}

// dx (N, C, H, W) (=|+=) dy (N, C, P, Q) routed to the first x == y in each window
void dnn_maxpool_backward_cpu(float *dx, const float *x, const float *y, const float *dy,
			      const dnn_maxpool_args *a)
{
	if (is_2x2(a)) {
		maxpool_backward_2x2(dx, x, y, dy, a);
		return;
	}
	const int H = a->H, W = a->W, P = a->P, Q = a->Q, k = a->k, s = a->stride, pad = a->pad;
	if (!a->accumulate_dx)
		memset(dx, 0, (size_t)a->N * a->C * H * W * sizeof(float));
	for (long long nc = 0; nc < (long long)a->N * a->C; nc++) {
		const float *xp = x + nc * H * W;
		const float *yp = y + nc * P * Q, *dyp = dy + nc * P * Q;
		float *dxp = dx + nc * H * W;
		for (int p = 0; p < P; p++) {
			int h0 = p * s - pad;
			int hs = h0 < 0 ? 0 : h0, he = h0 + k > H ? H : h0 + k;
			for (int q = 0; q < Q; q++) {
				int w0 = q * s - pad;
				int ws = w0 < 0 ? 0 : w0, we = w0 + k > W ? W : w0 + k;
				float m = yp[p * Q + q];
				int best = -1, arg = hs * W + ws; // arg: first argmax, if y does not match x
				float bm = -INFINITY;
				for (int h = hs; h < he && best < 0; h++)
					for (int w = ws; w < we; w++) {
						float v = xp[h * W + w];
						if (v == m) {
							best = h * W + w;
							break;
						}
						if (v > bm) {
							bm = v;
							arg = h * W + w;
						}
					}
				dxp[best >= 0 ? best : arg] += dyp[p * Q + q];
			}
		}
	}
}

/* ------------------------------------------------------------------ StarPU codelets */

static void maxpool_fwd_cpu(void *buffers[], void *cl_arg)
{
	const dnn_maxpool_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->C * a->H * a->W);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->N * a->C * a->P * a->Q);
	dnn_maxpool_forward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[1]),
				(const float *)STARPU_VECTOR_GET_PTR(buffers[0]), a);
}

static void maxpool_bwd_cpu(void *buffers[], void *cl_arg)
{
	const dnn_maxpool_args *a = cl_arg;
	size_t nx = (size_t)a->N * a->C * a->H * a->W, ny = (size_t)a->N * a->C * a->P * a->Q;
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == 4);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == nx);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == ny);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == ny);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == nx);
	dnn_maxpool_backward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[3]),
				 (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
				 (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
				 (const float *)STARPU_VECTOR_GET_PTR(buffers[2]), a);
}

/* The backward's dx mode (W or RW) is chosen per task (every codelet's modes are: dnn_codelet.h). */
DNN_CODELET(cl_maxpool_fwd, 2, maxpool_fwd_cpu, dnn_maxpool_fwd_cuda);
DNN_CODELET(cl_maxpool_bwd, 4, maxpool_bwd_cpu, dnn_maxpool_bwd_cuda);

DNN_ARGS_NO_PADDING(dnn_maxpool_args, 10 * sizeof(int));

int dnn_insert_maxpool_fwd(const dnn_task_opts *o, const dnn_maxpool_args *a, starpu_data_handle_t x, starpu_data_handle_t y)
{
	double flops = (double)a->N * a->C * a->P * a->Q * a->k * a->k;
	return DNN_TASK_INSERT_ARGS(o, &cl_maxpool_fwd, "maxpool_fwd", a, STARPU_R, x, STARPU_W, y, STARPU_FLOPS, flops,
					    STARPU_TASK_COLOR, (int)DNN_COLOR_POOL_FWD);
}

int dnn_insert_maxpool_bwd(const dnn_task_opts *o, const dnn_maxpool_args *a, starpu_data_handle_t x, starpu_data_handle_t y,
			    starpu_data_handle_t dy, starpu_data_handle_t dx)
{
	double flops = (double)a->N * a->C * a->P * a->Q * (a->k * a->k + 1);
	int dx_mode = a->accumulate_dx ? STARPU_RW : STARPU_W;
	return DNN_TASK_INSERT_ARGS(o, &cl_maxpool_bwd, "maxpool_bwd", a, STARPU_R, x, STARPU_R, y, STARPU_R, dy,
					    dx_mode, dx, STARPU_FLOPS, flops,
					    STARPU_TASK_COLOR, (int)DNN_COLOR_POOL_BWD);
}
