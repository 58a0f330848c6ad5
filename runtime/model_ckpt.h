/* model_ckpt.h — a model's checkpoint: which tensors go into the file (checkpoint.h: the format)
 * and how they are taken from / put back into StarPU's handles. Shared by train, eval and predict. */
#ifndef DNN_MODEL_CKPT_H
#define DNN_MODEL_CKPT_H
#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* Write m (parameters, momentum, batch-norm running statistics, input normalisation, class names)
 * with step, epoch and the run's seed (the checkpoint's rng_state). Refuses (-1, err) a model
 * that holds a non-finite value, so the last good checkpoint stays. Returns 0 or -1 with err. */
int dnn_model_save(dnn_model *m, const char *path, uint64_t step, uint32_t epoch, uint64_t seed, char *err,
		   size_t errlen);

/* Load the checkpoint at path into m (same net: fingerprint and every tensor are checked; an
 * image folder's class names must be the checkpoint's). step, epoch, seed: NULL or filled.
 * Returns 0, or -1 with one line in err. */
int dnn_model_load(dnn_model *m, const char *path, uint64_t *step, uint32_t *epoch, uint64_t *seed, char *err,
		   size_t errlen);
#endif
