/* train.h — the command behind `starpu_anp train|bench` (the training loop; eval: eval.h). */
#ifndef DNN_TRAIN_H
#define DNN_TRAIN_H
#include "model.h"
#include "opts.h"

/* dnn_cmd_train is declared in starpu_anp.h (via opts.h). */
#endif
