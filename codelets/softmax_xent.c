/* softmax_xent.c — softmax + cross-entropy in one codelet: CPU kernels, codelet, insert helper.
 *
 * logits (N T,CLS), labels (N T) int32 -> dlogits (N T,CLS) = (softmax - onehot) / T (not divided
 * by N), stats (2) = [sum of -log softmax[label], number of correct argmax predictions] / T.
 * Numerically stable: everything is computed from logits - max(row). Argmax ties go to the
 * lowest index.
 */
#include "softmax_xent.h"

#include <math.h>
#include <stdlib.h>

#include "dnn_codelet.h"

#ifdef DNN_HAVE_CUDA
void dnn_softmax_xent_cuda(void *buffers[], void *cl_arg);
#endif

// ------------------------------------------------------------------------------- CPU kernels

void dnn_softmax_cpu(float *probs, const float *logits, int N, int CLS)
{
	// probs (N,CLS), logits (N,CLS)
	for (int n = 0; n < N; n++) {
		const float *l = logits + (size_t)n * CLS;
		float *p = probs + (size_t)n * CLS;
		float maxv = -INFINITY;
		for (int j = 0; j < CLS; j++)
			maxv = l[j] > maxv ? l[j] : maxv;
		float sum = 0.0f;
		for (int j = 0; j < CLS; j++) {
			p[j] = expf(l[j] - maxv);
			sum += p[j];
		}
		float inv = 1.0f / sum;
		for (int j = 0; j < CLS; j++)
			p[j] *= inv;
	}
}

void dnn_softmax_xent_cpu(float *dlogits, float *stats, const float *logits, const int32_t *labels,
			  const dnn_softmax_xent_args *a)
{
	// dlogits (N T,CLS), stats (2), logits (N T,CLS), labels (N T)
	const long rows = (long)a->N * a->T;
	const float scale = 1.0f / (float)a->T; // exact for T = 1: image losses keep their bits
	double loss = 0.0;
	long correct = 0;
	for (long n = 0; n < rows; n++) {
		const float *l = logits + (size_t)n * a->CLS;
		float *d = dlogits + (size_t)n * a->CLS;
		int label = labels[n];
		int valid = label >= 0 && label < a->CLS; // else: a worker error and a NaN loss, as on CUDA
		if (!valid)
			dnn_worker_error("softmax_xent: label %d of row %ld is out of [0, %d)", label, n, a->CLS);
		int argmax = 0;
		for (int j = 1; j < a->CLS; j++)
			if (l[j] > l[argmax])
				argmax = j;
		float maxv = l[argmax];
		float sum = 0.0f;
		for (int j = 0; j < a->CLS; j++) {
			d[j] = expf(l[j] - maxv);
			sum += d[j];
		}
		float inv = 1.0f / sum;
		if (a->T == 1)
			for (int j = 0; j < a->CLS; j++)
				d[j] *= inv;
		else
			for (int j = 0; j < a->CLS; j++)
				d[j] *= inv * scale;
		if (!valid) {
			loss = NAN;
			continue;
		}
		d[label] -= scale;
		loss += (double)(logf(sum) - (l[label] - maxv));
		correct += argmax == label;
	}
	stats[0] = (float)(loss / a->T);
	stats[1] = (float)((double)correct / a->T);
}

// ------------------------------------------------------------------------------- codelet

static void softmax_xent_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_softmax_xent_args *a = cl_arg;
	const size_t rows = (size_t)a->N * a->T;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == rows * a->CLS);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == rows);
	STARPU_ASSERT(STARPU_VECTOR_GET_ELEMSIZE(buffers[1]) == sizeof(int32_t));
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == rows * a->CLS);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) == 2);
	dnn_softmax_xent_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[2]), (float *)STARPU_VECTOR_GET_PTR(buffers[3]),
			     (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
			     (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]), a);
}

DNN_CODELET(cl_softmax_xent, 4, softmax_xent_cpu_task, dnn_softmax_xent_cuda);

// ------------------------------------------------------------------------------- insert helper

DNN_ARGS_NO_PADDING(dnn_softmax_xent_args, 3 * sizeof(int));

int dnn_insert_softmax_xent(const dnn_task_opts *o, const dnn_softmax_xent_args *a, starpu_data_handle_t logits,
			     starpu_data_handle_t labels, starpu_data_handle_t dlogits,
			     starpu_data_handle_t stats)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_softmax_xent, "softmax_xent", a, STARPU_R, logits, STARPU_R, labels,
				    STARPU_W, dlogits, STARPU_W, stats, STARPU_TASK_COLOR, DNN_COLOR_LOSS,
					    STARPU_FLOPS, 5.0 * a->N * a->T * a->CLS);
}
