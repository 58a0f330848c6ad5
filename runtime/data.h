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

/* Language models: T when g's input line is `input NAME tokens T` (the net reads token ids and its
 * loss has T labels per sample), 0 for any other net. */
int dnn_data_token_context(const dnn_graph *g);
/* The default corpus of a language model (scripts/bootstrap.sh makes it from Debian's
 * bible-kjv-text): $STARPU_ANP_CACHE/corpus/kjv.txt, else $HOME/.cache/starpu-anp/corpus/kjv.txt.
 * Writes the path into buf; returns 1 when the file is there, 0 when not. */
int dnn_default_corpus(char *buf, size_t len);
/* Before StarPU starts (dnn_cmd_check_net): sets o->lm from g; for a language model's train and
 * eval, refuses --data and, without --text or --tokens, takes the default corpus; for any other
 * net, refuses --text, --tokens and --val-tokens. Returns 0, or 2 after one usage-error line. */
int dnn_data_check_lm(dnn_train_opts *o, const dnn_graph *g);

/* n seeded random samples of g's input shape with labels in [0, g->classes). Returns 0, or -1
 * after printing one error line (out of memory). */
int dnn_data_synthetic(dnn_dataset *ds, const dnn_graph *g, int n, uint64_t seed);
#endif
