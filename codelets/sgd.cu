/* sgd.cu — CUDA side of the fused SGD step. */
#include <starpu.h>

#include "dnn_cuda.h"

extern "C" {
#include "sgd.h"
}

// w (n), v (n), grad (n): g = grad*scale + wd*w; v = mom*v + g; w -= lr*v; grad = 0
static __global__ void sgd_update_kernel(float *w, float *v, float *grad, float *delta, size_t n, float lr, float mom, float wd,
					 float scale, int keep_grad)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n) {
		float g = grad[i] * scale + wd * w[i];
		float vi = mom * v[i] + g;
		v[i] = vi;
		w[i] -= lr * vi;
		if (delta)
			delta[i] = -lr * vi;
		if (!keep_grad)
			grad[i] = 0.0f;
	}
}

extern "C" void dnn_sgd_update_cuda(void *buffers[], void *cl_arg)
{
	const dnn_sgd_args *a = (const dnn_sgd_args *)cl_arg;
	size_t n = (size_t)a->n;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == n);
	float *w = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	float *v = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	float *grad = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);
	float *delta = NULL;
	if (a->write_delta) {
		STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == n);
		delta = (float *)STARPU_VECTOR_GET_PTR(buffers[3]);
	}
	if (n == 0)
		return;
	sgd_update_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, starpu_cuda_get_local_stream()>>>(
		w, v, grad, delta, n, a->lr, a->momentum, a->weight_decay, a->scale, a->keep_grad);
	DNN_CUDA_CHECK(cudaGetLastError());
}
