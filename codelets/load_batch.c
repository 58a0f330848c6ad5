/* load_batch.c — the input-loading task (see load_batch.h). */
#include "load_batch.h"

#include <string.h>

#include "dnn_codelet.h"

void dnn_load_batch_cpu(float *x, int32_t *y, const dnn_load_batch_args *a)
{
	for (int i = 0; i < a->n; i++) {
		const uint8_t *src = a->images + (size_t)a->idx[i] * a->C * a->HW;
		float *dst = x + (size_t)i * a->C * a->HW;
		for (int c = 0; c < a->C; c++) {
			const float scale = 1.0f / (255.0f * a->std[c]), shift = a->mean[c] / a->std[c];
			for (int k = 0; k < a->HW; k++)
				dst[c * a->HW + k] = src[c * a->HW + k] * scale - shift;
		}
		y[i] = a->labels[a->idx[i]];
	}
}

void dnn_load_batch_stage(uint8_t *px, int32_t *y, float *scale, float *shift, const dnn_load_batch_args *a)
{
	const size_t per = (size_t)a->C * a->HW;
	for (int c = 0; c < a->C; c++)
		scale[c] = 1.0f / (255.0f * a->std[c]), shift[c] = a->mean[c] / a->std[c];
	for (int i = 0; i < a->n; i++) {
		memcpy(px + (size_t)i * per, a->images + (size_t)a->idx[i] * per, per);
		y[i] = a->labels[a->idx[i]];
	}
}

static void load_batch_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_load_batch_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->n * a->C * a->HW);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n);
	dnn_load_batch_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[0]), (int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]), a);
}

/* Default (data-size) footprint: the sample indices differ at every step, the cost does not. */
static struct starpu_perfmodel load_batch_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "dnn_cl_load_batch",
};

struct starpu_codelet cl_load_batch = {
	.name = "cl_load_batch",
	.cpu_funcs = {load_batch_cpu_task},
	.cpu_funcs_name = {"load_batch_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_load_batch_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = 2,
	.modes = {STARPU_W, STARPU_W},
	.model = &load_batch_model,
	.color = DNN_COLOR_DATA,
};
DNN_CUDA_DECLARED(cl_load_batch);

int dnn_insert_load_batch(const dnn_task_opts *o, const uint8_t *images, const int32_t *labels, const float *mean, const float *std,
			   int C, int HW, const int *idx, int n, starpu_data_handle_t x, starpu_data_handle_t y)
{
	size_t sz = sizeof(dnn_load_batch_args) + (size_t)n * sizeof(int);
	dnn_load_batch_args *a = malloc(sz); /* the task's from here on (DNN_TASK_INSERT_CL_ARGS) */
	if (!a)
		return -ENOMEM;
	a->images = images, a->labels = labels, a->mean = mean, a->std = std;
	a->C = C, a->HW = HW, a->n = n;
	memcpy(a->idx, idx, (size_t)n * sizeof(int));
	return DNN_TASK_INSERT_CL_ARGS(o, &cl_load_batch, "load_batch", a, sz, STARPU_W, x, STARPU_W, y);
}
