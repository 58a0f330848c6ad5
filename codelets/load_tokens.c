/* load_tokens.c — the input-loading task of token streams (see load_tokens.h). */
#include "load_tokens.h"

#include <string.h>

#include "dnn_codelet.h"

void dnn_load_tokens_cpu(float *x, int32_t *y, const dnn_load_tokens_args *a)
{
	const int T = a->T;
	for (int i = 0; i < a->n; i++) {
		const uint16_t *w = a->tokens + (size_t)a->idx[i] * a->stride;
		float *xi = x + (size_t)i * T;     // (T)
		int32_t *yi = y + (size_t)i * T;   // (T)
		for (int t = 0; t < T; t++)
			xi[t] = (float)w[t], yi[t] = w[t + 1];
	}
}

void dnn_load_tokens_stage(uint16_t *w, const dnn_load_tokens_args *a)
{
	const size_t per = (size_t)a->T + 1;
	for (int i = 0; i < a->n; i++)
		memcpy(w + (size_t)i * per, a->tokens + (size_t)a->idx[i] * a->stride, per * sizeof(uint16_t));
}

static void load_tokens_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_load_tokens_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->n * a->T);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n * a->T);
	dnn_load_tokens_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[0]), (int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]), a);
}

/* Default (data-size) footprint: the window indices differ at every step, the cost does not. */
static struct starpu_perfmodel load_tokens_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "dnn_cl_load_tokens",
};

struct starpu_codelet cl_load_tokens = {
	.name = "cl_load_tokens",
	.cpu_funcs = {load_tokens_cpu_task},
	.cpu_funcs_name = {"load_tokens_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_load_tokens_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = 2,
	.modes = {STARPU_W, STARPU_W},
	.model = &load_tokens_model,
	.color = DNN_COLOR_DATA,
};
DNN_CUDA_DECLARED(cl_load_tokens);

int dnn_insert_load_tokens(const dnn_task_opts *o, const uint16_t *tokens, int T, int stride, const int *idx, int n,
			   starpu_data_handle_t x, starpu_data_handle_t y)
{
	size_t sz = sizeof(dnn_load_tokens_args) + (size_t)n * sizeof(int);
	dnn_load_tokens_args *a = malloc(sz); /* the task's from here on (DNN_TASK_INSERT_CL_ARGS) */
	if (!a)
		return -ENOMEM;
	a->tokens = tokens, a->T = T, a->stride = stride, a->n = n;
	memcpy(a->idx, idx, (size_t)n * sizeof(int));
	return DNN_TASK_INSERT_CL_ARGS(o, &cl_load_tokens, "load_tokens", a, sz, STARPU_W, x, STARPU_W, y);
}
