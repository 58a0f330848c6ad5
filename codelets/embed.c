/* embed.c — token + position embedding: CPU kernels, codelets, insert helpers (embed.h). */
#include "embed.h"

#include <math.h>

// ------------------------------------------------------------------------------- CPU kernels

long dnn_embed_forward_cpu(float *restrict y, const float *restrict ids, const float *restrict wte,
			   const float *restrict wpe, const dnn_embed_args *a)
{
	// y (N*T,C), ids (N*T), wte (V,C), wpe (T,C)
	const long rows = (long)a->N * a->T;
	const int C = a->C;
	long bad = -1;
	for (long r = 0; r < rows; r++) {
		float *yr = y + (size_t)r * C;
		const float *p = wpe + (size_t)(r % a->T) * C;
		if (!dnn_embed_id_ok(ids[r], a->V)) {
			if (bad < 0)
				bad = r;
			for (int c = 0; c < C; c++)
				yr[c] = NAN;
			continue;
		}
		const float *e = wte + (size_t)ids[r] * C;
		for (int c = 0; c < C; c++)
			yr[c] = e[c] + p[c];
	}
	return bad;
}

void dnn_embed_backward_cpu(float *restrict dwte, float *restrict dwpe, const float *restrict ids,
			    const float *restrict dy, const dnn_embed_args *a)
{
	// dwte (V,C) +=, dwpe (T,C) +=, ids (N*T), dy (N*T,C); rows in increasing order (embed.h)
	const long rows = (long)a->N * a->T;
	const int C = a->C;
	for (long r = 0; r < rows; r++) {
		const float *g = dy + (size_t)r * C;
		float *p = dwpe + (size_t)(r % a->T) * C;
		for (int c = 0; c < C; c++)
			p[c] += g[c];
		if (!dnn_embed_id_ok(ids[r], a->V))
			continue;
		float *e = dwte + (size_t)ids[r] * C;
		for (int c = 0; c < C; c++)
			e[c] += g[c];
	}
}

// ------------------------------------------------------------------------------- codelets

static void embed_fwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_embed_args *a = cl_arg;
	const size_t rows = (size_t)a->N * a->T;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == rows);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->V * a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->T * a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == rows * a->C);
	const float *ids = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
	long bad = dnn_embed_forward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[3]), ids,
					 (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
					 (const float *)STARPU_VECTOR_GET_PTR(buffers[2]), a);
	if (bad >= 0)
		dnn_worker_error("embed: token id %g of row %ld (sample %ld, token %ld) is not an integer in [0, %d)",
				 (double)ids[bad], bad, bad / a->T, bad % a->T, a->V);
}

static void embed_bwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_embed_args *a = cl_arg;
	const size_t rows = (size_t)a->N * a->T;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == rows);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == rows * a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == (size_t)a->V * a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == (size_t)a->T * a->C);
	dnn_embed_backward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[2]), (float *)STARPU_VECTOR_GET_PTR(buffers[3]),
			       (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
			       (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), a);
}

DNN_CODELET(cl_embed_fwd, 4, embed_fwd_cpu_task, dnn_embed_fwd_cuda);
DNN_CODELET(cl_embed_bwd, 4, embed_bwd_cpu_task, dnn_embed_bwd_cuda);

// ------------------------------------------------------------------------------- insert helpers

DNN_ARGS_NO_PADDING(dnn_embed_args, 4 * sizeof(int));

int dnn_insert_embed_fwd(const dnn_task_opts *o, const dnn_embed_args *a, starpu_data_handle_t ids,
			 starpu_data_handle_t wte, starpu_data_handle_t wpe, starpu_data_handle_t y)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_embed_fwd, "embed_fwd", a, STARPU_R, ids, STARPU_R, wte, STARPU_R, wpe,
				    STARPU_W, y, STARPU_TASK_COLOR, DNN_COLOR_ELTWISE_FWD, STARPU_FLOPS,
				    (double)a->N * a->T * a->C);
}

int dnn_insert_embed_bwd(const dnn_task_opts *o, const dnn_embed_args *a, starpu_data_handle_t ids,
			 starpu_data_handle_t dy, starpu_data_handle_t dwte, starpu_data_handle_t dwpe, int grad_mode)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_embed_bwd, "embed_bwd", a, STARPU_R, ids, STARPU_R, dy, grad_mode, dwte,
				    grad_mode, dwpe, STARPU_TASK_COLOR, DNN_COLOR_ELTWISE_BWD, STARPU_FLOPS,
				    2.0 * a->N * a->T * a->C);
}
