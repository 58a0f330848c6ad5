/* dense.cu — CUDA side of the fully connected layer: cuBLAS GEMMs plus two small bias kernels.
 *
 * cuBLAS is column-major: a row-major (R,C) buffer is its transpose (C,R) to cuBLAS, so the
 * row-major product C = A B is computed as the column-major C^T = B^T A^T.
 */
#include <starpu.h>

#include "dnn_cuda.h"

extern "C" {
#include "dense.h"
}

/* The plan stores no activation in bf16 when CUDA workers exist (graph/model.c plan_bf16_storage):
 * a bf16 x reaching a CUDA function is a bug, reported, not read as floats. */
#define DENSE_REFUSE_BF16_X(a, what)                                                                       \
	do {                                                                                               \
		if ((a)->x_bf16 || (a)->y_bf16) {                                                          \
			dnn_worker_error("dense %s: a bf16-stored activation reached a CUDA worker", what); \
			return;                                                                            \
		}                                                                                          \
	} while (0)

// y (N,OUT) += b (OUT) broadcast over rows
static __global__ void dense_bias_fwd_kernel(float *y, const float *b, size_t n, int OUT)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		y[i] += b[i % (size_t)OUT];
}

// db (OUT) += sum over N of dy (N,OUT); one thread per output column, coalesced across threads
static __global__ void dense_bias_bwd_kernel(float *db, const float *dy, int N, int OUT)
{
	int o = blockIdx.x * blockDim.x + threadIdx.x;
	if (o >= OUT)
		return;
	float sum = 0.0f;
	for (int n = 0; n < N; n++)
		sum += dy[(size_t)n * OUT + o];
	db[o] += sum;
}

extern "C" void dnn_dense_fwd_cuda(void *buffers[], void *cl_arg)
{
	const dnn_dense_args *a = (const dnn_dense_args *)cl_arg;
	DENSE_REFUSE_BF16_X(a, "forward");
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->IN);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->OUT * a->IN);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->OUT);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == (size_t)a->N * a->OUT);
	const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]); // (N,IN)
	const float *w = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]); // (OUT,IN)
	const float *b = (const float *)STARPU_VECTOR_GET_PTR(buffers[2]); // (OUT)
	float *y = (float *)STARPU_VECTOR_GET_PTR(buffers[3]);             // (N,OUT)
	int N = a->N, IN = a->IN, OUT = a->OUT;
	if (N == 0 || OUT == 0)
		return;
	cudaStream_t stream = starpu_cuda_get_local_stream();
	size_t n = (size_t)N * OUT;
	if (IN > 0) {
		// y^T (OUT,N) = w (OUT,IN) x^T (IN,N); w's buffer is w^T (IN,OUT) to cuBLAS, hence OP_T
		const float alpha = 1.0f, beta = 0.0f;
		DNN_CUBLAS_CHECK(dnn_cublas_gemm(a->bf16, dnn_cublas_handle(), CUBLAS_OP_T, CUBLAS_OP_N, OUT, N, IN, &alpha, w,
					     IN, x, IN, &beta, y, OUT));
	} else {
		DNN_CUDA_CHECK(cudaMemsetAsync(y, 0, n * sizeof(float), stream));
	}
	dense_bias_fwd_kernel<<<DNN_CUDA_BLOCKS(n), 256, 0, stream>>>(y, b, n, OUT);
	DNN_CUDA_CHECK(cudaGetLastError());
}

extern "C" void dnn_dense_bwd_data_cuda(void *buffers[], void *cl_arg)
{
	const dnn_dense_args *a = (const dnn_dense_args *)cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->OUT);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->OUT * a->IN);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->N * a->IN);
	const float *dy = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]); // (N,OUT)
	const float *w = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);  // (OUT,IN)
	float *dx = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);             // (N,IN)
	int N = a->N, IN = a->IN, OUT = a->OUT;
	if (N == 0 || IN == 0)
		return;
	if (OUT == 0) {
		if (!a->accumulate_dx)
			DNN_CUDA_CHECK(cudaMemsetAsync(dx, 0, (size_t)N * IN * sizeof(float),
						       starpu_cuda_get_local_stream()));
		return;
	}
	// dx^T (IN,N) = w^T (IN,OUT) dy^T (OUT,N); both buffers are already those transposes
	const float alpha = 1.0f, beta = a->accumulate_dx ? 1.0f : 0.0f;
	DNN_CUBLAS_CHECK(dnn_cublas_gemm(a->bf16, dnn_cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N, IN, N, OUT, &alpha, w, IN, dy,
				     OUT, &beta, dx, IN));
}

extern "C" void dnn_dense_bwd_weight_cuda(void *buffers[], void *cl_arg)
{
	const dnn_dense_args *a = (const dnn_dense_args *)cl_arg;
	DENSE_REFUSE_BF16_X(a, "backward weight");
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->IN);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->N * a->OUT);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->OUT * a->IN);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == (size_t)a->OUT);
	const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);  // (N,IN)
	const float *dy = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]); // (N,OUT)
	float *dw = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);             // (OUT,IN) +=
	float *db = (float *)STARPU_VECTOR_GET_PTR(buffers[3]);             // (OUT) +=
	int N = a->N, IN = a->IN, OUT = a->OUT;
	if (N == 0 || OUT == 0)
		return;
	if (IN > 0) {
		// dw^T (IN,OUT) += x^T (IN,N) dy (N,OUT); dy's buffer is dy^T (OUT,N), hence OP_T
		const float alpha = 1.0f, beta = 1.0f;
		DNN_CUBLAS_CHECK(dnn_cublas_gemm(a->bf16, dnn_cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_T, IN, OUT, N, &alpha, x,
					     IN, dy, OUT, &beta, dw, IN));
	}
	dense_bias_bwd_kernel<<<DNN_CUDA_BLOCKS(OUT), 256, 0, starpu_cuda_get_local_stream()>>>(db, dy, N, OUT);
	DNN_CUDA_CHECK(cudaGetLastError());
}

/* Without a bias (lm_head's tied output layer): the same GEMMs, y with beta 0. */
extern "C" void dnn_dense_fwd_nobias_cuda(void *buffers[], void *cl_arg)
{
	const dnn_dense_args *a = (const dnn_dense_args *)cl_arg;
	DENSE_REFUSE_BF16_X(a, "forward");
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->IN);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->OUT * a->IN);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->N * a->OUT);
	const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]); // (N,IN)
	const float *w = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]); // (OUT,IN)
	float *y = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);             // (N,OUT)
	int N = a->N, IN = a->IN, OUT = a->OUT;
	if (N == 0 || OUT == 0)
		return;
	if (IN == 0) {
		DNN_CUDA_CHECK(cudaMemsetAsync(y, 0, (size_t)N * OUT * sizeof(float), starpu_cuda_get_local_stream()));
		return;
	}
	// y^T (OUT,N) = w (OUT,IN) x^T (IN,N), as dnn_dense_fwd_cuda
	const float alpha = 1.0f, beta = 0.0f;
	DNN_CUBLAS_CHECK(dnn_cublas_gemm(a->bf16, dnn_cublas_handle(), CUBLAS_OP_T, CUBLAS_OP_N, OUT, N, IN, &alpha, w, IN, x, IN,
				     &beta, y, OUT));
}

extern "C" void dnn_dense_bwd_weight_nobias_cuda(void *buffers[], void *cl_arg)
{
	const dnn_dense_args *a = (const dnn_dense_args *)cl_arg;
	DENSE_REFUSE_BF16_X(a, "backward weight");
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->IN);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->N * a->OUT);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->OUT * a->IN);
	const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);  // (N,IN)
	const float *dy = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]); // (N,OUT)
	float *dw = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);             // (OUT,IN) +=
	int N = a->N, IN = a->IN, OUT = a->OUT;
	if (N == 0 || OUT == 0 || IN == 0)
		return;
	// dw^T (IN,OUT) += x^T (IN,N) dy (N,OUT), as dnn_dense_bwd_weight_cuda
	const float alpha = 1.0f, beta = 1.0f;
	DNN_CUBLAS_CHECK(dnn_cublas_gemm(a->bf16, dnn_cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_T, IN, OUT, N, &alpha, x, IN, dy, OUT,
				     &beta, dw, IN));
}
