/* vec.cu — CUDA side of the vector operations (vec.h). */
#include <starpu.h>

#include "dnn_cuda.h"

extern "C" {
#include "vec.h"
}

static __global__ void vec_axpy_kernel(float *dst, float alpha, const float *src, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		dst[i] += alpha * src[i];
}

template <typename T> static __global__ void vec_add_clear_kernel(T *dst, T *src, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n) {
		dst[i] += src[i];
		src[i] = 0;
	}
}

/* buffers[0] += buffers[1], buffers[1] = 0: floats or doubles (the vectors' element size). */
extern "C" void dnn_vec_add_clear_cuda(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	size_t n = STARPU_VECTOR_GET_NX(buffers[0]);
	if (n == 0)
		return;
	unsigned blocks = (unsigned)((n + 255) / 256);
	if (STARPU_VECTOR_GET_ELEMSIZE(buffers[0]) == sizeof(double))
		vec_add_clear_kernel<double><<<blocks, 256, 0, starpu_cuda_get_local_stream()>>>(
			(double *)STARPU_VECTOR_GET_PTR(buffers[0]), (double *)STARPU_VECTOR_GET_PTR(buffers[1]), n);
	else
		vec_add_clear_kernel<float><<<blocks, 256, 0, starpu_cuda_get_local_stream()>>>(
			(float *)STARPU_VECTOR_GET_PTR(buffers[0]), (float *)STARPU_VECTOR_GET_PTR(buffers[1]), n);
	DNN_CUDA_CHECK(cudaGetLastError());
}

extern "C" void dnn_vec_zero_cuda(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	float *dst = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	size_t n = STARPU_VECTOR_GET_NX(buffers[0]);
	DNN_CUDA_CHECK(cudaMemsetAsync(dst, 0, n * sizeof(float), starpu_cuda_get_local_stream()));
}

/* buffers[0] += alpha * buffers[1] on the worker's stream (alpha 1 is exact: the plain sum). */
static void launch_axpy(void *buffers[], float alpha)
{
	float *dst = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	const float *src = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	size_t n = STARPU_VECTOR_GET_NX(buffers[0]);
	if (n == 0)
		return;
	unsigned blocks = (unsigned)((n + 255) / 256);
	vec_axpy_kernel<<<blocks, 256, 0, starpu_cuda_get_local_stream()>>>(dst, alpha, src, n);
	DNN_CUDA_CHECK(cudaGetLastError());
}

extern "C" void dnn_vec_add_cuda(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	launch_axpy(buffers, 1.0f);
}

extern "C" void dnn_vec_axpy_cuda(void *buffers[], void *cl_arg)
{
	launch_axpy(buffers, *(const float *)cl_arg);
}

extern "C" void dnn_vec_slice_get_cuda(void *buffers[], void *cl_arg)
{
	const size_t off = *(const size_t *)cl_arg, n = STARPU_VECTOR_GET_NX(buffers[0]);
	float *chunk = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	const float *full = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	if (n == 0)
		return;
	DNN_CUDA_CHECK(cudaMemcpyAsync(chunk, full + off, n * sizeof(float), cudaMemcpyDeviceToDevice,
				       starpu_cuda_get_local_stream()));
}

extern "C" void dnn_vec_slice_put_cuda(void *buffers[], void *cl_arg)
{
	const size_t off = *(const size_t *)cl_arg, n = STARPU_VECTOR_GET_NX(buffers[1]);
	float *full = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	const float *chunk = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
	if (n == 0)
		return;
	DNN_CUDA_CHECK(cudaMemcpyAsync(full + off, chunk, n * sizeof(float), cudaMemcpyDeviceToDevice,
				       starpu_cuda_get_local_stream()));
}
