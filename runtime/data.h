/* data.h — `--data`: which reader a data set needs, and the synthetic set of bench. */
#ifndef DNN_DATA_H
#define DNN_DATA_H
#include <stdint.h>

#include "dataset.h"
#include "graph.h"
#include "opts.h"

/* The training (train=1) or test/validation (train=0) set of o->data_dir for net g:
 * "fashion-mnist" (Debian's package), "synthetic" (and bench: seeded random samples of the net's
 * input shape), or a directory of Fashion-MNIST/MNIST IDX files, CIFAR-10 binary batches, or an
 * image folder (imagefolder.h). Checks the samples' shape and class count against the net.
 * Returns 0, or -1 after printing one error line. */
int dnn_data_load(const dnn_train_opts *o, const dnn_graph *g, int train, dnn_dataset *ds);

/* n seeded random samples of g's input shape with labels in [0, g->classes). Returns 0, or -1
 * after printing one error line (out of memory). */
int dnn_data_synthetic(dnn_dataset *ds, const dnn_graph *g, int n, uint64_t seed);
#endif
