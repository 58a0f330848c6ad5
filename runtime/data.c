/* data.c — data-set detection and the synthetic set (see data.h). */
#include "data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dnn_rng.h"
#include "dnn_runtime.h"
#include "imagefolder.h"
#include "knobs.h"

static int file_exists(const char *dir, const char *name)
{
	char path[4096];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int is_dir(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int dnn_data_prepare_graph(dnn_graph *g, int input, const char *data_dir, char *err, size_t errlen)
{
	if (input > 0 && dnn_graph_set_input_hw(g, input, input, err, errlen) != 0)
		return -1;
	/* "fashion-mnist" and "synthetic" are names of sets, not folders (as in dnn_data_load). */
	if (!data_dir || !strcmp(data_dir, "fashion-mnist") || !strcmp(data_dir, "synthetic") || !is_dir(data_dir) ||
	    !dnn_imagefolder_is_root(data_dir))
		return 0;
	char **names;
	int n = dnn_imagefolder_classes(data_dir, &names, err, errlen);
	if (n < 0)
		return -1;
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return dnn_graph_set_classes(g, n, err, errlen);
}

#ifdef DNN_SIMGRID
#define DNN_SIM_BUILD 1
#else
#define DNN_SIM_BUILD 0
#endif

/* Random pixels and labels of the net's input shape (--data synthetic, and bench). */
int dnn_data_synthetic(dnn_dataset *ds, const dnn_graph *g, int n, uint64_t seed)
{
	const dnn_node *in = &g->nodes[0];
	memset(ds, 0, sizeof(*ds));
	ds->n = n;
	ds->C = in->C, ds->H = in->H, ds->W = in->W, ds->classes = g->classes;
	size_t per = (size_t)in->C * in->H * in->W;
#ifdef DNN_SIMGRID
	/* Simulation: no kernel reads the pixels. calloc's fresh pages stay untouched (unfilled
	 * below), so 16 simulated ranks in one SMPI process do not hold 16 copies of the set. */
	ds->images = calloc(per * (size_t)n, 1);
#else
	ds->images = malloc(per * (size_t)n);
#endif
	ds->labels = malloc(sizeof(int32_t) * (size_t)n);
	if (!ds->images || !ds->labels) {
		fprintf(stderr, "error: out of memory for %d synthetic %dx%dx%d samples\n", n, in->C, in->H, in->W);
		free(ds->images), free(ds->labels);
		return -1;
	}
	uint64_t s = seed;
	for (size_t i = 0; i < per * (size_t)n && !DNN_SIM_BUILD; i++)
		ds->images[i] = (uint8_t)(dnn_splitmix64(&s) >> 56);
	for (int i = 0; i < n; i++)
		ds->labels[i] = (int32_t)(dnn_splitmix64(&s) % (uint64_t)g->classes);
	return 0;
}

/* ---------------------------------------------------------------- language models */
int dnn_data_token_context(const dnn_graph *g)
{
	const dnn_node *in = &g->nodes[0];
	return in->tokens ? in->H : 0;
}

int dnn_default_corpus(char *buf, size_t len)
{
	const dnn_exec_config *k = dnn_knobs_get();
	if (k->cache_dir)
		snprintf(buf, len, "%s/corpus/kjv.txt", k->cache_dir);
	else
		snprintf(buf, len, "%s/.cache/starpu-anp/corpus/kjv.txt", k->home ? k->home : "~");
	struct stat st;
	return stat(buf, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

int dnn_data_check_lm(dnn_train_opts *o, const dnn_graph *g)
{
	static char corpus[4096]; /* o->text_path points here for the rest of the run */
	o->lm = dnn_data_token_context(g) > 0;
	const char *opt = o->text_path ? "--text" : o->tokens_path ? "--tokens" : o->val_tokens_path ? "--val-tokens" : NULL;
	if (!o->lm) {
		if (opt) {
			fprintf(stderr, "error: %s: net %s is no language model (its input line is not "
					"'input NAME tokens T'); image sets go to --data\n", opt, o->net);
			return 2;
		}
		return 0;
	}
	if (!strcmp(o->cmd, "predict")) {
		fprintf(stderr, "error: predict: net %s is a language model, which predicts tokens, not image classes: "
				"use generate\n", o->net);
		return 2;
	}
	if (strcmp(o->cmd, "train") != 0 && strcmp(o->cmd, "eval") != 0)
		return 0;
	if (o->data_set && strcmp(o->data_dir, "synthetic") != 0) {
		fprintf(stderr, "error: --data %s: net %s is a language model: give it --text FILE or --tokens "
				"DIR|FILE (or --data synthetic)\n", o->data_dir, o->net);
		return 2;
	}
	if (o->val_tokens_path && !o->tokens_path) {
		fprintf(stderr, "error: --val-tokens needs --tokens FILE (the training tokens)\n");
		return 2;
	}
	if (o->text_path && o->tokens_path) {
		fprintf(stderr, "error: --text and --tokens: give one of them\n");
		return 2;
	}
	if (o->tokens_path && o->val_tokens_path) {
		struct stat st;
		if (stat(o->tokens_path, &st) == 0 && S_ISDIR(st.st_mode)) {
			fprintf(stderr, "error: --val-tokens: --tokens %s is a directory, which holds its own val.bin\n",
				o->tokens_path);
			return 2;
		}
	}
	if (!o->text_path && !o->tokens_path && !o->data_set) {
		if (!dnn_default_corpus(corpus, sizeof(corpus))) {
			fprintf(stderr, "error: net %s is a language model and no --text FILE or --tokens DIR|FILE was "
					"given; the default corpus %s is missing (scripts/bootstrap.sh makes it from Debian's "
					"bible-kjv-text): run it, or pass --text FILE\n", o->net, corpus);
			return 2;
		}
		o->text_path = corpus;
	}
	return 0;
}

/* A language model's windows: from --text/--tokens, or seeded random tokens (bench, --data
 * synthetic). Returns 0, or -1 after printing one error line. */
static int load_token_set(const dnn_train_opts *o, const dnn_graph *g, int T, int train, dnn_dataset *ds)
{
	char err[1024];
	const int vocab = g->classes, limit = train ? o->limit_train : o->limit_test;
	int rc;
	if (o->bench || !(o->text_path || o->tokens_path)) {
		/* Enough windows for the run's steps without an epoch end inside a bench's timing. */
		long want = train ? (o->max_steps > 0 ? o->max_steps : 4) * (long)o->batch : 16L * o->batch;
		if (train && want < 8192)
			want = 8192;
		const long n = train ? want + T : want * T + 1;
		uint16_t *tok = malloc(sizeof(uint16_t) * (size_t)n);
		if (!tok) {
			fprintf(stderr, "error: out of memory for %ld synthetic tokens\n", n);
			return -1;
		}
		uint64_t s = o->seed + (train ? 0 : 7919);
		for (long i = 0; i < n; i++)
			tok[i] = (uint16_t)(dnn_splitmix64(&s) % (uint64_t)vocab);
		rc = dnn_dataset_from_tokens(ds, tok, n, T, train ? 1 : T, vocab, 0, "synthetic tokens", err, sizeof(err));
		free(tok);
	} else {
		const dnn_token_files f = {.text = o->text_path, .tokens = o->tokens_path, .val_tokens = o->val_tokens_path};
		rc = dnn_dataset_load_tokens(ds, &f, train, T, vocab, err, sizeof(err));
	}
	if (rc != 0) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	if (limit > 0 && limit < ds->n)
		ds->n = limit;
	return 0;
}

/* --data: "fashion-mnist" (Debian's package), "synthetic", or a directory holding either an
 * IDX pair set (Fashion-MNIST/MNIST file names) or CIFAR-10 binary batches. */
int dnn_data_load(const dnn_train_opts *o, const dnn_graph *g, int train, dnn_dataset *ds)
{
	char err[1024];
	const dnn_node *in = &g->nodes[0];
	int limit = train ? o->limit_train : o->limit_test;
	const int T = dnn_data_token_context(g);
	if (T > 0)
		return load_token_set(o, g, T, train, ds);
	if (o->bench || strcmp(o->data_dir, "synthetic") == 0) {
		/* bench: enough distinct samples for all its steps in one epoch (up to 64 MiB of
		 * pixels), so the step pipeline never drains at an epoch end inside the timing. */
		int n = train ? 8192 : 2048;
		if (o->bench) {
			long per = (long)in->C * in->H * in->W, cap = (64L << 20) / (per > 0 ? per : 1);
			long want = (o->max_steps > 0 ? o->max_steps : 4) * (long)o->batch;
			n = (int)(want < cap ? want : cap);
			if (n < 4 * o->batch)
				n = 4 * o->batch;
		}
		if (limit > 0 && limit < n)
			n = limit;
		return dnn_data_synthetic(ds, g, n, o->seed + (train ? 0 : 7919));
	}
	const char *dir = strcmp(o->data_dir, "fashion-mnist") == 0 ? DNN_FASHION_MNIST_DIR : o->data_dir;
	int rc;
	if (file_exists(dir, "train-images-idx3-ubyte.gz") || file_exists(dir, "train-images-idx3-ubyte") ||
	    file_exists(dir, "t10k-images-idx3-ubyte.gz") || file_exists(dir, "t10k-images-idx3-ubyte")) {
		rc = dnn_dataset_load_fashion(ds, dir, train, limit, err, sizeof(err));
	} else if (file_exists(dir, "data_batch_1.bin") || file_exists(dir, "test_batch.bin")) {
		char paths[5][4096];
		const char *pp[5];
		int np = 0;
		if (train) {
			for (int i = 1; i <= 5; i++)
				if (snprintf(paths[np], sizeof(paths[np]), "%s/data_batch_%d.bin", dir, i) > 0 &&
				    file_exists(dir, paths[np] + strlen(dir) + 1))
					pp[np] = paths[np], np++;
		} else {
			snprintf(paths[0], sizeof(paths[0]), "%s/test_batch.bin", dir);
			pp[0] = paths[0], np = 1;
		}
		if (np == 0) {
			fprintf(stderr, "error: %s: no CIFAR-10 training batches (data_batch_N.bin)\n", dir);
			return -1;
		}
		rc = dnn_dataset_load_cifar10(ds, pp, np, limit, err, sizeof(err));
	} else if (dnn_imagefolder_is_root(dir)) { /* one folder per class (imagefolder.h) */
		rc = dnn_imagefolder_load(ds, dir, train, o->val_fraction, limit, o->seed, in->C, in->H, in->W,
					  o->quiet || dnn_runtime_rank() != 0, err, sizeof(err));
		if (rc == 0 && ds->n == 0) {
			fprintf(stderr, "error: --data %s: no %s images%s\n", dir, train ? "training" : "validation",
				train ? "" : " (add DIR/val/ or raise --val-fraction; or --no-eval)");
			dnn_dataset_free(ds);
			return -1;
		}
	} else {
		fprintf(stderr, "error: --data %s: neither Fashion-MNIST/MNIST IDX files "
				"(train-images-idx3-ubyte[.gz], ...), CIFAR-10 binary batches (data_batch_1.bin, ...) "
				"nor an image folder (one subfolder of images per class)\n",
			dir);
		return -1;
	}
	if (rc != 0) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	if (ds->C != in->C || ds->H != in->H || ds->W != in->W) {
		fprintf(stderr, "error: %s: samples are %dx%dx%d but net %s expects %dx%dx%d\n", dir, ds->C, ds->H,
			ds->W, g->source, in->C, in->H, in->W);
		dnn_dataset_free(ds);
		return -1;
	}
	if (ds->classes > g->classes) {
		fprintf(stderr, "error: %s: %d classes but net %s has only %d outputs\n", dir, ds->classes,
			g->source, g->classes);
		dnn_dataset_free(ds);
		return -1;
	}
	return 0;
}
