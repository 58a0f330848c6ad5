/* clip.c — the gradient-norm clipping codelets (clip.h): a tensor's sum of squares, and the
 * coefficient from all of them. */
#include "clip.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "dnn_codelet.h"

// ------------------------------------------------------------------------------- CPU kernels

/* The CUDA grid's order (clip.h), one block at a time: its threads' strided partials, then its
 * tree. Within a block the k-loop reads runs of T consecutive floats. */
double dnn_grad_sumsq_cpu(const float *grad, long n, float scale)
{
	// grad (n) -> sum of (grad * scale)^2
	const long T = DNN_SUMSQ_THREADS, stride = (long)DNN_SUMSQ_BLOCKS * DNN_SUMSQ_THREADS;
	double total = 0;
	for (long b = 0; b < DNN_SUMSQ_BLOCKS; b++) {
		double s[DNN_SUMSQ_THREADS] = {0};
		for (long base = b * T; base < n; base += stride) {
			const long m = n - base < T ? n - base : T;
			for (long t = 0; t < m; t++) {
				const double g = (double)(grad[base + t] * scale);
				s[t] += g * g;
			}
		}
		for (long h = T / 2; h > 0; h >>= 1)
			for (long t = 0; t < h; t++)
				s[t] += s[t + h];
		total += s[0];
	}
	return total;
}

void dnn_clip_coef_cpu(float *coef, double *norm, const double *sumsq, int n, float max_norm)
{
	double total = 0;
	for (int i = 0; i < n; i++) /* parameter order: the same on every worker, rank and run */
		total += sumsq[i];
	dnn_clip_finish(coef, norm, total, max_norm);
}

// ------------------------------------------------------------------------------- codelets

static void grad_sumsq_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_sumsq_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == 1);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n);
	double *out = (double *)STARPU_VECTOR_GET_PTR(buffers[0]);
	out[0] = dnn_grad_sumsq_cpu((const float *)STARPU_VECTOR_GET_PTR(buffers[1]), a->n, a->scale);
}

static void clip_coef_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_clip_args *a = cl_arg;
	double total = 0;
	for (int i = 0; i < a->nparams; i++) { /* as dnn_clip_coef_cpu: in parameter order */
		STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2 + i]) == 1);
		total += ((const double *)STARPU_VECTOR_GET_PTR(buffers[2 + i]))[0];
	}
	dnn_clip_finish((float *)STARPU_VECTOR_GET_PTR(buffers[0]), (double *)STARPU_VECTOR_GET_PTR(buffers[1]), total,
			a->max_norm);
}

DNN_CODELET(cl_grad_sumsq, 2, grad_sumsq_cpu_task, dnn_grad_sumsq_cuda);
/* nparams + 2 buffers (more than STARPU_NMAXBUFS: StarPU's dynamic handle arrays) */
DNN_CODELET(cl_clip_coef, 2, clip_coef_cpu_task, dnn_clip_coef_cuda);

// ------------------------------------------------------------------------------- insert helpers

DNN_ARGS_NO_PADDING(dnn_sumsq_args, sizeof(long) + sizeof(float) + sizeof(int));
DNN_ARGS_NO_PADDING(dnn_clip_args, sizeof(float) + sizeof(int));

int dnn_insert_grad_sumsq(const dnn_task_opts *o, starpu_data_handle_t out, starpu_data_handle_t grad, float scale)
{
	const dnn_sumsq_args a = {.n = (long)starpu_vector_get_nx(grad), .scale = scale};
	return DNN_TASK_INSERT_ARGS(o, &cl_grad_sumsq, "grad_sumsq", &a, STARPU_W, out, STARPU_R, grad, STARPU_TASK_COLOR,
				    DNN_COLOR_UPDATE, STARPU_FLOPS, 3.0 * (double)a.n);
}

int dnn_insert_clip_coef(const dnn_task_opts *o, starpu_data_handle_t coef, starpu_data_handle_t norm,
			 starpu_data_handle_t *sumsq, int nparams, float max_norm)
{
	const dnn_clip_args a = {.max_norm = max_norm, .nparams = nparams};
	/* STARPU_DATA_MODE_ARRAY, not STARPU_DATA_ARRAY: the latter takes its modes from the codelet,
	 * and ours has none (dnn_codelet.h: STARPU_VARIABLE_NBUFFERS, modes per insert), which StarPU
	 * reads as a bogus mode. StarPU copies the descriptors into the task. */
	struct starpu_data_descr *in = malloc(sizeof(*in) * (size_t)(nparams > 0 ? nparams : 1));
	if (!in)
		return -ENOMEM;
	for (int i = 0; i < nparams; i++)
		in[i] = (struct starpu_data_descr){.handle = sumsq[i], .mode = STARPU_R};
	int rc = DNN_TASK_INSERT_ARGS(o, &cl_clip_coef, "clip_coef", &a, STARPU_W, coef, STARPU_W, norm,
				      STARPU_DATA_MODE_ARRAY, in, nparams, STARPU_TASK_COLOR, DNN_COLOR_UPDATE, STARPU_FLOPS,
				      (double)nparams + 3.0);
	free(in);
	return rc;
}
