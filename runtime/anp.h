/* anp.h — the ANP app's parts of train / eval / predict: evaluation with per-sample logits (top-5,
 * adjective/noun accuracy, confusions), the result fields, the JSON report (--report) and
 * `starpu_anp predict`. The net sized for an image folder is data.h's dnn_data_prepare_graph.
 */
#ifndef DNN_ANP_H
#define DNN_ANP_H
#include <stdio.h>

#include "anp_metrics.h"
#include "dataset.h"
#include "graph.h"
#include "model.h"
#include "opts.h"

/* dnn_evaluate (evaluate.h) with every chunk's logits read back into the metrics (top-5,
 * adjective/noun accuracy, confusions). Samples whose file could not be decoded are left out of
 * all of them, loss and acc included. Returns 0, or -1 after printing one error line. */
int dnn_anp_evaluate(dnn_model *m, const dnn_dataset *ds, int batch, int chunks, dnn_anp_metrics *mt,
		     double *loss, double *acc);

/* " top5_accuracy=... adjective_accuracy=... noun_accuracy=... confused=a>b:3,... skipped_images=N"
 * (mt NULL: only skipped_images). Class names are written with blanks, ',', '>' and ':' as '?'. */
void dnn_anp_print_fields(FILE *out, const dnn_dataset *train, const dnn_dataset *test, const dnn_anp_metrics *mt);

/* The JSON report (--report FILE). Returns 0, or -1 with err. */
int dnn_anp_write_report(const char *path, const dnn_train_opts *o, const dnn_graph *g, const dnn_dataset *train,
			 const dnn_dataset *test, const dnn_anp_metrics *mt, double images_per_s, double wall_s,
			 char *err, size_t errlen);

/* dnn_cmd_predict (starpu_anp predict) is declared in starpu_anp.h (via opts.h). */
#endif
