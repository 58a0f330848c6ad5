/* softmax_xent.h — softmax + cross-entropy, loss and gradient in one codelet.
 * N samples of T rows each (T = 1 for images; T tokens for a language model's per-token loss):
 * logits (N T, CLS), labels (N T) int32 in [0,CLS). Outputs:
 *   dlogits (N T, CLS) = (softmax(logits) - onehot(label)) / T   (NOT divided by N: the update
 *                                                  scales the summed gradient by 1/B)
 *   stats (2) = [sum over the samples of their mean -log softmax[label] over the T rows,
 *                sum over the samples of their fraction of correct argmax predictions]
 * so that stats / N are the mean loss and accuracy per row. With T = 1 nothing is scaled.
 * Ties in argmax go to the lowest index. */
#ifndef DNN_SOFTMAX_XENT_H
#define DNN_SOFTMAX_XENT_H
#include <stdint.h>
#include <starpu.h>

#include "dnn_codelet.h"

typedef struct {
	int N, CLS, T; // samples, classes, rows per sample (T >= 1)
} dnn_softmax_xent_args;

void dnn_softmax_xent_cpu(float *dlogits, float *stats, const float *logits, const int32_t *labels,
			  const dnn_softmax_xent_args *a);
/* Inference only: probabilities (N,CLS). */
void dnn_softmax_cpu(float *probs, const float *logits, int N, int CLS);

/* (R logits, R labels, W dlogits, W stats) */
extern struct starpu_codelet cl_softmax_xent;
int dnn_insert_softmax_xent(const dnn_task_opts *o, const dnn_softmax_xent_args *a, starpu_data_handle_t logits,
			     starpu_data_handle_t labels, starpu_data_handle_t dlogits,
			     starpu_data_handle_t stats);
#endif
