/* anp.h — the ANP app's parts of train / eval: evaluation with per-sample logits (top-5,
 * adjective/noun accuracy, confusions), the result fields and the JSON report (--report).
 * `starpu_anp predict` is predict.h's; the net sized for an image folder is data.h's
 * dnn_data_prepare_graph.
 */
#ifndef DNN_ANP_H
#define DNN_ANP_H
#include <stdio.h>

#include "anp_metrics.h"
#include "dataset.h"
#include "graph.h"
#include "model.h"
#include "opts.h"

/* dnn_evaluate (eval.h) with every chunk's logits read back into the metrics (top-5,
 * adjective/noun accuracy, confusions). Samples whose file could not be decoded are left out of
 * all of them, loss and acc included. Returns 0, or -1 after printing one error line. */
int dnn_anp_evaluate(dnn_model *m, const dnn_dataset *ds, int batch, int chunks, dnn_anp_metrics *mt,
		     double *loss, double *acc);

/* " top5_accuracy=... adjective_accuracy=... noun_accuracy=... confused=a>b:3,... skipped_images=N"
 * (mt NULL: only skipped_images). Class names are written with blanks, ',', '>' and ':' as '?'. */
void dnn_anp_print_fields(FILE *out, const dnn_dataset *train, const dnn_dataset *test, const dnn_anp_metrics *mt);

/* A class name in a result line: blanks, tabs, newlines, ',', '>', ':' and '=' written as '?'. */
void dnn_anp_print_name(FILE *out, const char *s);

/* The JSON report (--report FILE). Returns 0, or -1 with err. */
int dnn_anp_write_report(const char *path, const dnn_train_opts *o, const dnn_graph *g, const dnn_dataset *train,
			 const dnn_dataset *test, const dnn_anp_metrics *mt, double images_per_s, double wall_s,
			 char *err, size_t errlen);
#endif
