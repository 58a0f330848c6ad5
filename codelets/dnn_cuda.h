/* dnn_cuda.h — CUDA helpers shared by the .cu files: error checks and per-worker library handles.
 *
 * One cuBLAS handle (StarPU's, from starpu_cublas_init) and one cuDNN handle per CUDA worker,
 * both bound to the worker's stream, are created once at start-up by dnn_cuda_init(), never per
 * task. Include only from .cu files (and dnn_cuda.cu); C code uses dnn_cuda_init/shutdown.
 */
#ifndef DNN_CUDA_H
#define DNN_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif
/* Called after starpu_init(); no-op when there are no CUDA workers. Returns 0 or exits. */
int dnn_cuda_init(void);
void dnn_cuda_shutdown(void);
#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>

#define DNN_CUDA_CHECK(expr)                                                                   \
	do {                                                                                   \
		cudaError_t dnn_e_ = (expr);                                                   \
		if (dnn_e_ != cudaSuccess) {                                                   \
			fprintf(stderr, "%s:%d: CUDA error in %s: %s\n", __FILE__, __LINE__, #expr, \
				cudaGetErrorString(dnn_e_));                                   \
			exit(1);                                                               \
		}                                                                              \
	} while (0)

#define DNN_CUBLAS_CHECK(expr)                                                                 \
	do {                                                                                   \
		cublasStatus_t dnn_s_ = (expr);                                                \
		if (dnn_s_ != CUBLAS_STATUS_SUCCESS) {                                         \
			fprintf(stderr, "%s:%d: cuBLAS error in %s: %s\n", __FILE__, __LINE__, #expr, \
				cublasGetStatusString(dnn_s_));                                \
			exit(1);                                                               \
		}                                                                              \
	} while (0)

#define DNN_CUDNN_CHECK(expr)                                                                  \
	do {                                                                                   \
		cudnnStatus_t dnn_s_ = (expr);                                                 \
		if (dnn_s_ != CUDNN_STATUS_SUCCESS) {                                          \
			fprintf(stderr, "%s:%d: cuDNN error in %s: %s\n", __FILE__, __LINE__, #expr, \
				cudnnGetErrorString(dnn_s_));                                  \
			exit(1);                                                               \
		}                                                                              \
	} while (0)

/* Handles of the calling CUDA worker, already bound to starpu_cuda_get_local_stream(). */
cublasHandle_t dnn_cublas_handle(void);
cudnnHandle_t dnn_cudnn_handle(void);

/* Per-worker device workspace for cuDNN; grows on demand (synchronising the worker stream
 * before freeing the old block). */
void *dnn_cuda_workspace(size_t bytes);

#define DNN_CUDA_BLOCKS(n) ((unsigned)(((n) + 255) / 256))
#endif /* __CUDACC__ */
#endif
