/* opts.h — helpers over the options of `starpu_anp train|bench|eval|predict` (dnn_train_opts and its
 * defaults are public: include/starpu_anp.h; opts.c defines the defaults). */
#ifndef DNN_OPTS_H
#define DNN_OPTS_H
#include <stdint.h>

#include "model.h"
#include "starpu_anp.h" /* dnn_train_opts, dnn_train_opts_default, DNN_FASHION_MNIST_DIR */

/* The chunks a batch is split into: --chunks K (at most the batch); else 2 per StarPU worker, or
 * 1 per worker on CPU workers only for a net without batch norm, or with it where 2 per worker would leave
 * chunks of fewer than DNN_CHUNK_MIN_IMAGES images (g may be NULL: 2 per worker).
 * Why: chunks balance load between unlike workers and, with batch norm, set its statistics' batch
 * (README "Batch norm over the global batch"); without either, a second chunk per worker only adds
 * tasks: LeNet-5 at batch 64 / 256 on 2 CPU workers ran 11% / 9% faster with 2 chunks than with 4
 * (docs/benchmarks.md, 2026-12-06); resnet8/resnet20 ran 3-6% faster with 2 chunks of 32 images than 4
 * of 16 at batch 64, 1-4% slower with 2 of 128 than 4 of 64 at batch 256 (opts.c). */
#define DNN_CHUNK_MIN_IMAGES 32
int dnn_opts_chunks(const dnn_train_opts *o, const dnn_graph *g);
#endif
