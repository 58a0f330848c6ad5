/* opts.h — the options of `starpu_anp train|bench|eval|predict` (dnn_train_opts) and their defaults. */
#ifndef DNN_OPTS_H
#define DNN_OPTS_H
#include <stdint.h>

#include "model.h"

/* Where Debian's dataset-fashion-mnist package puts its files (--data fashion-mnist). */
#define DNN_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

typedef struct {
	const char *cmd;          // "train" or "bench", for messages and the result line
	const char *net;          // built-in name or .net path
	const char *data_dir;     // --data: fashion-mnist | synthetic | DIR
	int synthetic;            // bench: random inputs of the net's shape, no data loading
	int epochs;
	long max_steps;           // stop after this many steps in total (0 = no limit)
	int warmup;               // bench: steps excluded from the timing
	int batch, chunks, window;
	dnn_sgd_config sgd;
	int cosine;               // 1: cosine learning-rate decay to 0 over the run; 0: constant
	uint64_t seed;
	int seed_set;             // --seed was given (a resume then refuses a checkpoint of another seed)
	int limit_train, limit_test; // 0 = whole set
	int eval;                 // evaluate on the test set after each epoch
	const char *metrics_path;
	const char *checkpoint_path; // written after every epoch (and at the end)
	long checkpoint_every;       // also every N steps (0 = only at epoch ends)
	const char *resume_path;
	int quiet;
	dnn_dist_mode mode;       // --mode sync|async (multi-rank runs)
	dnn_allreduce allreduce;  // --allreduce tree|ring (sync, multi-rank runs)
	int staleness;            // --staleness S (async)
	int async_lookahead;      // async: estimate the others' S missing steps by ours [1]; --no-lookahead
	/* ANP app (anp.h, imagefolder.h) */
	int input;                // --input N: the net's input is N x N (0 = as in the net file)
	double val_fraction;      // --val-fraction X: held out of an image folder without val/ [0.1]
	const char *report_path;  // --report FILE: JSON metrics (image folders)
} dnn_train_opts;

/* The defaults of `starpu_anp train` (the values --help shows in brackets). */
void dnn_train_opts_default(dnn_train_opts *o);

/* The chunks a batch is split into: --chunks K (at most the batch), else 2 per StarPU worker. */
int dnn_opts_chunks(const dnn_train_opts *o);
#endif
