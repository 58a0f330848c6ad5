/* predict.h — `starpu_anp predict` (predict.c): each image file's top-5 classes and their
 * probabilities by a checkpoint, one line per image, then the result line; an image that cannot
 * be decoded is skipped and counted (exit status 1). */
#ifndef DNN_PREDICT_H
#define DNN_PREDICT_H
#include "starpu_anp.h"

/* dnn_cmd_predict is declared in starpu_anp.h. */
#endif
