/* maxpool.cu — CUDA side of max pooling.
 *
 * Forward: cuDNN pooling (CUDNN_POOLING_MAX_DETERMINISTIC, CUDNN_NOT_PROPAGATE_NAN) on the
 * worker's stream: y is the largest non-NaN cell of each window, padding never selected, as the
 * CPU kernel (maxpool.c).
 *
 * Backward: our own kernel, not cuDNN's. cuDNN documents neither which of several equal maxima
 * of a window gets the gradient nor, for CUDNN_POOLING_MAX, a deterministic sum where windows
 * overlap. This kernel applies the CPU's rule exactly: each window's dy goes to the first cell
 * (row-major within the window) equal to y, or, when none is (a window of NaNs), to its first
 * largest cell (maxpool.c). It is a gather, one thread per cell of dx, which adds the dy of
 * every window that selected it in the CPU's order (window rows, then columns), starting from
 * 0 or from dx (accumulate_dx): no atomics, deterministic, and the CPU's float sums bit for bit.
 * A fused relu (a->relu): the forward's y = max(y, 0) in a second kernel, as the CPU's relu_of;
 * the backward adds 0 instead of dy for a window whose y is not positive, as the CPU does.
 * Errors record a worker error and return (dnn_cuda.h).
 */
#include <math.h>
#include <starpu.h>

#include "act_formulas.h" /* the fused relu, shared with maxpool.c */
#include "dnn_cuda.h"

extern "C" {
#include "dnn_codelet.h"
#include "maxpool.h"
}

struct maxpool_desc {
	cudnnTensorDescriptor_t x, y;
	cudnnPoolingDescriptor_t pool;
};

static void maxpool_desc_destroy(maxpool_desc *d)
{
	if (d->pool)
		(void)cudnnDestroyPoolingDescriptor(d->pool);
	if (d->y)
		(void)cudnnDestroyTensorDescriptor(d->y);
	if (d->x)
		(void)cudnnDestroyTensorDescriptor(d->x);
	*d = maxpool_desc{};
}

/* 0, or -1 after recording a worker error (d then holds nothing). */
static int maxpool_desc_create(maxpool_desc *d, const dnn_maxpool_args *a)
{
	*d = maxpool_desc{};
	int n, c, p, q;
	if (DNN_CUDA_FAILED(cudnnCreateTensorDescriptor(&d->x)) || DNN_CUDA_FAILED(cudnnCreateTensorDescriptor(&d->y)) ||
	    DNN_CUDA_FAILED(cudnnCreatePoolingDescriptor(&d->pool)) ||
	    DNN_CUDA_FAILED(cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, a->N, a->C, a->H, a->W)) ||
	    DNN_CUDA_FAILED(cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, a->N, a->C, a->P, a->Q)) ||
	    DNN_CUDA_FAILED(cudnnSetPooling2dDescriptor(d->pool, CUDNN_POOLING_MAX_DETERMINISTIC, CUDNN_NOT_PROPAGATE_NAN,
							a->k, a->k, a->pad, a->pad, a->stride, a->stride)) ||
	    DNN_CUDA_FAILED(cudnnGetPooling2dForwardOutputDim(d->pool, d->x, &n, &c, &p, &q))) {
		maxpool_desc_destroy(d);
		return -1;
	}
	if (n != a->N || c != a->C || p != a->P || q != a->Q) {
		dnn_worker_error("maxpool: cuDNN's output shape %dx%dx%dx%d differs from ours %dx%dx%dx%d", n, c, p, q,
				 a->N, a->C, a->P, a->Q);
		maxpool_desc_destroy(d);
		return -1;
	}
	return 0;
}

// y = max(y, 0) (NaN gives 0), maxpool.c's relu_of
static __global__ void relu_inplace_kernel(float *y, size_t n)
{
	const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = dnn_act_relu(y[i]);
}

// (R x (N,C,H,W), W y (N,C,P,Q))
extern "C" void dnn_maxpool_fwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_maxpool_args *a = (const dnn_maxpool_args *)cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->C * a->H * a->W);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->N * a->C * a->P * a->Q);
	const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	float *y = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	maxpool_desc d;
	if (maxpool_desc_create(&d, a) != 0)
		return;
	const float one = 1.0f, zero = 0.0f;
	const int bad = DNN_CUDA_FAILED(cudnnPoolingForward(dnn_cudnn_handle(), d.pool, &one, d.x, x, &zero, d.y, y));
	maxpool_desc_destroy(&d);
	if (bad || !a->relu)
		return;
	const size_t ny = (size_t)a->N * a->C * a->P * a->Q;
	if (ny == 0)
		return;
	relu_inplace_kernel<<<DNN_CUDA_BLOCKS(ny), 256, 0, starpu_cuda_get_local_stream()>>>(y, ny);
	DNN_CUDA_CHECK(cudaGetLastError());
}

/* The input cell (offset h*W + w in its plane) to which window (p, q) of plane xp routes its
 * gradient: the CPU's rule (maxpool.c dnn_maxpool_backward_cpu), m = the window's y. */
static __device__ int window_target(const float *xp, float m, int p, int q, int H, int W, int k, int s, int pad)
{
	const int h0 = p * s - pad, w0 = q * s - pad;
	const int hs = h0 < 0 ? 0 : h0, he = h0 + k > H ? H : h0 + k;
	const int ws = w0 < 0 ? 0 : w0, we = w0 + k > W ? W : w0 + k;
	int arg = hs * W + ws; // the first argmax, if no cell equals y
	float bm = -INFINITY;
	for (int h = hs; h < he; h++)
		for (int w = ws; w < we; w++) {
			const float v = xp[h * W + w];
			if (v == m)
				return h * W + w;
			if (v > bm) {
				bm = v;
				arg = h * W + w;
			}
		}
	return arg;
}

// dx (N,C,H,W) (=|+=) sum of dy (N,C,P,Q) over the windows whose target is the cell; one thread
// per cell of dx; windows visited as the CPU adds them (p, then q, ascending)
static __global__ void maxpool_bwd_kernel(float *dx, const float *x, const float *y, const float *dy, size_t n, int H,
					  int W, int P, int Q, int k, int s, int pad, int accumulate_dx, int relu)
{
	const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	const size_t plane = i / ((size_t)H * W);
	const int cell = (int)(i % ((size_t)H * W)), h = cell / W, w = cell % W;
	const float *xp = x + plane * H * W, *yp = y + plane * P * Q, *dyp = dy + plane * P * Q;
	/* Windows holding row h: p * s - pad <= h < p * s - pad + k; likewise for columns. */
	const int p_lo = h + pad - k < 0 ? 0 : (h + pad - k) / s + 1, p_hi = min((h + pad) / s, P - 1);
	const int q_lo = w + pad - k < 0 ? 0 : (w + pad - k) / s + 1, q_hi = min((w + pad) / s, Q - 1);
	float g = accumulate_dx ? (relu ? dx[i] + 0.0f : dx[i]) : 0.0f; // the relu backward's += +0 on every cell, as the CPU
	for (int p = p_lo; p <= p_hi; p++)
		for (int q = q_lo; q <= q_hi; q++)
			if (window_target(xp, yp[p * Q + q], p, q, H, W, k, s, pad) == cell)
				g += relu ? dnn_act_relu_grad(dyp[p * Q + q], yp[p * Q + q]) : dyp[p * Q + q];
	dx[i] = g;
}

// (R x, R y, R dy, W|RW dx): dx = dpool + (accumulate_dx ? dx : 0)
extern "C" void dnn_maxpool_bwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_maxpool_args *a = (const dnn_maxpool_args *)cl_arg;
	size_t nx = (size_t)a->N * a->C * a->H * a->W, ny = (size_t)a->N * a->C * a->P * a->Q;
	STARPU_ASSERT(STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) == 4);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == nx);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == ny);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == ny);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == nx);
	const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	const float *y = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	const float *dy = (const float *)STARPU_VECTOR_GET_PTR(buffers[2]);
	float *dx = (float *)STARPU_VECTOR_GET_PTR(buffers[3]);
	if (nx == 0)
		return;
	maxpool_bwd_kernel<<<DNN_CUDA_BLOCKS(nx), 256, 0, starpu_cuda_get_local_stream()>>>(
		dx, x, y, dy, nx, a->H, a->W, a->P, a->Q, a->k, a->stride, a->pad, a->accumulate_dx, a->relu);
	DNN_CUDA_CHECK(cudaGetLastError());
}
