/* layernorm.cu — CUDA side of layer normalisation (layernorm.h): one block per row for the
 * forward and dx, the row's sums reduced over the block in a fixed order (dnn_block_sum2, in
 * double); dgamma and dbeta by column blocks, each column summed over the rows in a fixed order.
 * So a result does not change from run to run. Errors record a worker error and return
 * (dnn_cuda.h). */
#include <limits.h>
#include <starpu.h>

#include "cuda_reduce.cuh"
#include "dnn_cuda.h"

extern "C" {
#include "layernorm.h"
}

#define LN_MAX_THREADS 256
#define LN_COLS 32 /* dgamma/dbeta: channels per block (one warp across them) */
#define LN_ROW_LANES 16 /* dgamma/dbeta: rows walked in parallel per column */

/* Threads per row block: the power of two >= C, between 32 and LN_MAX_THREADS. */
static unsigned row_threads(int C)
{
	unsigned t = 32;
	while (t < LN_MAX_THREADS && t < (unsigned)C)
		t *= 2;
	return t;
}

// y (rows x C) = ((x - m) - dm) * rstd * gamma + beta; saved = [m | rstd | dm] (rows each) or
// NULL. The CPU's two passes (layernorm.h): m, then the sums of d = x - m and d^2.
static __global__ void ln_fwd_kernel(float *y, float *saved, const float *x, const float *gamma, const float *beta,
				     long rows, int C, float eps)
{
	const long r = blockIdx.x;
	const float *xr = x + (size_t)r * C;
	double s = 0, unused = 0;
	for (int c = threadIdx.x; c < C; c += blockDim.x)
		s += xr[c];
	dnn_block_sum2<LN_MAX_THREADS>(&s, &unused);
	const float m = (float)(s / C);
	__syncthreads(); /* every thread has read the first sums before the second overwrite them */
	double sd = 0, sd2 = 0;
	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		const float d = xr[c] - m;
		sd += d, sd2 += d * d;
	}
	dnn_block_sum2<LN_MAX_THREADS>(&sd, &sd2);
	const double dmd = sd / C, var = sd2 / C - dmd * dmd;
	const float dm = (float)dmd, rs = (float)(1.0 / sqrt((var > 0 ? var : 0) + (double)eps));
	float *yr = y + (size_t)r * C;
	for (int c = threadIdx.x; c < C; c += blockDim.x)
		yr[c] = ((xr[c] - m) - dm) * rs * gamma[c] + beta[c];
	if (saved && threadIdx.x == 0)
		saved[r] = m, saved[rows + r] = rs, saved[2 * rows + r] = dm;
}

// dx (rows x C) =|+= rstd * (g - mean_c(g) - xhat * mean_c(g * xhat)), g = dy * gamma
static __global__ void ln_bwd_dx_kernel(float *dx, const float *x, const float *gamma, const float *saved,
					const float *dy, long rows, int C, int accumulate)
{
	const long r = blockIdx.x;
	const float *xr = x + (size_t)r * C, *dyr = dy + (size_t)r * C;
	const float m = saved[r], s = saved[rows + r], dm = saved[2 * rows + r];
	double sg = 0, sgx = 0;
	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		const float g = dyr[c] * gamma[c], xh = ((xr[c] - m) - dm) * s;
		sg += g, sgx += g * xh;
	}
	dnn_block_sum2<LN_MAX_THREADS>(&sg, &sgx);
	const float mg = (float)(sg / C), mgx = (float)(sgx / C);
	float *dxr = dx + (size_t)r * C;
	for (int c = threadIdx.x; c < C; c += blockDim.x) {
		const float v = s * (dyr[c] * gamma[c] - mg - ((xr[c] - m) - dm) * s * mgx);
		dxr[c] = accumulate ? dxr[c] + v : v;
	}
}

// dgamma (C) += sum over rows of dy * xhat, dbeta (C) += sum over rows of dy: block (LN_COLS,
// LN_ROW_LANES); lane ty sums rows ty, ty + LN_ROW_LANES, ... in double, then lane 0 adds the
// lanes in order.
static __global__ void ln_bwd_param_kernel(float *dgamma, float *dbeta, const float *x, const float *saved,
					   const float *dy, long rows, int C)
{
	__shared__ double pg[LN_ROW_LANES][LN_COLS], pb[LN_ROW_LANES][LN_COLS];
	const int tx = threadIdx.x, ty = threadIdx.y, c = blockIdx.x * LN_COLS + tx;
	double sg = 0, sb = 0;
	if (c < C)
		for (long r = ty; r < rows; r += LN_ROW_LANES) {
			const float d = dy[(size_t)r * C + c],
				    xh = ((x[(size_t)r * C + c] - saved[r]) - saved[2 * rows + r]) * saved[rows + r];
			sg += d * xh, sb += d;
		}
	pg[ty][tx] = sg, pb[ty][tx] = sb;
	__syncthreads();
	if (ty == 0 && c < C) {
		for (int k = 1; k < LN_ROW_LANES; k++)
			sg += pg[k][tx], sb += pb[k][tx];
		dgamma[c] += (float)sg, dbeta[c] += (float)sb;
	}
}

#define PTR(i) ((float *)STARPU_VECTOR_GET_PTR(buffers[i]))

extern "C" void dnn_layernorm_fwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_layernorm_args *a = (const dnn_layernorm_args *)cl_arg;
	const size_t n = (size_t)a->rows * a->C;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == n && STARPU_VECTOR_GET_NX(buffers[3]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->C && STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->C);
	STARPU_ASSERT(!a->save || STARPU_VECTOR_GET_NX(buffers[4]) == 3 * (size_t)a->rows);
	if (a->y_bf16) { /* the plan stores no bf16 activation with CUDA workers (graph/model.c): a bug */
		dnn_worker_error("layernorm_fwd: a bf16-stored output reached a CUDA worker");
		return;
	}
	if (a->rows == 0)
		return;
	if (a->rows > INT_MAX) {
		dnn_worker_error("layernorm_fwd: %ld rows exceed the CUDA grid's %d blocks", a->rows, INT_MAX);
		return;
	}
	ln_fwd_kernel<<<(unsigned)a->rows, row_threads(a->C), 0, starpu_cuda_get_local_stream()>>>(
		PTR(3), a->save ? PTR(4) : NULL, PTR(0), PTR(1), PTR(2), a->rows, a->C, a->eps);
	DNN_CUDA_CHECK(cudaGetLastError());
}

extern "C" void dnn_layernorm_bwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_layernorm_args *a = (const dnn_layernorm_args *)cl_arg;
	const size_t n = (size_t)a->rows * a->C;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == n && STARPU_VECTOR_GET_NX(buffers[3]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == 3 * (size_t)a->rows);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[4]) == (size_t)a->C && STARPU_VECTOR_GET_NX(buffers[5]) == (size_t)a->C);
	STARPU_ASSERT(!a->has_dx || STARPU_VECTOR_GET_NX(buffers[6]) == n);
	if (a->rows == 0)
		return;
	if (a->rows > INT_MAX) {
		dnn_worker_error("layernorm_bwd: %ld rows exceed the CUDA grid's %d blocks", a->rows, INT_MAX);
		return;
	}
	cudaStream_t st = starpu_cuda_get_local_stream();
	ln_bwd_param_kernel<<<(unsigned)((a->C + LN_COLS - 1) / LN_COLS), dim3(LN_COLS, LN_ROW_LANES), 0, st>>>(
		PTR(4), PTR(5), PTR(0), PTR(2), PTR(3), a->rows, a->C);
	DNN_CUDA_CHECK(cudaGetLastError());
	if (!a->has_dx)
		return;
	ln_bwd_dx_kernel<<<(unsigned)a->rows, row_threads(a->C), 0, st>>>(PTR(6), PTR(0), PTR(1), PTR(2), PTR(3), a->rows,
									     a->C, a->accumulate_dx);
	DNN_CUDA_CHECK(cudaGetLastError());
}
