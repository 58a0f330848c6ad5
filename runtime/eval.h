/* eval.h — the test-set evaluation (after each epoch of train, and `starpu_anp eval`, whose
 * dnn_cmd_eval is declared in starpu_anp.h). */
#ifndef DNN_EVAL_H
#define DNN_EVAL_H
#include "anp.h"
#include "dataset.h"
#include "model.h"

/* Image folders: with the ANP metrics into *anp (per-sample logits); other sets: by the step
 * statistics (anp may then be NULL). Returns 0 or -1 (message printed). */
int dnn_evaluate_test(dnn_model *m, const dnn_dataset *test, int batch, int chunks, dnn_anp_metrics *anp,
		      double *loss, double *acc);
#endif
