/* data.h — `--data`: which reader a data set needs, the net sized for it, and the synthetic set of
 * bench. */
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

/* Size the net for the run: --input N rewrites the input line's H and W (0: keep the file's), and
 * with --data DIR an image folder's class count rewrites the out= of the dense layer before the
 * loss. Returns 0, or -1 with one line in err. */
int dnn_data_prepare_graph(dnn_graph *g, int input, const char *data_dir, char *err, size_t errlen);

/* n seeded random samples of g's input shape with labels in [0, g->classes). Returns 0, or -1
 * after printing one error line (out of memory). */
int dnn_data_synthetic(dnn_dataset *ds, const dnn_graph *g, int n, uint64_t seed);
#endif
