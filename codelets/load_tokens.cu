/* load_tokens.cu — the CUDA form of the token-loading task (see load_tokens.h): the chunk's
 * windows of T+1 tokens are gathered on the host into the worker's pinned staging block
 * (dnn_staging.h), copied on the worker's stream, and expanded into x (ids as floats) and y (the
 * next tokens) by one kernel. */
#include <starpu.h>
#include <stdint.h>

#include "dnn_cuda.h"
#include "dnn_staging.h"

extern "C" {
#include "load_tokens.h"
}

// x (n, T) = w[i][t] as floats, y (n, T) = w[i][t+1]; w (n, T+1)
static __global__ void load_tokens_kernel(float *x, int32_t *y, const uint16_t *w, int T, size_t total)
{
	size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (k >= total)
		return;
	const size_t i = k / (size_t)T, t = k % (size_t)T;
	const uint16_t *wi = w + i * ((size_t)T + 1);
	x[k] = (float)wi[t];
	y[k] = wi[t + 1];
}

extern "C" void dnn_load_tokens_cuda(void *buffers[], void *cl_arg)
{
	const dnn_load_tokens_args *a = (const dnn_load_tokens_args *)cl_arg;
	const size_t total = (size_t)a->n * a->T;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == total);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == total);
	float *x = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	int32_t *y = (int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]);
	if (total == 0)
		return;
	const size_t bytes = sizeof(uint16_t) * (size_t)a->n * ((size_t)a->T + 1);
	void *host, *dev;
	if (dnn_cuda_staging(bytes, &host, &dev, "load_tokens") != 0)
		return;
	dnn_load_tokens_stage((uint16_t *)host, a);
	cudaStream_t st = starpu_cuda_get_local_stream();
	if (dnn_cuda_staging_upload(bytes, "load_tokens") != 0)
		return;
	load_tokens_kernel<<<DNN_CUDA_BLOCKS(total), 256, 0, st>>>(x, y, (const uint16_t *)dev, a->T, total);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess)
		dnn_worker_error("load_tokens: kernel launch: %s", cudaGetErrorString(e));
}
