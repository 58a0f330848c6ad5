/* dropout.c — dropout: CPU kernels, codelets, insert helpers (dropout.h). */
#include "dropout.h"

#include <stdlib.h>

// ------------------------------------------------------------------------------- CPU kernels

void dnn_dropout_forward_cpu(float *restrict y, const float *restrict x, const dnn_dropout_args *a)
{
	// y (N, per_sample), x (N, per_sample)
	const long per = a->per_sample;
	if (!a->train || a->p == 0.0f) {
		for (long i = 0; i < (long)a->N * per; i++)
			y[i] = x[i];
		return;
	}
	const float scale = 1.0f / (1.0f - a->p);
	for (int s = 0; s < a->N; s++) {
		const uint64_t key = dnn_dropout_key(a->seed, a->step, a->sample0 + s);
		for (long e = 0; e < per; e++)
			y[s * per + e] = dnn_dropout_keep(key, e, a->p) ? x[s * per + e] * scale : 0.0f;
	}
}

void dnn_dropout_backward_cpu(float *restrict dx, const float *restrict dy, const dnn_dropout_args *a)
{
	// dx (N, per_sample) =|+=, dy (N, per_sample)
	const long per = a->per_sample;
	const float scale = a->train && a->p > 0.0f ? 1.0f / (1.0f - a->p) : 1.0f;
	for (int s = 0; s < a->N; s++) {
		const uint64_t key = dnn_dropout_key(a->seed, a->step, a->sample0 + s);
		for (long e = 0; e < per; e++) {
			const long i = s * per + e;
			const float g = !a->train || dnn_dropout_keep(key, e, a->p) ? dy[i] * scale : 0.0f;
			dx[i] = a->accumulate_dx ? dx[i] + g : g;
		}
	}
}

// ------------------------------------------------------------------------------- codelets

static void dropout_fwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_dropout_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->per_sample);
	dnn_dropout_forward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[1]),
				(const float *)STARPU_VECTOR_GET_PTR(buffers[0]), a);
}

static void dropout_bwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_dropout_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->N * a->per_sample);
	dnn_dropout_backward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[1]),
				 (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), a);
}

/* Footprint: data sizes only (the step and seed change at every task, the cost does not). */
DNN_CODELET_FP(cl_dropout_fwd, 2, dropout_fwd_cpu_task, dnn_dropout_fwd_cuda, NULL);
DNN_CODELET_FP(cl_dropout_bwd, 2, dropout_bwd_cpu_task, dnn_dropout_bwd_cuda, NULL);

// ------------------------------------------------------------------------------- insert helpers

DNN_ARGS_NO_PADDING(dnn_dropout_args, 3 * sizeof(long) + 4 * sizeof(int) + sizeof(uint64_t));

int dnn_insert_dropout_fwd(const dnn_task_opts *o, const dnn_dropout_args *a, starpu_data_handle_t x,
			   starpu_data_handle_t y)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_dropout_fwd, "dropout_fwd", a, STARPU_R, x, STARPU_W, y, STARPU_TASK_COLOR, DNN_COLOR_ELTWISE_FWD, STARPU_FLOPS,
			       (double)a->N * a->per_sample);
}

int dnn_insert_dropout_bwd(const dnn_task_opts *o, const dnn_dropout_args *a, starpu_data_handle_t dy,
			   starpu_data_handle_t dx)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_dropout_bwd, "dropout_bwd", a, STARPU_R, dy,
				    a->accumulate_dx ? STARPU_RW : STARPU_W, dx, STARPU_TASK_COLOR, DNN_COLOR_ELTWISE_BWD, STARPU_FLOPS,
			       (double)a->N * a->per_sample);
}
