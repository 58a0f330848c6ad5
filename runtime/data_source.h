/* data_source.h — runtime's implementation of graph's input interface: a data set as a
 * dnn_data_source (graph/ submits the load of a batch's samples through it and knows nothing of
 * files or readers). */
#ifndef DNN_DATA_SOURCE_H
#define DNN_DATA_SOURCE_H
#include <starpu.h>

#include "dataset.h"
#include "model.h"

/* dnn_data_source itself is graph's (graph/model.h). */

/* src reads ds (borrowed: ds must outlive src): in-memory sets through the load_batch codelet,
 * token streams through load_tokens (windows of T tokens and their next tokens),
 * image folders through imagefolder's decode-resize-crop task (augmented from (seed, step,
 * sample) when training). */
void dnn_dataset_source(dnn_data_source *src, const dnn_dataset *ds);
#endif
