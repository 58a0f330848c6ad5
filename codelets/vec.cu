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

/* The bf16 wire (vec.h): the same integer rounding as codelets/gemm_bf16.h dnn_f32_to_bf16 (round to nearest
 * even, NaN quieted), so a GPU worker's message has the CPU's bits (not __float2bfloat16_rn, whose NaN payload
 * and denormal handling are the device's to choose). */
static __device__ __forceinline__ unsigned short f32_to_bf16(float f)
{
	const unsigned u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (unsigned short)((u >> 16) | 0x40u);
	return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static __device__ __forceinline__ float bf16_to_f32(unsigned short h) { return __uint_as_float((unsigned)h << 16); }

static __global__ void vec_to_bf16_kernel(unsigned short *msg, float *src, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n) {
		const unsigned short h = f32_to_bf16(src[i]);
		msg[i] = h;
		src[i] = bf16_to_f32(h);
	}
}

static __global__ void vec_from_bf16_kernel(float *dst, const unsigned short *msg, size_t n, int add)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		dst[i] = add ? dst[i] + bf16_to_f32(msg[i]) : bf16_to_f32(msg[i]);
}

extern "C" void dnn_vec_to_bf16_cuda(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	size_t n = STARPU_VECTOR_GET_NX(buffers[0]);
	if (n == 0)
		return;
	vec_to_bf16_kernel<<<(unsigned)((n + 255) / 256), 256, 0, starpu_cuda_get_local_stream()>>>(
		(unsigned short *)STARPU_VECTOR_GET_PTR(buffers[0]), (float *)STARPU_VECTOR_GET_PTR(buffers[1]), n);
	DNN_CUDA_CHECK(cudaGetLastError());
}

static void launch_from_bf16(void *buffers[], int add)
{
	size_t n = STARPU_VECTOR_GET_NX(buffers[0]);
	if (n == 0)
		return;
	vec_from_bf16_kernel<<<(unsigned)((n + 255) / 256), 256, 0, starpu_cuda_get_local_stream()>>>(
		(float *)STARPU_VECTOR_GET_PTR(buffers[0]), (const unsigned short *)STARPU_VECTOR_GET_PTR(buffers[1]), n,
		add);
	DNN_CUDA_CHECK(cudaGetLastError());
}

extern "C" void dnn_vec_from_bf16_cuda(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	launch_from_bf16(buffers, 0);
}

extern "C" void dnn_vec_add_bf16_cuda(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	launch_from_bf16(buffers, 1);
}
