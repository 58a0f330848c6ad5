/* train.h — the commands behind `starpu_anp train|bench` (the training loop) and `starpu_anp eval`. */
#ifndef DNN_TRAIN_H
#define DNN_TRAIN_H
#include "model.h"
#include "opts.h"

/* StarPU must be running. Return the process exit status (0, or 1 on a runtime error; the
 * message is already printed). */
int dnn_cmd_train(const dnn_train_opts *o);
int dnn_cmd_eval(const dnn_train_opts *o);
#endif
