/* train.c — training, evaluation and benchmark loops (see train.h). */
#include "train.h"

#include <errno.h>
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "dnn_runtime.h"
#include <starpu_mpi.h>
#include "dataset.h"
#include "graph.h"
#include "anp.h"
#include "imagefolder.h"
#include "preflight.h"
#include "progress.h"

void dnn_train_opts_default(dnn_train_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->cmd = "train";
	o->net = "lenet5";
	o->data_dir = "fashion-mnist";
	o->epochs = 1;
	o->batch = 64;
	o->window = 2;
	o->sgd.lr = 0.05f;
	o->sgd.momentum = 0.9f;
	o->sgd.weight_decay = 5e-4f;
	o->seed = 1;
	o->eval = 1;
	o->cosine = 1;
	o->mode = DNN_MODE_SYNC;
	o->allreduce = DNN_ALLREDUCE_TREE;
	o->staleness = 4;
	o->async_lookahead = 1;
	o->val_fraction = 0.1;
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The epoch's sample order depends only on (seed, epoch): not on chunks, workers or scheduler,
 * and a resumed run sees the same order as an uninterrupted one. */
static void epoch_permutation(int *perm, int n, uint64_t seed, int epoch)
{
	uint64_t s = seed ^ (0xd1b54a32d192ed03ull * (uint64_t)(epoch + 1));
	for (int i = 0; i < n; i++)
		perm[i] = i;
	for (int i = n - 1; i > 0; i--) {
		int j = (int)(splitmix(&s) % (uint64_t)(i + 1));
		int t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
}

static int default_chunks(int batch)
{
	int w = (int)starpu_worker_get_count();
	int k = 2 * (w > 0 ? w : 1);
	return k > batch ? batch : k;
}

/* ---------------------------------------------------------------- checkpoints */
static int model_tensors(dnn_model *m, dnn_ckpt_tensor **out, char ***names_out)
{
	const dnn_graph *g = m->g;
	int cap = 2 * m->nparams + g->nnodes + 2, n = 0;
	dnn_ckpt_tensor *t = calloc((size_t)cap, sizeof(*t));
	char **names = calloc((size_t)cap, sizeof(char *));
	if (!t || !names) {
		fprintf(stderr, "error: out of memory\n");
		exit(1);
	}
	for (int i = 0; i < m->nparams; i++) {
		t[n].name = m->params[i].name, t[n].data = m->params[i].w, t[n].n = (uint64_t)m->params[i].n, n++;
		names[n] = malloc(strlen(m->params[i].name) + 10);
		sprintf(names[n], "%s.momentum", m->params[i].name);
		t[n].name = names[n], t[n].data = m->params[i].v, t[n].n = (uint64_t)m->params[i].n, n++;
	}
	for (int i = 0; i < g->nnodes; i++)
		if (m->running[i]) {
			names[n] = malloc(strlen(g->nodes[i].name) + 10);
			sprintf(names[n], "%s.running", g->nodes[i].name);
			t[n].name = names[n], t[n].data = m->running[i], t[n].n = 2 * (uint64_t)g->nodes[i].C, n++;
		}
	t[n].name = "input.mean", t[n].data = m->in_mean, t[n].n = (uint64_t)g->nodes[0].C, n++;
	t[n].name = "input.std", t[n].data = m->in_std, t[n].n = (uint64_t)g->nodes[0].C, n++;
	*out = t;
	*names_out = names;
	return n;
}

static void free_names(char **names, int n)
{
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int dnn_model_save(dnn_model *m, const char *path, uint64_t step, uint32_t epoch, uint64_t seed, char *err,
		   size_t errlen)
{
	dnn_model_sync_to_host(m);
	dnn_ckpt_tensor *t;
	char **names;
	int n = model_tensors(m, &t, &names);
	dnn_ckpt_meta meta = {.net_fingerprint = dnn_graph_fingerprint(m->g), .step = step, .epoch = epoch,
			      .rng_state = seed, .nclasses = m->class_names ? (uint32_t)m->g->classes : 0,
			      .class_names = m->class_names};
	/* An update can make the parameters non-finite a step before the loss shows it: never let
	 * such a state replace the last good checkpoint (it could not be resumed). */
	for (int i = 0; i < n; i++)
		for (uint64_t j = 0; j < t[i].n; j++)
			if (!isfinite(t[i].data[j])) {
				snprintf(err, errlen, "%s: not written: at step %llu, %s holds %g at [%llu]; the previous "
					 "checkpoint is kept. Training stopped (try a lower --lr)", path,
					 (unsigned long long)step, t[i].name, (double)t[i].data[j], (unsigned long long)j);
				free(t);
				free_names(names, n + 1);
				return -1;
			}
	int rc = dnn_checkpoint_save(path, &meta, t, n, err, errlen);
	free(t);
	free_names(names, n + 1);
	return rc;
}

int dnn_model_load(dnn_model *m, const char *path, uint64_t *step, uint32_t *epoch, char *err, size_t errlen)
{
	dnn_ckpt_tensor *t;
	char **names;
	int n = model_tensors(m, &t, &names);
	dnn_ckpt_meta meta = {.net_fingerprint = dnn_graph_fingerprint(m->g)};
	/* The tensors are registered with StarPU: take them for writing while we load. */
	for (int i = 0; i < m->nparams; i++) {
		starpu_data_acquire(m->params[i].hw, STARPU_W);
		starpu_data_acquire(m->params[i].hv, STARPU_W);
	}
	for (int i = 0; i < m->g->nnodes; i++)
		if (m->hrunning[i])
			starpu_data_acquire(m->hrunning[i], STARPU_W);
	int rc = dnn_checkpoint_load(path, &meta, t, n, err, errlen);
	for (int i = 0; i < m->nparams; i++) {
		starpu_data_release(m->params[i].hw);
		starpu_data_release(m->params[i].hv);
	}
	for (int i = 0; i < m->g->nnodes; i++)
		if (m->hrunning[i])
			starpu_data_release(m->hrunning[i]);
	/* An image folder's classes must be the checkpoint's, in the same order. */
	for (uint32_t i = 0; rc == 0 && m->class_names && i < meta.nclasses; i++)
		if (strcmp(meta.class_names[i], m->class_names[i]) != 0) {
			snprintf(err, errlen, "%s: class %u is '%s' in the checkpoint but '%s' in the data", path, i,
				 meta.class_names[i], m->class_names[i]);
			dnn_ckpt_free_names(&meta);
			rc = -1;
		}
	if (rc == 0) {
		if (step)
			*step = meta.step;
		if (epoch)
			*epoch = meta.epoch;
		dnn_ckpt_free_names(&meta);
	}
	free(t);
	free_names(names, n + 1);
	return rc;
}

/* ---------------------------------------------------------------- data */
static int file_exists(const char *dir, const char *name)
{
	char path[4096];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Random pixels and labels of the net's input shape (--data synthetic, and bench). */
static int make_synthetic(dnn_dataset *ds, const dnn_graph *g, int n, uint64_t seed)
{
	const dnn_node *in = &g->nodes[0];
	memset(ds, 0, sizeof(*ds));
	ds->n = n;
	ds->C = in->C, ds->H = in->H, ds->W = in->W, ds->classes = g->classes;
	size_t per = (size_t)in->C * in->H * in->W;
	ds->images = malloc(per * (size_t)n);
	ds->labels = malloc(sizeof(int32_t) * (size_t)n);
	if (!ds->images || !ds->labels) {
		fprintf(stderr, "error: out of memory for %d synthetic %dx%dx%d samples\n", n, in->C, in->H, in->W);
		free(ds->images), free(ds->labels);
		return -1;
	}
	uint64_t s = seed;
	for (size_t i = 0; i < per * (size_t)n; i++)
		ds->images[i] = (uint8_t)(splitmix(&s) >> 56);
	for (int i = 0; i < n; i++)
		ds->labels[i] = (int32_t)(splitmix(&s) % (uint64_t)g->classes);
	return 0;
}

/* --data: "fashion-mnist" (Debian's package), "synthetic", or a directory holding either an
 * IDX pair set (Fashion-MNIST/MNIST file names) or CIFAR-10 binary batches. */
static int load_data(const dnn_train_opts *o, const dnn_graph *g, int train, dnn_dataset *ds)
{
	char err[1024];
	const dnn_node *in = &g->nodes[0];
	int limit = train ? o->limit_train : o->limit_test;
	if (o->synthetic || strcmp(o->data_dir, "synthetic") == 0) {
		/* bench: enough distinct samples for all its steps in one epoch (up to 64 MiB of
		 * pixels), so the step pipeline never drains at an epoch end inside the timing. */
		int n = train ? 8192 : 2048;
		if (o->synthetic) {
			long per = (long)in->C * in->H * in->W, cap = (64L << 20) / (per > 0 ? per : 1);
			long want = (o->max_steps > 0 ? o->max_steps : 4) * (long)o->batch;
			n = (int)(want < cap ? want : cap);
			if (n < 4 * o->batch)
				n = 4 * o->batch;
		}
		if (limit > 0 && limit < n)
			n = limit;
		return make_synthetic(ds, g, n, o->seed + (train ? 0 : 7919));
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

/* ---------------------------------------------------------------- evaluation */
void dnn_evaluate(dnn_model *m, const dnn_dataset *ds, int batch, int chunks, double *loss, double *acc)
{
	int full = ds->n / batch, rest = ds->n % batch;
	double lsum = 0, csum = 0;
	int *idx = malloc(sizeof(int) * (size_t)ds->n);
	STARPU_ASSERT(idx);
	for (int i = 0; i < ds->n; i++)
		idx[i] = i;
	dnn_sgd_config none = {0};
	if (full > 0) {
		dnn_plan p;
		const int slots = 2;
		dnn_plan_create(&p, m, batch, chunks, slots, 0);
		for (int s = 0; s < full; s++) {
			if (s >= slots) {
				double l, c;
				dnn_wait_step(&p, s % slots, &l, &c);
				lsum += l, csum += c;
			}
			dnn_submit_step(&p, s % slots, ds, idx + (size_t)s * batch, &none);
		}
		for (int s = full > slots ? full - slots : 0; s < full; s++) {
			double l, c;
			dnn_wait_step(&p, s % slots, &l, &c);
			lsum += l, csum += c;
		}
		starpu_task_wait_for_all();
		dnn_plan_destroy(&p);
	}
	if (rest > 0) {
		dnn_plan p;
		dnn_plan_create(&p, m, rest, chunks < rest ? chunks : rest, 1, 0);
		dnn_submit_step(&p, 0, ds, idx + (size_t)full * batch, &none);
		double l, c;
		dnn_wait_step(&p, 0, &l, &c);
		lsum += l, csum += c;
		starpu_task_wait_for_all();
		dnn_plan_destroy(&p);
	}
	free(idx);
	*loss = ds->n ? lsum / ds->n : 0;
	*acc = ds->n ? csum / ds->n : 0;
}

/* ---------------------------------------------------------------- training */
/* The loss of a step is NaN or Inf: name the step and the first layer whose parameters went
 * non-finite (in the net's order), and leave the last checkpoint alone. */
static void report_non_finite(dnn_model *m, uint64_t step)
{
	starpu_task_wait_for_all();
	dnn_model_sync_to_host(m);
	for (int i = 0; i < m->nparams; i++)
		for (long j = 0; j < m->params[i].n; j++)
			if (!isfinite(m->params[i].w[j])) {
				fprintf(stderr, "error: step %llu: the loss is not finite; parameter %s (layer %.*s) holds %g "
						"at [%ld]. Training stopped; the last checkpoint is untouched (try a lower --lr)\n",
					(unsigned long long)step, m->params[i].name,
					(int)(strrchr(m->params[i].name, '.') - m->params[i].name), m->params[i].name,
					(double)m->params[i].w[j], j);
				return;
			}
	fprintf(stderr, "error: step %llu: the loss is not finite (the parameters are still finite: the "
			"logits overflowed). Training stopped; the last checkpoint is untouched (try a lower --lr)\n",
		(unsigned long long)step);
}

/* Learning rate at `step` of `total`: constant, or cosine decay from lr to 0 (the default). */
static float scheduled_lr(const dnn_train_opts *o, long step, long total)
{
	if (!o->cosine || total <= 0)
		return o->sgd.lr;
	return (float)(0.5 * o->sgd.lr * (1.0 + cos(M_PI * (double)step / (double)total)));
}

static const char *sched_name(void)
{
	const char *s = getenv("STARPU_SCHED");
	return s && *s ? s : "lws";
}

int dnn_cmd_train(const dnn_train_opts *opts)
{
	char err[512];
	dnn_graph g;
	/* Multi-rank runs: rank 0 reports, evaluates and checkpoints; the others only train. */
	const int rank = dnn_runtime_rank(), nranks = dnn_runtime_nranks();
	dnn_train_opts local_opts = *opts;
	const dnn_train_opts *o = &local_opts;
	if (rank != 0) {
		local_opts.quiet = 1;
		local_opts.metrics_path = NULL;
		local_opts.checkpoint_path = NULL;
		local_opts.eval = 0;
	}
	if (dnn_graph_load(&g, o->net, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	int bench = o->synthetic;
	if (dnn_anp_prepare_graph(&g, o->input, bench ? NULL : o->data_dir, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		dnn_graph_free(&g);
		return 1;
	}
	dnn_dataset train = {0}, test = {0};
	if (load_data(o, &g, 1, &train) != 0) {
		dnn_graph_free(&g);
		return 1;
	}
	if (!bench && o->eval && load_data(o, &g, 0, &test) != 0) {
		dnn_dataset_free(&train);
		dnn_graph_free(&g);
		return 1;
	}
	if (train.n < o->batch) {
		fprintf(stderr, "error: --batch %d is larger than the training set (%d samples)\n", o->batch, train.n);
		dnn_dataset_free(&train), dnn_dataset_free(&test), dnn_graph_free(&g);
		return 1;
	}
	int chunks = o->chunks > 0 ? (o->chunks > o->batch ? o->batch : o->chunks) : default_chunks(o->batch);
	dnn_model m;
	dnn_model_create(&m, &g, o->seed);
	if (!bench && train.folder) /* image folders: measured on a sample of decoded images */
		dnn_imagefolder_channel_stats(train.folder, m.in_mean, m.in_std);
	else if (!bench)
		dnn_dataset_channel_stats(&train, m.in_mean, m.in_std);
	m.class_names = train.class_names; /* image folders: written into the checkpoints */
	uint64_t step0 = 0;
	uint32_t epoch0 = 0;
	if (o->resume_path) {
		if (dnn_model_load(&m, o->resume_path, &step0, &epoch0, err, sizeof(err)) != 0) {
			fprintf(stderr, "error: %s\n", err);
			dnn_model_destroy(&m), dnn_dataset_free(&train), dnn_dataset_free(&test), dnn_graph_free(&g);
			return 1;
		}
		if (!o->quiet)
			fprintf(stderr, "resumed from %s: epoch %u, step %llu\n", o->resume_path, epoch0,
				(unsigned long long)step0);
	}
	FILE *metrics = NULL;
	if (o->metrics_path) {
		metrics = fopen(o->metrics_path, o->resume_path ? "a" : "w");
		if (!metrics) {
			fprintf(stderr, "error: --metrics %s: %s\n", o->metrics_path, strerror(errno));
			dnn_model_destroy(&m), dnn_dataset_free(&train), dnn_dataset_free(&test), dnn_graph_free(&g);
			return 1;
		}
		if (!o->resume_path)
			fprintf(metrics, "kind,epoch,step,loss,accuracy,images_per_s,wall_s\n");
	}
	const long steps_per_epoch = train.n / o->batch;
	const int window = o->window;
	dnn_plan p;
	if (nranks > 1) {
		if (o->batch < nranks) {
			fprintf(stderr, "error: --batch %d is smaller than the number of ranks (%d)\n", o->batch, nranks);
			dnn_model_destroy(&m), dnn_dataset_free(&train), dnn_dataset_free(&test), dnn_graph_free(&g);
			return 1;
		}
		dnn_model_enable_dist(&m, o->mode, o->allreduce, o->staleness, o->async_lookahead, window);
	}
	dnn_plan_create_sharded(&p, &m, o->batch, chunks, window);
	if (dnn_preflight_memory(&m, &p, !bench && o->eval ? o->batch : 0, chunks, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		if (metrics)
			fclose(metrics);
		dnn_plan_destroy(&p), dnn_model_destroy(&m), dnn_dataset_free(&train), dnn_dataset_free(&test), dnn_graph_free(&g);
		return 1;
	}
	if (!o->quiet)
		fprintf(stderr, "%s: net %s (%lld params), %d train samples, batch %d in %d chunks, %u workers "
				"(%u CPU, %u CUDA), scheduler %s, window %d\n",
			o->cmd, g.source, dnn_graph_params(&g), train.n, o->batch, chunks, starpu_worker_get_count(),
			starpu_cpu_worker_get_count(), starpu_cuda_worker_get_count(), sched_name(), window);

	int *perm = malloc(sizeof(int) * (size_t)train.n);
	STARPU_ASSERT(perm);
	long total_steps = (long)o->epochs * steps_per_epoch;
	if (o->max_steps > 0 && o->max_steps < total_steps)
		total_steps = o->max_steps;
	dnn_progress pr;
	dnn_anp_metrics anp = {0}; /* image folders: of the last evaluation */
	dnn_progress_init(&pr, stderr, o->quiet, steps_per_epoch);
	/* Checkpoints may be taken mid-epoch (--checkpoint-every): the epoch and the position in its
	 * (seeded, reproducible) permutation both follow from the step count. */
	epoch0 = (uint32_t)(step0 / (uint64_t)steps_per_epoch);
	uint64_t step = step0;
	double t_begin = dnn_now(), t_timed = 0, train_loss = NAN, train_acc = NAN, test_loss = NAN, test_acc = NAN;
	double last_loss = NAN, last_acc = NAN; /* of the last step, over its global batch */
	long timed_images = 0;
	int rc = 0, epoch = (int)epoch0;
	int last_epoch = o->epochs;
	for (; epoch < last_epoch; epoch++) {
		epoch_permutation(perm, train.n, o->seed, epoch);
		long first = (long)(step - (uint64_t)epoch * steps_per_epoch); /* resumed mid-epoch? */
		if (first < 0 || first > steps_per_epoch)
			first = 0;
		long nsteps = steps_per_epoch;
		if (o->max_steps > 0 && (long)(o->max_steps - (long)step) < nsteps - first)
			nsteps = first + (o->max_steps - (long)step);
		double ep_loss = 0, ep_correct = 0, t_ep = dnn_now(), t_warm = t_ep;
		long ep_images = 0, done = 0, warm_done = 0;
		/* Steps s in [first, nsteps) are submitted in order; step s is collected (its loss read
		 * back) once step s + window has been submitted, or in the drain at the end. */
		long collected = first;
		for (long s = first; s <= nsteps; s++) {
			while (collected < nsteps && (s - collected >= window || s == nsteps)) {
				double l, c;
				dnn_wait_step(&p, (int)(collected % window), &l, &c);
				ep_loss += l, ep_correct += c, ep_images += o->batch, done++;
				last_loss = l / o->batch, last_acc = c / o->batch;
				if (done == o->warmup && epoch == (int)epoch0) /* warm-up: first epoch only */
					t_warm = dnn_now(), warm_done = done;
				double el = dnn_now() - t_ep;
				double ips = el > 0 ? ep_images / el : 0;
				collected++;
				dnn_progress_step(&pr, epoch + 1, last_epoch, collected, nsteps, last_loss, last_acc, ips,
						  ips > 0 ? (nsteps - collected) * o->batch / ips : -1);
				uint64_t gstep = (uint64_t)epoch * steps_per_epoch + collected;
				if (metrics)
					fprintf(metrics, "train_step,%d,%llu,%.6f,%.6f,%.1f,%.3f\n", epoch + 1,
						(unsigned long long)gstep, last_loss, last_acc, ips, dnn_now() - t_begin);
				if (!isfinite(l)) {
					report_non_finite(&m, gstep);
					rc = 1;
					break;
				}
				if (o->checkpoint_path && o->checkpoint_every > 0 && collected < nsteps &&
				    gstep % (uint64_t)o->checkpoint_every == 0) {
					/* Saves the state after every submitted step (it waits for their updates). */
					if (dnn_model_save(&m, o->checkpoint_path, step, (uint32_t)(step / steps_per_epoch), o->seed,
							   err, sizeof(err)) != 0) {
						fprintf(stderr, "error: %s\n", err);
						rc = 1;
						break;
					}
				}
			}
			if (rc != 0)
				break;
			if (s == nsteps)
				break;
			dnn_sgd_config sgd = o->sgd;
			sgd.lr = scheduled_lr(o, (long)step, total_steps);
			/* Tag the step's tasks: traces (tasks.rec "Iteration:") can then tell steps apart. */
			starpu_iteration_push((unsigned long)step);
			dnn_submit_step(&p, (int)(s % window), &train, perm + (size_t)s * o->batch, &sgd);
			starpu_iteration_pop();
			step++;
		}
		if (nranks > 1)
			starpu_mpi_wait_for_all(MPI_COMM_WORLD);
		else
			starpu_task_wait_for_all();
		if (rc != 0)
			break;
		/* Async: evaluation and checkpoints use the server's parameters (a pull on every rank). */
		dnn_dist_pull_final(&m);
		double t_end = dnn_now();
		dnn_progress_end_line(&pr);
		t_timed += t_end - t_warm;
		timed_images += (ep_images - warm_done * o->batch);
		train_loss = ep_images ? ep_loss / ep_images : NAN;
		train_acc = ep_images ? ep_correct / ep_images : NAN;
		double ips = (t_end - t_warm) > 0 ? (ep_images - warm_done * o->batch) / (t_end - t_warm) : 0;
		if (!bench && o->eval) {
			if (test.folder) /* per-sample logits: top-5, adjective/noun accuracy, confusions */
				dnn_anp_evaluate(&m, &test, o->batch, chunks, &anp, &test_loss, &test_acc);
			else
				dnn_evaluate(&m, &test, o->batch, chunks, &test_loss, &test_acc);
			if (!o->quiet)
				fprintf(stderr, "epoch %d: train loss %.4f acc %.4f | test loss %.4f acc %.4f | %.0f img/s\n",
					epoch + 1, train_loss, train_acc, test_loss, test_acc, ips);
		} else if (!o->quiet) {
			fprintf(stderr, "epoch %d: train loss %.4f acc %.4f | %.0f img/s\n", epoch + 1, train_loss, train_acc, ips);
		}
		if (metrics) {
			fprintf(metrics, "train_epoch,%d,%llu,%.6f,%.6f,%.1f,%.3f\n", epoch + 1, (unsigned long long)step,
				train_loss, train_acc, ips, dnn_now() - t_begin);
			if (!bench && o->eval)
				fprintf(metrics, "test_epoch,%d,%llu,%.6f,%.6f,,%.3f\n", epoch + 1, (unsigned long long)step,
					test_loss, test_acc, dnn_now() - t_begin);
			fflush(metrics);
		}
		if (o->checkpoint_path && rc == 0) {
			if (dnn_model_save(&m, o->checkpoint_path, step, (uint32_t)(epoch + 1), o->seed, err, sizeof(err)) != 0) {
				fprintf(stderr, "error: %s\n", err);
				rc = 1;
				break;
			}
		}
		if (o->max_steps > 0 && (long)step >= o->max_steps) {
			epoch++;
			break;
		}
	}
	if (rc != 0 && nranks > 1) {
		/* The other ranks would wait forever for this one's part of the next reduction. */
		fprintf(stderr, "error: rank %d stops the job\n", rank);
		fflush(stderr);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	if (rc == 0 && step == step0 && o->resume_path) {
		/* The checkpoint already holds the whole run: say so, and still evaluate it. */
		if (!o->quiet)
			fprintf(stderr, "%s: the checkpoint has already done %llu steps; nothing left to train "
					"(raise --epochs or --max-steps to continue)\n",
				o->resume_path, (unsigned long long)step0);
		if (!bench && o->eval)
			dnn_evaluate(&m, &test, o->batch, chunks, &test_loss, &test_acc);
	}
	if (rc == 0 && nranks > 1 && train.folder && train.n > 0) {
		/* Each rank decoded only its shards: rank 0 reports the unreadable files of all of them. */
		float *mine = malloc(sizeof(float) * (size_t)train.n), *all = calloc((size_t)train.n, sizeof(float));
		STARPU_ASSERT(mine && all);
		for (int i = 0; i < train.n; i++)
			mine[i] = (float)dnn_imagefolder_is_bad(train.folder, i);
		dnn_dist_sum_to_root(&m, mine, all, (size_t)train.n);
		if (rank == 0)
			dnn_imagefolder_merge_bad(train.folder, all, train.n);
		free(mine), free(all);
	}
	double wall = dnn_now() - t_begin;
	double ips = t_timed > 0 ? timed_images / t_timed : 0;
	if (rc == 0 && rank == 0) {
		/* The machine-readable last line (README "Result lines"). */
		printf("result: cmd=%s net=%s batch=%d chunks=%d workers=%u ncpu=%u ncuda=%u sched=%s epochs=%d steps=%llu "
		       "train_loss=%.6f train_accuracy=%.4f epoch_train_loss=%.6f epoch_train_accuracy=%.4f",
		       o->cmd, o->net, o->batch, chunks, starpu_worker_get_count(), starpu_cpu_worker_get_count(),
		       starpu_cuda_worker_get_count(), sched_name(), epoch, (unsigned long long)step, last_loss, last_acc,
		       train_loss, train_acc);
		if (!bench && o->eval)
			printf(" test_accuracy=%.4f test_loss=%.6f", test_acc, test_loss);
		if (train.folder)
			dnn_anp_print_fields(stdout, &train, !bench && o->eval ? &test : NULL, !bench && o->eval ? &anp : NULL);
		if (nranks > 1)
			printf(" ranks=%d mode=%s", nranks, o->mode == DNN_MODE_ASYNC ? "async" : "sync");
		if (m.dist && o->mode == DNN_MODE_SYNC)
			printf(" allreduce=%s", o->allreduce == DNN_ALLREDUCE_RING ? "ring" : "tree");
		else
			printf(" ranks=1 mode=%s", o->mode == DNN_MODE_ASYNC ? "async(1 rank = sync)" : "sync");
		if (m.dist && o->mode == DNN_MODE_ASYNC)
			printf(" staleness=%d lookahead=%d staleness_mean=%.2f staleness_max=%ld", o->staleness, m.dist->lookahead,
			       m.dist->staleness_count ? m.dist->staleness_sum / m.dist->staleness_count : 0.0,
			       m.dist->staleness_max);
		printf(" fuse=%d tasks_per_step=%ld", p.fuse, p.tasks_per_step);
		printf(" images_per_s=%.1f gflops=%.2f wall_s=%.2f\n", ips, ips * dnn_graph_flops_train(&g) / 1e9, wall);
		fflush(stdout);
		if (o->report_path && dnn_anp_write_report(o->report_path, o, &g, &train, !bench && o->eval ? &test : NULL,
							   test.folder ? &anp : NULL, ips, wall, err, sizeof(err)) != 0) {
			fprintf(stderr, "error: %s\n", err);
			rc = 1;
		}
	}
	free(perm);
	if (metrics)
		fclose(metrics);
	dnn_plan_destroy(&p);
	dnn_model_destroy(&m);
	dnn_dataset_free(&train);
	dnn_dataset_free(&test);
	dnn_graph_free(&g);
	return rc;
}

int dnn_cmd_eval(const dnn_train_opts *o)
{
	char err[512];
	dnn_graph g;
	if (dnn_graph_load(&g, o->net, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	if (dnn_anp_prepare_graph(&g, o->input, o->data_dir, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		dnn_graph_free(&g);
		return 1;
	}
	dnn_dataset test;
	if (load_data(o, &g, 0, &test) != 0) {
		dnn_graph_free(&g);
		return 1;
	}
	dnn_model m;
	dnn_model_create(&m, &g, o->seed);
	m.class_names = test.class_names; /* image folders: must match the checkpoint's */
	uint64_t step;
	uint32_t epoch;
	if (dnn_model_load(&m, o->resume_path, &step, &epoch, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		dnn_model_destroy(&m), dnn_dataset_free(&test), dnn_graph_free(&g);
		return 1;
	}
	int chunks = o->chunks > 0 ? o->chunks : default_chunks(o->batch);
	if (dnn_preflight_memory(&m, NULL, o->batch, chunks, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		dnn_model_destroy(&m), dnn_dataset_free(&test), dnn_graph_free(&g);
		return 1;
	}
	double loss, acc, t0 = dnn_now();
	dnn_anp_metrics anp = {0};
	if (test.folder) /* per-sample logits: top-5, adjective/noun accuracy, confusions */
		dnn_anp_evaluate(&m, &test, o->batch, chunks, &anp, &loss, &acc);
	else
		dnn_evaluate(&m, &test, o->batch, chunks, &loss, &acc);
	double wall = dnn_now() - t0;
	printf("result: cmd=eval net=%s checkpoint=%s epoch=%u step=%llu samples=%d test_accuracy=%.4f test_loss=%.6f "
	       "images_per_s=%.1f wall_s=%.2f",
	       o->net, o->resume_path, epoch, (unsigned long long)step, test.n, acc, loss, wall > 0 ? test.n / wall : 0, wall);
	if (test.folder)
		dnn_anp_print_fields(stdout, NULL, &test, &anp);
	printf("\n");
	fflush(stdout);
	int rc = 0;
	if (o->report_path && dnn_anp_write_report(o->report_path, o, &g, NULL, &test, test.folder ? &anp : NULL,
						   wall > 0 ? test.n / wall : 0, wall, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		rc = 1;
	}
	dnn_model_destroy(&m);
	dnn_dataset_free(&test);
	dnn_graph_free(&g);
	return rc;
}
