/* avgpool.cu — CUDA side of the global average pool. */
#include <starpu.h>

#include "dnn_cuda.h"

extern "C" {
#include "avgpool.h"
}

// y (N*C) = mean over HW of x (N*C, HW); one warp per (n,c) row, lanes stride the row
static __global__ void avgpool_fwd_kernel(float *y, const float *x, size_t rows, int HW)
{
	size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
	unsigned lane = threadIdx.x % 32;
	if (r >= rows) // whole warps leave together: rows are warp-aligned
		return;
	const float *x_r = x + r * HW;
	float sum = 0.0f;
	for (int i = (int)lane; i < HW; i += 32)
		sum += x_r[i];
	for (int off = 16; off > 0; off >>= 1)
		sum += __shfl_down_sync(0xffffffffu, sum, off);
	if (lane == 0)
		y[r] = sum / (float)HW;
}

// dx (N*C, HW) =|+= dy (N*C) / HW; one thread per element of dx
static __global__ void avgpool_bwd_kernel(float *dx, const float *dy, size_t n, int HW, int accumulate_dx)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n) {
		float g = dy[i / (size_t)HW] / (float)HW;
		dx[i] = accumulate_dx ? dx[i] + g : g;
	}
}

extern "C" void dnn_avgpool_fwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_avgpool_args *a = (const dnn_avgpool_args *)cl_arg;
	size_t rows = (size_t)a->N * a->C;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == rows * a->HW);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == rows);
	const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]); // (N,C,HW)
	float *y = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);             // (N,C)
	if (rows == 0)
		return;
	cudaStream_t stream = starpu_cuda_get_local_stream();
	if (a->HW == 0) {
		DNN_CUDA_CHECK(cudaMemsetAsync(y, 0, rows * sizeof(float), stream));
		return;
	}
	avgpool_fwd_kernel<<<DNN_CUDA_BLOCKS(rows * 32), 256, 0, stream>>>(y, x, rows, a->HW);
	DNN_CUDA_CHECK(cudaGetLastError());
}

extern "C" void dnn_avgpool_bwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_avgpool_args *a = (const dnn_avgpool_args *)cl_arg;
	size_t n = (size_t)a->N * a->C * a->HW;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n);
	const float *dy = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]); // (N,C)
	float *dx = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);             // (N,C,HW)
	if (n == 0)
		return;
	avgpool_bwd_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, starpu_cuda_get_local_stream()>>>(dx, dy, n, a->HW,
											    a->accumulate_dx);
	DNN_CUDA_CHECK(cudaGetLastError());
}
