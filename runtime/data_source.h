/* data_source.h — runtime's implementation of graph's input interface: a data set as a
 * dnn_data_source (graph/ submits the load of a batch's samples through it and knows nothing of
 * files or readers). */
#ifndef DNN_DATA_SOURCE_H
#define DNN_DATA_SOURCE_H
#include <starpu.h>

#include "dataset.h"
#include "model.h"

/* MERGE: this typedef moves to graph/model.h (spec, "Input behind an interface"); graph defines
 * DNN_DATA_SOURCE_DEFINED there and this copy drops out. */
#ifndef DNN_DATA_SOURCE_DEFINED
#define DNN_DATA_SOURCE_DEFINED
typedef struct dnn_data_source {
	void *ctx;
	/* Insert the task(s) that fill x (n samples, C x H x W floats, normalised as (pixel/255 -
	 * mean[c]) / std[c]) and labels (n int32) with samples idx[0..n) of the source. train: with
	 * augmentation drawn from (seed, step, sample). Returns 0 or a negative errno. */
	int (*insert_load)(const struct dnn_data_source *src, const int *idx, int n, int train, long step,
			   const float *mean, const float *std, starpu_data_handle_t x, starpu_data_handle_t labels);
} dnn_data_source;
#endif

/* src reads ds (borrowed: ds must outlive src): in-memory sets through the load_batch codelet,
 * image folders through imagefolder's decode-resize-crop task (augmented from (seed, step,
 * sample) when training). */
void dnn_dataset_source(dnn_data_source *src, const dnn_dataset *ds);
#endif
