/* add.cu — CUDA side of the residual add. */
#include <starpu.h>

#include "dnn_cuda.h"

extern "C" {
#include "add.h"
}

// y (n) = a + b
static __global__ void add_fwd_kernel(float *y, const float *a, const float *b, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = a[i] + b[i];
}

// dx (n) += dy
static __global__ void add_bwd_accum_kernel(float *dx, const float *dy, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		dx[i] += dy[i];
}

extern "C" void dnn_add_fwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_add_args *args = (const dnn_add_args *)cl_arg;
	size_t n = (size_t)args->n;
	if (args->x_bf16) { /* the plan stores no bf16 activation with CUDA workers (graph/model.c) */
		dnn_worker_error("add: a bf16 activation reached a CUDA kernel (fp32 only)");
		return;
	}
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == n);
	const float *a = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	const float *b = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	float *y = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);
	if (n == 0)
		return;
	add_fwd_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, starpu_cuda_get_local_stream()>>>(y, a, b, n);
	DNN_CUDA_CHECK(cudaGetLastError());
}

extern "C" void dnn_add_bwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_add_args *args = (const dnn_add_args *)cl_arg;
	size_t n = (size_t)args->n;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n);
	const float *dy = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	float *dx = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	if (n == 0)
		return;
	cudaStream_t stream = starpu_cuda_get_local_stream();
	if (args->accumulate_dx) {
		add_bwd_accum_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, stream>>>(dx, dy, n);
		DNN_CUDA_CHECK(cudaGetLastError());
	} else {
		DNN_CUDA_CHECK(cudaMemcpyAsync(dx, dy, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
	}
}
