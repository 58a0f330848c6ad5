/* dropout.cu — CUDA side of dropout: one thread per element, the mask of dropout.h. */
#include <starpu.h>

#include "dnn_cuda.h"

extern "C" {
#include "dropout.h"
}

// Element i of the chunk (sample i / per, element i % per) is kept: dropout.h's mask.
static __device__ int dropout_keep_at(const dnn_dropout_args &a, size_t i)
{
	const long s = (long)(i / (size_t)a.per_sample), e = (long)(i % (size_t)a.per_sample);
	return !a.train || dnn_dropout_keep(dnn_dropout_key(a.seed, a.step, a.sample0 + s), e, a.p);
}

// y (N, per) = x * keep * scale
static __global__ void dropout_fwd_kernel(float *y, const float *x, dnn_dropout_args a, float scale, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	y[i] = dropout_keep_at(a, i) ? x[i] * scale : 0.0f;
}

// dx (N, per) =|+= dy * keep * scale
static __global__ void dropout_bwd_kernel(float *dx, const float *dy, dnn_dropout_args a, float scale, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	const float g = dropout_keep_at(a, i) ? dy[i] * scale : 0.0f;
	dx[i] = a.accumulate_dx ? dx[i] + g : g;
}

static float dropout_scale(const dnn_dropout_args *a) { return a->train && a->p > 0.0f ? 1.0f / (1.0f - a->p) : 1.0f; }

extern "C" void dnn_dropout_fwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_dropout_args *a = (const dnn_dropout_args *)cl_arg;
	const size_t n = (size_t)a->N * (size_t)a->per_sample;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == n);
	if (n == 0)
		return;
	dropout_fwd_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, starpu_cuda_get_local_stream()>>>(
		(float *)STARPU_VECTOR_GET_PTR(buffers[1]), (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), *a,
		dropout_scale(a), n);
	DNN_CUDA_CHECK(cudaGetLastError());
}

extern "C" void dnn_dropout_bwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_dropout_args *a = (const dnn_dropout_args *)cl_arg;
	const size_t n = (size_t)a->N * (size_t)a->per_sample;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == n);
	if (n == 0)
		return;
	dropout_bwd_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, starpu_cuda_get_local_stream()>>>(
		(float *)STARPU_VECTOR_GET_PTR(buffers[1]), (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), *a,
		dropout_scale(a), n);
	DNN_CUDA_CHECK(cudaGetLastError());
}
