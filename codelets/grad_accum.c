/* grad_accum.c — the gradient-accumulation pair used as STARPU_REDUX methods.
 *
 * Every weight-gradient handle is registered with cl_grad_zero as its init method and
 * cl_grad_accum as its reduction method (docs/ARCHITECTURE.md, "The training DAG"). Backward
 * tasks += into a per-worker zeroed copy; StarPU then reduces the copies, CPU or GPU, with these
 * codelets.
 */
#include "grad_accum.h"
#include "dnn_codelet.h"

#include <stdlib.h>
#include <string.h>

void dnn_grad_zero_cpu(float *dst, size_t n)
{
	memset(dst, 0, n * sizeof(float));
}

void dnn_grad_accum_cpu(float *dst, const float *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] += src[i];
}

void dnn_grad_axpy_cpu(float *dst, float alpha, const float *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] += alpha * src[i];
}

static void grad_zero_cpu_task(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	dnn_grad_zero_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[0]), STARPU_VECTOR_GET_NX(buffers[0]));
}

static void grad_accum_cpu_task(void *buffers[], void *cl_arg)
{
	(void)cl_arg;
	size_t n = STARPU_VECTOR_GET_NX(buffers[0]);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n);
	dnn_grad_accum_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[0]),
			   (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), n);
}

static void grad_axpy_cpu_task(void *buffers[], void *cl_arg)
{
	const float alpha = *(const float *)cl_arg;
	size_t n = STARPU_VECTOR_GET_NX(buffers[0]);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == n);
	dnn_grad_axpy_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[0]), alpha,
			  (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), n);
}

static struct starpu_perfmodel grad_zero_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "dnn_cl_grad_zero",
};
static struct starpu_perfmodel grad_accum_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "dnn_cl_grad_accum",
};

/* Reduction methods are called by StarPU itself, so their modes are fixed here. */
struct starpu_codelet cl_grad_zero = {
	.name = "cl_grad_zero",
	.cpu_funcs = {grad_zero_cpu_task},
	.cpu_funcs_name = {"grad_zero_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_grad_zero_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = 1,
	.modes = {STARPU_W},
	.model = &grad_zero_model,
	.color = DNN_COLOR_REDUX,
};
DNN_CUDA_DECLARED(cl_grad_zero);

/* The simulation build declares the reduction method synchronous on CUDA workers. StarPU runs it
 * as an internal task (datawizard/reduction.c: redux_task_*), and StarPU 1.4.10's SimGrid mode skips
 * internal jobs (_starpu_simgrid_submit_job returns at once) without marking the CUDA pipeline slot
 * finished or waking the worker: an asynchronous one leaves the CUDA worker asleep with the task in
 * its pipeline, and the run ends in SimGrid's "Deadlock detected". A
 * synchronous one is finished by the driver itself, right after it is "run". Real builds keep it
 * asynchronous. */
#ifdef DNN_SIMGRID
#define DNN_REDUX_CUDA_FLAGS 0
#else
#define DNN_REDUX_CUDA_FLAGS STARPU_CUDA_ASYNC
#endif

struct starpu_codelet cl_grad_accum = {
	.name = "cl_grad_accum",
	.cpu_funcs = {grad_accum_cpu_task},
	.cpu_funcs_name = {"grad_accum_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_grad_accum_cuda)},
	.cuda_flags = {DNN_REDUX_CUDA_FLAGS},
	.nbuffers = 2,
	.modes = {STARPU_RW | STARPU_COMMUTE, STARPU_R},
	.model = &grad_accum_model,
	.color = DNN_COLOR_REDUX,
};
DNN_CUDA_DECLARED(cl_grad_accum);

/* Same kernel as cl_grad_accum but with modes chosen at insert time, for tasks that contribute
 * to a gradient (STARPU_REDUX) or add into an activation gradient (STARPU_RW). StarPU rejects a
 * REDUX access through a codelet whose static mode is RW|COMMUTE, hence the twin. */
struct starpu_codelet cl_grad_add = {
	.name = "cl_grad_add",
	.cpu_funcs = {grad_accum_cpu_task},
	.cpu_funcs_name = {"grad_accum_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_grad_accum_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = STARPU_VARIABLE_NBUFFERS, /* 2 buffers; see dnn_codelet.h */
	.model = &grad_accum_model,
	.color = DNN_COLOR_REDUX,
};
DNN_CUDA_DECLARED(cl_grad_add);

static struct starpu_perfmodel grad_axpy_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "dnn_cl_grad_axpy",
};

/* Scaled add, for the async mode's staleness compensation (graph/dist.c). */
struct starpu_codelet cl_grad_axpy = {
	.name = "cl_grad_axpy",
	.cpu_funcs = {grad_axpy_cpu_task},
	.cpu_funcs_name = {"grad_axpy_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_grad_axpy_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = 2,
	.modes = {STARPU_RW, STARPU_R},
	.model = &grad_axpy_model,
	.color = DNN_COLOR_UPDATE,
};
DNN_CUDA_DECLARED(cl_grad_axpy);

static void grad_slice_get_cpu_task(void *buffers[], void *cl_arg)
{
	const size_t off = *(const size_t *)cl_arg, n = STARPU_VECTOR_GET_NX(buffers[0]);
	STARPU_ASSERT(off + n <= STARPU_VECTOR_GET_NX(buffers[1]));
	memcpy((float *)STARPU_VECTOR_GET_PTR(buffers[0]), (const float *)STARPU_VECTOR_GET_PTR(buffers[1]) + off,
	       n * sizeof(float));
}

static void grad_slice_put_cpu_task(void *buffers[], void *cl_arg)
{
	const size_t off = *(const size_t *)cl_arg, n = STARPU_VECTOR_GET_NX(buffers[1]);
	STARPU_ASSERT(off + n <= STARPU_VECTOR_GET_NX(buffers[0]));
	memcpy((float *)STARPU_VECTOR_GET_PTR(buffers[0]) + off, (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
	       n * sizeof(float));
}

static struct starpu_perfmodel grad_slice_get_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "dnn_cl_grad_slice_get",
};
static struct starpu_perfmodel grad_slice_put_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "dnn_cl_grad_slice_put",
};

/* Ring all-reduce: a rank's chunk of its local gradient, a chunk forwarded along the ring
 * (offset 0, same length), and the reduced chunks written back into the full gradient. */
struct starpu_codelet cl_grad_slice_get = {
	.name = "cl_grad_slice_get",
	.cpu_funcs = {grad_slice_get_cpu_task},
	.cpu_funcs_name = {"grad_slice_get_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_grad_slice_get_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = 2,
	.modes = {STARPU_W, STARPU_R},
	.model = &grad_slice_get_model,
	.color = DNN_COLOR_REDUX,
};
DNN_CUDA_DECLARED(cl_grad_slice_get);

struct starpu_codelet cl_grad_slice_put = {
	.name = "cl_grad_slice_put",
	.cpu_funcs = {grad_slice_put_cpu_task},
	.cpu_funcs_name = {"grad_slice_put_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_grad_slice_put_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = 2,
	.modes = {STARPU_RW, STARPU_R},
	.model = &grad_slice_put_model,
	.color = DNN_COLOR_REDUX,
};
DNN_CUDA_DECLARED(cl_grad_slice_put);

void dnn_grad_set_redux(starpu_data_handle_t grad)
{
	starpu_data_set_reduction_methods(grad, &cl_grad_accum, &cl_grad_zero);
}

int dnn_insert_grad_accum(const dnn_task_opts *o, starpu_data_handle_t dst, int dst_mode, starpu_data_handle_t src)
{
	return DNN_TASK_INSERT(o, &cl_grad_add, "grad_accum", dst_mode, dst, STARPU_R, src);
}

int dnn_insert_grad_zero(const dnn_task_opts *o, starpu_data_handle_t dst)
{
	return DNN_TASK_INSERT(o, &cl_grad_zero, "grad_zero", STARPU_W, dst);
}

int dnn_insert_grad_axpy(const dnn_task_opts *o, starpu_data_handle_t dst, float alpha, starpu_data_handle_t src)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_grad_axpy, "grad_axpy", &alpha, STARPU_RW, dst, STARPU_R, src);
}

int dnn_insert_grad_add(const dnn_task_opts *o, starpu_data_handle_t dst, int dst_mode, starpu_data_handle_t src)
{
	if (o && o->color)
		return DNN_TASK_INSERT(o, &cl_grad_add, "grad_add", dst_mode, dst, STARPU_R, src, STARPU_TASK_COLOR, o->color);
	return DNN_TASK_INSERT(o, &cl_grad_add, "grad_add", dst_mode, dst, STARPU_R, src);
}

/* The slice codelets read their offset from a size_t cl_arg; each task gets its own copy. */
static int insert_slice(const dnn_task_opts *o, struct starpu_codelet *cl, const char *name, int dst_mode,
			starpu_data_handle_t dst, starpu_data_handle_t src, size_t off)
{
	return DNN_TASK_INSERT_ARGS(o, cl, name, &off, dst_mode, dst, STARPU_R, src);
}

int dnn_insert_grad_slice_get(const dnn_task_opts *o, starpu_data_handle_t dst, starpu_data_handle_t src, size_t off)
{
	return insert_slice(o, &cl_grad_slice_get, "grad_slice_get", STARPU_W, dst, src, off);
}

int dnn_insert_grad_slice_put(const dnn_task_opts *o, starpu_data_handle_t dst, starpu_data_handle_t src, size_t off)
{
	return insert_slice(o, &cl_grad_slice_put, "grad_slice_put", STARPU_RW, dst, src, off);
}
