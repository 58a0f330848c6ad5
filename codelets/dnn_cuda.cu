/* dnn_cuda.cu — per-CUDA-worker cuBLAS/cuDNN handles and workspaces. */
#include <starpu.h>
#include <starpu_cublas_v2.h>

#include "dnn_cuda.h"
#include "dnn_staging.h"

static cudnnHandle_t cudnn_handles[STARPU_NMAXWORKERS];
static void *workspaces[STARPU_NMAXWORKERS];
static size_t workspace_bytes[STARPU_NMAXWORKERS];

static void create_cudnn(void *arg)
{
	(void)arg;
	int w = starpu_worker_get_id_check();
	DNN_CUDNN_CHECK(cudnnCreate(&cudnn_handles[w]));
	DNN_CUDNN_CHECK(cudnnSetStream(cudnn_handles[w], starpu_cuda_get_local_stream()));
}

static void destroy_cudnn(void *arg)
{
	(void)arg;
	int w = starpu_worker_get_id_check();
	dnn_cuda_staging_release(); /* the loaders' pinned blocks (dnn_staging.h) */
	if (workspaces[w]) {
		DNN_CUDA_CHECK(cudaStreamSynchronize(starpu_cuda_get_local_stream()));
		DNN_CUDA_CHECK(cudaFree(workspaces[w]));
		workspaces[w] = NULL;
		workspace_bytes[w] = 0;
	}
	if (cudnn_handles[w]) {
		DNN_CUDNN_CHECK(cudnnDestroy(cudnn_handles[w]));
		cudnn_handles[w] = NULL;
	}
}

extern "C" int dnn_cuda_init(void)
{
	if (starpu_cuda_worker_get_count() == 0)
		return 0;
	starpu_cublas_init();
	starpu_execute_on_each_worker(create_cudnn, NULL, STARPU_CUDA);
	return 0;
}

extern "C" void dnn_cuda_shutdown(void)
{
	if (starpu_cuda_worker_get_count() == 0)
		return;
	starpu_execute_on_each_worker(destroy_cudnn, NULL, STARPU_CUDA);
	starpu_cublas_shutdown();
}

cublasHandle_t dnn_cublas_handle(void)
{
	return starpu_cublas_get_local_handle();
}

cudnnHandle_t dnn_cudnn_handle(void)
{
	return cudnn_handles[starpu_worker_get_id_check()];
}

void *dnn_cuda_workspace(size_t bytes)
{
	int w = starpu_worker_get_id_check();
	if (bytes > workspace_bytes[w]) {
		if (workspaces[w]) {
			DNN_CUDA_CHECK(cudaStreamSynchronize(starpu_cuda_get_local_stream()));
			DNN_CUDA_CHECK(cudaFree(workspaces[w]));
		}
		DNN_CUDA_CHECK(cudaMalloc(&workspaces[w], bytes));
		workspace_bytes[w] = bytes;
	}
	return workspaces[w];
}
