/* train.h — the commands behind `starpu_anp train|bench` (the training loop) and `starpu_anp eval`. */
#ifndef DNN_TRAIN_H
#define DNN_TRAIN_H
#include "model.h"
#include "opts.h"

/* dnn_cmd_train and dnn_cmd_eval are declared in starpu_anp.h (via opts.h). */
#endif
