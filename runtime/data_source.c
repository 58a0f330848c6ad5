/* data_source.c — a dnn_dataset as a dnn_data_source (see data_source.h). */
#include "data_source.h"

#include "imagefolder.h"
#include "load_batch.h"
#include "load_tokens.h"

static int dataset_insert_load(const dnn_data_source *src, const dnn_task_opts *o, const int *idx, int n, int train,
			       long step, const float *mean, const float *std, starpu_data_handle_t x,
			       starpu_data_handle_t labels)
{
	const dnn_dataset *ds = src->ctx;
	if (ds->tokens) /* language models: windows of the token stream, no normalisation */
		return dnn_insert_load_tokens(o, ds->tokens, ds->T, ds->stride, idx, n, x, labels);
	if (ds->folder) /* image files: decoded, resized, cropped (random when training) in the task */
		return dnn_imagefolder_insert_load(o, ds, idx, n, train, step, mean, std, x, labels);
	return dnn_insert_load_batch(o, ds->images, ds->labels, mean, std, ds->C, ds->H * ds->W, idx, n, x, labels);
}

void dnn_dataset_source(dnn_data_source *src, const dnn_dataset *ds)
{
	src->ctx = (void *)ds;
	src->insert_load = dataset_insert_load;
}
