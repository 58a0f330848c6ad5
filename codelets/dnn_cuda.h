/* dnn_cuda.h — CUDA helpers shared by the .cu files: error checks, per-worker library handles
 * and the per-worker cuDNN workspace.
 *
 * One cuBLAS handle and one cuDNN handle per CUDA worker (ours, not starpu_cublas_init's, which
 * aborts when a handle cannot be made), both bound to the worker's stream and set to the
 * DNN_CUDA_MATH mode (dnn_codelet.h), and one cuDNN workspace block per CUDA worker
 * (DNN_CUDA_WORKSPACE_MB) are created once at start-up by dnn_cuda_init(), never per task.
 * Include only from .cu files (and dnn_cuda.cu); C code uses dnn_cuda_init/shutdown.
 *
 * Error policy: nothing here exits or aborts. A failing CUDA/cuBLAS/cuDNN call inside a task
 * records a worker error (dnn_worker_error: "<file>:<line>: <call> failed: <the library's
 * message> (<library>) in task <name>") and the task returns; dnn_wait_step then ends the run
 * with it.
 */
#ifndef DNN_CUDA_H
#define DNN_CUDA_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
struct dnn_cuda_env;
/* Called after starpu_init(): takes DNN_CUDA_MATH / DNN_CUDA_WORKSPACE_MB (env: dnn_codelet.h
 * dnn_cuda_env, from the execution config) and, on every CUDA
 * worker, creates the cuBLAS and cuDNN handles on its stream, sets their math mode and allocates
 * the workspace.
 * 0 (also when there are no CUDA workers), or -1 with one line in err (what failed, on which
 * worker); then dnn_cuda_shutdown still releases what was made. */
int dnn_cuda_init(const struct dnn_cuda_env *env, char *err, size_t errlen);
void dnn_cuda_shutdown(void);
/* --precision bf16 on the CUDA workers: 0 when every CUDA worker's device has bf16 tensor cores
 * (compute capability 8.0, Ampere, or later: cuDNN's bf16 convolutions need them), or -1 with
 * one line in err naming the first that has not. After starpu_init; 0 without CUDA workers. */
int dnn_cuda_check_bf16(char *err, size_t errlen);
#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

/* 1 when the call failed, after recording the worker error naming it (`call` is the call's
 * text: its function name is kept), file:line and the library's message; 0 on success. */
int dnn_cuda_failed_(cudaError_t e, const char *call, const char *file, int line);
int dnn_cuda_failed_(cublasStatus_t s, const char *call, const char *file, int line);
int dnn_cuda_failed_(cudnnStatus_t s, const char *call, const char *file, int line);
#define DNN_CUDA_FAILED(expr) dnn_cuda_failed_((expr), #expr, __FILE__, __LINE__)

/* In a function returning void (a codelet): on failure, record it and return. The three names
 * say which library is called; they share one implementation (overloaded on the status type). */
#define DNN_CUDA_CHECK(expr)                   \
	do {                                   \
		if (DNN_CUDA_FAILED(expr))     \
			return;                \
	} while (0)
#define DNN_CUBLAS_CHECK(expr) DNN_CUDA_CHECK(expr)
#define DNN_CUDNN_CHECK(expr) DNN_CUDA_CHECK(expr)
/* The same in a function returning a value: on failure, record it and return rv. */
#define DNN_CUDA_CHECK_RET(expr, rv)           \
	do {                                   \
		if (DNN_CUDA_FAILED(expr))     \
			return (rv);           \
	} while (0)

/* Handles of the calling CUDA worker, already bound to starpu_cuda_get_local_stream(). */
cublasHandle_t dnn_cublas_handle(void);
cudnnHandle_t dnn_cudnn_handle(void);

/* 1 when DNN_CUDA_MATH=fp32 (no TF32 anywhere), 0 for tf32 (the default). */
int dnn_cuda_math_fp32(void);

/* The calling worker's cuDNN workspace: its size (allocated once at start-up; algorithm choices
 * must fit it) and the block. dnn_cuda_workspace(bytes) returns the block, NULL for 0 bytes, or
 * NULL with a worker error when bytes exceeds the block (a plan that ignored the cap). */
size_t dnn_cuda_workspace_size(void);
void *dnn_cuda_workspace(size_t bytes);

/* The calling worker's scratch block for the bf16 copies of conv2d.cu (--precision bf16): at
 * least `bytes`, grown on demand (after waiting for the worker's stream, whose queued kernels may
 * still read the old block) and kept until dnn_cuda_shutdown; apart from the cuDNN workspace,
 * whose cap the algorithm choices must respect. NULL with a worker error when the device has no
 * memory for it. */
void *dnn_cuda_scratch(size_t bytes);

/* The GEMMs of the ops with a bf16 mode (dense, lm_head, attention; --precision bf16): bf16 = 0 is
 * cublasSgemm (TF32 or not per DNN_CUDA_MATH), 1 is cublasGemmEx on the same fp32 buffers with
 * CUBLAS_COMPUTE_32F_FAST_16BF: cuBLAS rounds A and B to bf16 for the tensor cores and sums in
 * fp32, the CPU path's arithmetic (gemm_bf16.h), with no bf16 copies to allocate. */
static inline cublasStatus_t dnn_cublas_gemm(int bf16, cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
					     int m, int n, int k, const float *alpha, const float *A, int lda,
					     const float *B, int ldb, const float *beta, float *C, int ldc)
{
	if (!bf16)
		return cublasSgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
	return cublasGemmEx(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, beta, C, CUDA_R_32F, ldc,
			    CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT);
}
static inline cublasStatus_t dnn_cublas_gemm_strided(int bf16, cublasHandle_t h, cublasOperation_t ta,
						     cublasOperation_t tb, int m, int n, int k, const float *alpha,
						     const float *A, int lda, long long sa, const float *B, int ldb,
						     long long sb, const float *beta, float *C, int ldc, long long sc,
						     int batch)
{
	if (!bf16)
		return cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
	return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, sa, B, CUDA_R_32F, ldb, sb, beta,
					  C, CUDA_R_32F, ldc, sc, batch, CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT);
}

#define DNN_CUDA_BLOCKS(n) ((unsigned)(((n) + 255) / 256))
#endif /* __CUDACC__ */
#endif
