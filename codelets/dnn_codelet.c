/* dnn_codelet.c — shared codelet helpers: perf-model footprint, argument copies, the MPI insert,
 * worker errors and CPU scratch memory. */
#include "dnn_codelet.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

uint32_t dnn_args_footprint(struct starpu_task *task)
{
	uint32_t fp = starpu_task_data_footprint(task);
	if (task->cl_arg && task->cl_arg_size > 0)
		fp = starpu_hash_crc32c_be_n(task->cl_arg, task->cl_arg_size, fp);
	return fp;
}

/* The dnn_cuda_cl section (DNN_CUDA_DECLARED); weak: NULL when no codelet is registered. */
extern struct starpu_codelet *__start_dnn_cuda_cl[] __attribute__((weak, visibility("hidden")));
extern struct starpu_codelet *__stop_dnn_cuda_cl[] __attribute__((weak, visibility("hidden")));

struct starpu_codelet *const *dnn_cuda_codelets(size_t *n)
{
	*n = __start_dnn_cuda_cl ? (size_t)(__stop_dnn_cuda_cl - __start_dnn_cuda_cl) : 0;
	return __start_dnn_cuda_cl;
}

int dnn_codelet_declares_cuda(const struct starpu_codelet *cl)
{
	size_t n;
	struct starpu_codelet *const *all = dnn_cuda_codelets(&n);
	for (size_t i = 0; i < n; i++)
		if (all[i] == cl)
			return 1;
	return 0;
}

void *dnn_args_dup(const void *args, size_t size)
{
	void *c = malloc(size ? size : 1);
	if (c && size)
		memcpy(c, args, size);
	return c;
}

static void (*g_submit_hook)(struct starpu_task *task, int mpi);

void dnn_task_set_submit_hook(void (*hook)(struct starpu_task *task, int mpi)) { g_submit_hook = hook; }

/* The hook, then starpu_task_submit; a task whose submission fails is destroyed (which frees its
 * STARPU_CL_ARGS copy), as starpu_task_insert and starpu_mpi_task_insert do. */
static int submit(struct starpu_task *task, int mpi)
{
	if (g_submit_hook)
		g_submit_hook(task, mpi);
	int rc = starpu_task_submit(task);
	if (rc != 0) {
		task->destroy = 0;
		starpu_task_destroy(task);
	}
	return rc;
}

int dnn_task_submit_(struct starpu_task *task)
{
	if (!task)
		return -EINVAL; /* starpu_task_build rejected the list (it says why) */
	return submit(task, 0);
}

int dnn_mpi_task_insert_(void *args, struct starpu_codelet *cl, ...)
{
	va_list ap;
	va_start(ap, cl);
	struct starpu_task *task = starpu_mpi_task_build_v(MPI_COMM_WORLD, cl, ap);
	va_end(ap);
	if (task) {
		int rc = submit(task, 1);
		if (rc != 0) /* as starpu_mpi_task_insert: no post-build after a failed submit */
			return rc;
	} else {
		free(args); /* another rank runs the task, or the list was rejected (post_build says) */
	}
	va_start(ap, cl);
	int rc = starpu_mpi_task_post_build_v(MPI_COMM_WORLD, cl, ap);
	va_end(ap);
	return rc;
}

#define DNN_MASK_WORDS ((STARPU_NMAXWORKERS + 31) / 32)
static uint32_t worker_masks[STARPU_NMAXWORKERS][DNN_MASK_WORDS];
static pthread_once_t worker_masks_once = PTHREAD_ONCE_INIT;

static void worker_masks_init(void)
{
	for (int w = 0; w < STARPU_NMAXWORKERS; w++)
		worker_masks[w][w / 32] = 1u << (w % 32);
}

const uint32_t *dnn_worker_mask(int worker)
{
	pthread_once(&worker_masks_once, worker_masks_init);
	return worker_masks[worker];
}

static _Thread_local float *scratch;
static _Thread_local size_t scratch_len;
/* A second buffer: a kernel's own data around a conv kernel, which takes the first (conv2d_bnfuse.c). */
static _Thread_local float *scratch_aux;
static _Thread_local size_t scratch_aux_len;

/* *buf grown to at least nfloats (kept on failure); NULL when out of memory. */
static float *scratch_grow(float **buf, size_t *len, size_t nfloats)
{
	if (nfloats > *len) {
		float *p = realloc(*buf, nfloats * sizeof(float));
		if (!p)
			return NULL;
		*buf = p;
		*len = nfloats;
	}
	return *buf;
}

float *dnn_cpu_scratch(size_t nfloats) { return scratch_grow(&scratch, &scratch_len, nfloats); }
float *dnn_cpu_scratch_aux(size_t nfloats) { return scratch_grow(&scratch_aux, &scratch_aux_len, nfloats); }

void dnn_cpu_scratch_release(void)
{
	free(scratch);
	scratch = NULL;
	scratch_len = 0;
	free(scratch_aux);
	scratch_aux = NULL;
	scratch_aux_len = 0;
}

/* ---------------------------------------------------------------- worker errors */
static pthread_mutex_t worker_error_lock = PTHREAD_MUTEX_INITIALIZER;
static char worker_error_msg[512];
static int worker_error_set, worker_error_reported;

void dnn_worker_error(const char *fmt, ...)
{
	pthread_mutex_lock(&worker_error_lock);
	if (!worker_error_set) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(worker_error_msg, sizeof(worker_error_msg), fmt, ap);
		va_end(ap);
		worker_error_set = 1;
	}
	pthread_mutex_unlock(&worker_error_lock);
}

int dnn_worker_error_get(char *msg, size_t len)
{
	pthread_mutex_lock(&worker_error_lock);
	int set = worker_error_set;
	if (set && msg && len)
		snprintf(msg, len, "%s", worker_error_msg);
	if (set)
		worker_error_reported = 1;
	pthread_mutex_unlock(&worker_error_lock);
	return set;
}

int dnn_worker_error_unreported(char *msg, size_t len)
{
	pthread_mutex_lock(&worker_error_lock);
	int pending = worker_error_set && !worker_error_reported;
	if (pending && msg && len)
		snprintf(msg, len, "%s", worker_error_msg);
	if (pending)
		worker_error_reported = 1;
	pthread_mutex_unlock(&worker_error_lock);
	return pending;
}

#ifdef DNN_SIMGRID
/* StarPU does not run codelets in SimGrid mode, with one exception: a STARPU_REDUX handle's
 * per-worker copies are initialised by calling the init codelet's function directly
 * (datawizard/reduction.c). There is no data to initialise in a simulation, so: nothing. */
void dnn_sim_cuda_placeholder(void *buffers[], void *cl_arg)
{
	(void)buffers, (void)cl_arg;
}
#endif
