/* eval.h — evaluation: the one forward-only evaluation loop (eval, the per-epoch test, ANP
 * metrics, predict), the test-set evaluation after each epoch of train, and `starpu_anp eval`,
 * whose dnn_cmd_eval is declared in starpu_anp.h. */
#ifndef DNN_EVAL_H
#define DNN_EVAL_H
#include "anp_metrics.h"
#include "dataset.h"
#include "model.h"

/* Receives one chunk's logits (n rows of `classes`) for the samples idx[0..n) of the set. Calls
 * are serialised (one at a time) but come from StarPU's threads. */
typedef void (*dnn_logits_sink)(void *ctx, const float *logits, int classes, const int *idx, int n);

/* Forward passes (batch-norm in eval mode) over every sample of ds, `batch` at a time (the last
 * batch smaller), in chunks of at most `chunks`. loss/acc (NULL: not wanted): the mean loss and
 * accuracy over ds. sink (NULL: none): each chunk's logits are read back asynchronously (the next
 * batches keep running) and handed to it. Returns 0, or -1 after printing one error line. */
int dnn_evaluate(dnn_model *m, const dnn_dataset *ds, int batch, int chunks, dnn_logits_sink sink, void *ctx,
		 double *loss, double *acc);

/* The test set: image folders with the ANP metrics into *anp (per-sample logits, anp.h); other
 * sets by the step statistics (anp may then be NULL). Returns 0 or -1 (message printed). */
int dnn_evaluate_test(dnn_model *m, const dnn_dataset *test, int batch, int chunks, dnn_anp_metrics *anp,
		      double *loss, double *acc);
#endif
