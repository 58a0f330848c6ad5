/* opts.h — helpers over the options of `starpu_anp train|bench|eval|predict` (dnn_train_opts and its
 * defaults are public: include/starpu_anp.h; opts.c defines the defaults). */
#ifndef DNN_OPTS_H
#define DNN_OPTS_H
#include <stdint.h>

#include "model.h"
#include "starpu_anp.h" /* dnn_train_opts, dnn_train_opts_default, DNN_FASHION_MNIST_DIR */

/* The chunks a batch is split into: --chunks K (at most the batch), else 2 per StarPU worker. */
int dnn_opts_chunks(const dnn_train_opts *o);
#endif
