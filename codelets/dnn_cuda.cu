/* dnn_cuda.cu — per-CUDA-worker cuBLAS/cuDNN handles, math mode and cuDNN workspaces; the
 * error recording of the check macros (dnn_cuda.h). */
#include <pthread.h>
#include <starpu.h>
#include <stdint.h>
#include <string.h>

#include "dnn_cuda.h"
#include "dnn_staging.h"

extern "C" {
#include "dnn_codelet.h"
}

static cublasHandle_t cublas_handles[STARPU_NMAXWORKERS];
static cudnnHandle_t cudnn_handles[STARPU_NMAXWORKERS];
static void *workspaces[STARPU_NMAXWORKERS];
static size_t workspace_bytes[STARPU_NMAXWORKERS];
static unsigned workspace_node[STARPU_NMAXWORKERS];
static void *scratches[STARPU_NMAXWORKERS]; /* dnn_cuda_scratch: the bf16 copies, grown on demand */
static size_t scratch_bytes[STARPU_NMAXWORKERS];
static int math_fp32;
static size_t workspace_want; /* bytes; SIZE_MAX: the default cap, per device */

/* ---------------------------------------------------------------- errors */
/* "codelets/conv2d.cu" from nvcc's __FILE__ (often an absolute path): from the last folder on. */
static const char *short_file(const char *file)
{
	const char *last = NULL, *prev = NULL;
	for (const char *c = file; *c; c++)
		if (*c == '/')
			prev = last, last = c;
	return prev ? prev + 1 : last ? last + 1 : file;
}

static void record(const char *lib, const char *msg, const char *call, const char *file, int line)
{
	char fn[96];
	size_t n = 0;
	while (call[n] && call[n] != '(' && call[n] != ' ' && n + 1 < sizeof(fn))
		n++;
	memcpy(fn, call, n);
	fn[n] = '\0';
	struct starpu_task *t = starpu_task_get_current();
	const char *task = t && t->name ? t->name : NULL;
	const int launch = strcmp(fn, "cudaGetLastError") == 0; /* checked right after a <<<...>>> */
	dnn_worker_error("%s:%d: %s%s failed: %s (%s)%s%s", short_file(file), line, launch ? "kernel launch, " : "", fn,
			 msg, lib, task ? " in task " : "", task ? task : "");
}

int dnn_cuda_failed_(cudaError_t e, const char *call, const char *file, int line)
{
	if (e == cudaSuccess)
		return 0;
	record("CUDA", cudaGetErrorString(e), call, file, line);
	return 1;
}

int dnn_cuda_failed_(cublasStatus_t s, const char *call, const char *file, int line)
{
	if (s == CUBLAS_STATUS_SUCCESS)
		return 0;
	record("cuBLAS", cublasGetStatusString(s), call, file, line);
	return 1;
}

int dnn_cuda_failed_(cudnnStatus_t s, const char *call, const char *file, int line)
{
	if (s == CUDNN_STATUS_SUCCESS)
		return 0;
	record("cuDNN", cudnnGetErrorString(s), call, file, line);
	return 1;
}

/* ---------------------------------------------------------------- set-up, per worker */
/* The first set-up failure of any worker (worker threads run set_up concurrently). */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static char init_err[512];

static void init_fail(int w, const char *fmt, const char *what, const char *msg)
{
	pthread_mutex_lock(&init_lock);
	if (!init_err[0]) {
		char name[64];
		starpu_worker_get_name(w, name, sizeof(name));
		char line[400];
		snprintf(line, sizeof(line), fmt, what, msg);
		snprintf(init_err, sizeof(init_err), "CUDA worker %d (%s): %s", w, name, line);
	}
	pthread_mutex_unlock(&init_lock);
}

static void set_up(void *arg)
{
	(void)arg;
	int w = starpu_worker_get_id_check();
	cudnnStatus_t ds = cudnnCreate(&cudnn_handles[w]);
	if (ds != CUDNN_STATUS_SUCCESS) {
		cudnn_handles[w] = NULL;
		init_fail(w, "%s failed: %s", "cudnnCreate", cudnnGetErrorString(ds));
		return;
	}
	ds = cudnnSetStream(cudnn_handles[w], starpu_cuda_get_local_stream());
	if (ds != CUDNN_STATUS_SUCCESS) {
		init_fail(w, "%s failed: %s", "cudnnSetStream", cudnnGetErrorString(ds));
		return;
	}
	/* Our own cuBLAS handle (starpu_cublas_init aborts the process when a handle cannot be
	 * made): on the worker's stream; CUBLAS_DEFAULT_MATH computes SGEMM in FP32,
	 * CUBLAS_TF32_TENSOR_OP_MATH allows TF32 tensor cores. */
	cublasStatus_t bs = cublasCreate(&cublas_handles[w]);
	if (bs != CUBLAS_STATUS_SUCCESS) {
		cublas_handles[w] = NULL;
		init_fail(w, "%s failed: %s", "cublasCreate", cublasGetStatusString(bs));
		return;
	}
	bs = cublasSetStream(cublas_handles[w], starpu_cuda_get_local_stream());
	if (bs != CUBLAS_STATUS_SUCCESS) {
		init_fail(w, "%s failed: %s", "cublasSetStream", cublasGetStatusString(bs));
		return;
	}
	bs = cublasSetMathMode(cublas_handles[w], math_fp32 ? CUBLAS_DEFAULT_MATH : CUBLAS_TF32_TENSOR_OP_MATH);
	if (bs != CUBLAS_STATUS_SUCCESS) {
		init_fail(w, "%s failed: %s", "cublasSetMathMode", cublasGetStatusString(bs));
		return;
	}
	/* The workspace: through StarPU, so its memory accounting knows it (starpu_malloc_on_node
	 * counts it on the worker's memory node). Default cap: DNN_CUDA_WORKSPACE_DEFAULT_MB, at most
	 * 1/16 of the device's memory. */
	size_t want = workspace_want;
	if (want == SIZE_MAX) {
		want = (size_t)DNN_CUDA_WORKSPACE_DEFAULT_MB << 20;
		size_t free_b = 0, total_b = 0;
		cudaError_t ce = cudaMemGetInfo(&free_b, &total_b);
		if (ce != cudaSuccess) {
			init_fail(w, "%s failed: %s", "cudaMemGetInfo", cudaGetErrorString(ce));
			return;
		}
		if (want > total_b / 16)
			want = total_b / 16;
	}
	if (want > 0) {
		unsigned node = starpu_worker_get_memory_node(w);
		uintptr_t p = starpu_malloc_on_node(node, want);
		if (!p) {
			char what[160];
			snprintf(what, sizeof(what), "allocating its %zu MiB cuDNN workspace", want >> 20);
			init_fail(w, "%s failed: %s", what, "out of device memory (lower DNN_CUDA_WORKSPACE_MB)");
			return;
		}
		workspaces[w] = (void *)p;
		workspace_bytes[w] = want;
		workspace_node[w] = node;
	}
}

static void tear_down(void *arg)
{
	(void)arg;
	int w = starpu_worker_get_id_check();
	dnn_cuda_staging_release(); /* the loaders' pinned blocks (dnn_staging.h) */
	/* Kernels queued by the last tasks may still use the workspace: wait for the stream. Errors
	 * here cannot be reported to a run that is over; the next call would see them anyway. */
	(void)cudaStreamSynchronize(starpu_cuda_get_local_stream());
	if (workspaces[w]) {
		starpu_free_on_node(workspace_node[w], (uintptr_t)workspaces[w], workspace_bytes[w]);
		workspaces[w] = NULL;
		workspace_bytes[w] = 0;
	}
	if (scratches[w]) {
		starpu_free_on_node(starpu_worker_get_memory_node(w), (uintptr_t)scratches[w], scratch_bytes[w]);
		scratches[w] = NULL;
		scratch_bytes[w] = 0;
	}
	if (cudnn_handles[w]) {
		(void)cudnnDestroy(cudnn_handles[w]);
		cudnn_handles[w] = NULL;
	}
	if (cublas_handles[w]) {
		(void)cublasDestroy(cublas_handles[w]);
		cublas_handles[w] = NULL;
	}
}

extern "C" int dnn_cuda_init(const struct dnn_cuda_env *env, char *err, size_t errlen)
{
	math_fp32 = env->fp32; /* the handles' math mode, from the execution config */
	workspace_want = env->workspace_mb < 0 ? SIZE_MAX : (size_t)env->workspace_mb << 20;
	if (starpu_cuda_worker_get_count() == 0)
		return 0;
	init_err[0] = '\0';
	starpu_execute_on_each_worker(set_up, NULL, STARPU_CUDA);
	if (init_err[0]) {
		snprintf(err, errlen, "cuBLAS/cuDNN set-up: %s", init_err);
		return -1;
	}
	return 0;
}

extern "C" int dnn_cuda_check_bf16(char *err, size_t errlen)
{
	int ids[STARPU_NMAXWORKERS];
	unsigned n = starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, ids, STARPU_NMAXWORKERS);
	for (unsigned i = 0; i < n; i++) {
		int dev = starpu_worker_get_devid(ids[i]), major = 0, minor = 0;
		cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
		if (e == cudaSuccess)
			e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
		if (e != cudaSuccess) {
			snprintf(err, errlen, "--precision bf16: cudaDeviceGetAttribute of CUDA device %d failed: %s", dev,
				 cudaGetErrorString(e));
			return -1;
		}
		if (major < 8) {
			char name[64];
			starpu_worker_get_name(ids[i], name, sizeof(name));
			snprintf(err, errlen, "--precision bf16: CUDA worker %d (%s) has compute capability %d.%d; bf16 "
					      "tensor cores need 8.0 (Ampere) or later: use --precision fp32", ids[i], name,
				 major, minor);
			return -1;
		}
	}
	return 0;
}

extern "C" void dnn_cuda_shutdown(void)
{
	if (starpu_cuda_worker_get_count() == 0)
		return;
	starpu_execute_on_each_worker(tear_down, NULL, STARPU_CUDA);
}

/* ---------------------------------------------------------------- in tasks */
cublasHandle_t dnn_cublas_handle(void)
{
	return cublas_handles[starpu_worker_get_id_check()];
}

cudnnHandle_t dnn_cudnn_handle(void)
{
	return cudnn_handles[starpu_worker_get_id_check()];
}

int dnn_cuda_math_fp32(void)
{
	return math_fp32;
}

size_t dnn_cuda_workspace_size(void)
{
	return workspace_bytes[starpu_worker_get_id_check()];
}

void *dnn_cuda_workspace(size_t bytes)
{
	int w = starpu_worker_get_id_check();
	if (bytes == 0)
		return NULL;
	if (bytes > workspace_bytes[w]) {
		dnn_worker_error("cuDNN workspace: %zu bytes asked, the worker has %zu (DNN_CUDA_WORKSPACE_MB)", bytes,
				 workspace_bytes[w]);
		return NULL;
	}
	return workspaces[w];
}

void *dnn_cuda_scratch(size_t bytes)
{
	int w = starpu_worker_get_id_check();
	if (bytes <= scratch_bytes[w])
		return scratches[w];
	unsigned node = starpu_worker_get_memory_node(w);
	if (scratches[w]) {
		/* Kernels of earlier tasks on this stream may still read the old block. */
		DNN_CUDA_CHECK_RET(cudaStreamSynchronize(starpu_cuda_get_local_stream()), NULL);
		starpu_free_on_node(node, (uintptr_t)scratches[w], scratch_bytes[w]);
		scratches[w] = NULL;
		scratch_bytes[w] = 0;
	}
	size_t want = dnn_cuda_scratch_alloc_bytes(bytes); /* whole MiB, an eighth more than asked */
	uintptr_t p = starpu_malloc_on_node(node, want);
	if (!p) {
		dnn_worker_error("bf16 scratch: no device memory for %zu MiB (the bf16 copies of a conv's operands; "
				 "a smaller --batch or more --chunks need less)", want >> 20);
		return NULL;
	}
	scratches[w] = (void *)p;
	scratch_bytes[w] = want;
	return scratches[w];
}
