/* bias.cu — CUDA side of the per-channel bias. */
#include <starpu.h>

#include "dnn_cuda.h"

extern "C" {
#include "bias.h"
}

#define BIAS_BWD_THREADS 256

// y (N,C,HW) += b (C); one thread per element
static __global__ void bias_fwd_kernel(float *y, const float *b, size_t n, int C, int HW)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] += b[(i / (size_t)HW) % (size_t)C];
}

// db (C) += sum over N,HW of dy (N,C,HW); one block per channel, shared-memory tree reduction
static __global__ void bias_bwd_kernel(float *db, const float *dy, int N, int C, int HW)
{
	__shared__ float partial[BIAS_BWD_THREADS];
	int c = blockIdx.x;
	size_t count = (size_t)N * HW;
	float sum = 0.0f;
	for (size_t j = threadIdx.x; j < count; j += blockDim.x) {
		size_t n = j / (size_t)HW, i = j % (size_t)HW;
		sum += dy[(n * C + c) * (size_t)HW + i];
	}
	partial[threadIdx.x] = sum;
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s)
			partial[threadIdx.x] += partial[threadIdx.x + s];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		db[c] += partial[0];
}

extern "C" void dnn_bias_fwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_bias_args *a = (const dnn_bias_args *)cl_arg;
	size_t n = (size_t)a->N * a->C * a->HW;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->C);
	float *y = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);             // (N,C,HW)
	const float *b = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]); // (C)
	if (n == 0)
		return;
	bias_fwd_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, starpu_cuda_get_local_stream()>>>(y, b, n, a->C, a->HW);
	DNN_CUDA_CHECK(cudaGetLastError());
}

extern "C" void dnn_bias_bwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_bias_args *a = (const dnn_bias_args *)cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->C * a->HW);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->C);
	const float *dy = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]); // (N,C,HW)
	float *db = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);             // (C) +=
	if (a->C == 0)
		return;
	bias_bwd_kernel<<<(unsigned)a->C, BIAS_BWD_THREADS, 0, starpu_cuda_get_local_stream()>>>(db, dy, a->N, a->C,
												   a->HW);
	DNN_CUDA_CHECK(cudaGetLastError());
}
