/* eval.c — evaluation: the one forward-only loop over a data set (dnn_evaluate: eval, the
 * per-epoch test, ANP metrics, predict), the test-set evaluation that training runs after each
 * epoch, and `starpu_anp eval` (a checkpoint on the test set). See eval.h. */
#include "eval.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "anp.h"
#include "data.h"
#include "data_source.h"
#include "graph.h"
#include "knobs.h"
#include "model_ckpt.h"
#include "opts.h"
#include "preflight.h"
#include "progress.h"

/* ---------------------------------------------------------------- the forward-only loop */
typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int pending;
	dnn_logits_sink sink;
	void *ctx;
	int classes;
} logits_reader;

typedef struct {
	logits_reader *r;
	starpu_data_handle_t h;
	int n;
	int idx[];
} logits_req;

/* Runs when the chunk's logits are in main memory (after its forward, before the next write). */
static void logits_ready(void *arg)
{
	logits_req *q = arg;
	logits_reader *r = q->r;
	const float *l = starpu_data_handle_to_pointer(q->h, STARPU_MAIN_RAM);
	pthread_mutex_lock(&r->mu);
	r->sink(r->ctx, l, r->classes, q->idx, q->n);
	pthread_mutex_unlock(&r->mu);
	starpu_data_release_on_node(q->h, STARPU_MAIN_RAM);
	pthread_mutex_lock(&r->mu);
	r->pending--;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
	free(q);
}

static int read_logits(logits_reader *r, dnn_plan *p, const int *idx)
{
	const dnn_graph *g = p->m->g;
	const int logits = g->nodes[g->nnodes - 1].inputs[0];
	for (int c = 0; c < p->nchunks; c++) {
		logits_req *q = malloc(sizeof(*q) + sizeof(int) * (size_t)p->chunk_n[c]);
		if (!q) {
			fprintf(stderr, "error: out of memory reading the logits back\n");
			return -1;
		}
		q->r = r, q->h = p->y[logits * p->nchunks + c], q->n = p->chunk_n[c];
		memcpy(q->idx, idx + p->chunk_off[c], sizeof(int) * (size_t)q->n);
		pthread_mutex_lock(&r->mu);
		r->pending++;
		pthread_mutex_unlock(&r->mu);
		int rc = starpu_data_acquire_on_node_cb(q->h, STARPU_MAIN_RAM, STARPU_R, logits_ready, q);
		if (rc != 0) {
			pthread_mutex_lock(&r->mu);
			r->pending--;
			pthread_mutex_unlock(&r->mu);
			free(q);
			fprintf(stderr, "error: starpu_data_acquire_on_node_cb (logits): %s\n", strerror(-rc));
			return -1;
		}
	}
	return 0;
}

static void wait_readers(logits_reader *r)
{
	pthread_mutex_lock(&r->mu);
	while (r->pending > 0)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
}

int dnn_evaluate(dnn_model *m, const dnn_dataset *ds, int batch, int chunks, dnn_logits_sink sink, void *ctx,
		 double *loss, double *acc)
{
	logits_reader r = {.sink = sink, .ctx = ctx, .classes = m->g->classes};
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	double lsum = 0, csum = 0;
	int rc = 0;
	int *idx = malloc(sizeof(int) * (size_t)(ds->n ? ds->n : 1));
	if (!idx) {
		fprintf(stderr, "error: out of memory for the evaluation of %d samples\n", ds->n);
		rc = -1;
		goto out;
	}
	for (int i = 0; i < ds->n; i++)
		idx[i] = i;
	if (batch > ds->n)
		batch = ds->n;
	const int full = batch > 0 ? ds->n / batch : 0, rest = batch > 0 ? ds->n % batch : 0;
	dnn_optim_config none = {0};
	dnn_data_source src;
	dnn_dataset_source(&src, ds);
	/* Pass 0: the full batches, two in flight; pass 1: the rest, one smaller batch. */
	for (int pass = 0; rc == 0 && pass < 2; pass++) {
		const int nsteps = pass == 0 ? full : (rest > 0), bsz = pass == 0 ? batch : rest;
		if (nsteps == 0)
			continue;
		const int slots = pass == 0 ? 2 : 1, off = pass == 0 ? 0 : full * batch;
		dnn_plan p;
		char err[512];
		if (dnn_plan_create(&p, m, bsz, chunks < bsz ? chunks : bsz, slots, 0, dnn_knobs_get(), err, sizeof(err)) != 0) {
			fprintf(stderr, "error: evaluation plan (batch %d): %s\n", bsz, err);
			rc = -1;
			break;
		}
		int s = 0;
		for (; s < nsteps; s++) {
			if (s >= slots) { /* at most `slots` batches in flight */
				double l, c;
				if (dnn_wait_step(&p, s % slots, &l, &c, err, sizeof(err)) != 0) {
					fprintf(stderr, "error: %s\n", err);
					rc = -1;
					break;
				}
				lsum += l, csum += c;
			}
			const int *bidx = idx + off + (size_t)s * bsz;
			if (dnn_submit_step(&p, s % slots, &src, bidx, s, &none, err, sizeof(err)) != 0) {
				fprintf(stderr, "error: %s\n", err);
				rc = -1;
				break;
			}
			if (sink && read_logits(&r, &p, bidx) != 0) {
				rc = -1;
				s++;
				break;
			}
		}
		for (int t = s > slots ? s - slots : 0; t < s; t++) {
			double l, c;
			if (dnn_wait_step(&p, t % slots, &l, &c, err, sizeof(err)) != 0) {
				if (rc == 0)
					fprintf(stderr, "error: %s\n", err);
				rc = -1;
			}
			lsum += l, csum += c;
		}
		int w = starpu_task_wait_for_all();
		if (w != 0) {
			fprintf(stderr, "error: starpu_task_wait_for_all: %s\n", strerror(-w));
			rc = -1;
		}
		wait_readers(&r);
		dnn_plan_destroy(&p);
	}
out:
	free(idx);
	pthread_cond_destroy(&r.cv);
	pthread_mutex_destroy(&r.mu);
	if (loss)
		*loss = ds->n ? lsum / ds->n : 0;
	if (acc)
		*acc = ds->n ? csum / ds->n : 0;
	return rc;
}

/* ---------------------------------------------------------------- the test set */
int dnn_evaluate_test(dnn_model *m, const dnn_dataset *test, int batch, int chunks, dnn_anp_metrics *anp, double *loss,
		      double *acc)
{
	if (test->folder && anp)
		return dnn_anp_evaluate(m, test, batch, chunks, anp, loss, acc);
	return dnn_evaluate(m, test, batch, chunks, NULL, NULL, loss, acc);
}

/* ---------------------------------------------------------------- eval --dump-logits */
/* A NumPy .npy file (format 1.0) of float32 rows, one per sample in sample order: the sink writes
 * each chunk's rows at their samples' offsets, so the order StarPU finishes the chunks in does not
 * matter. A language model's row is the T x V logits of one window. */
typedef struct {
	int fd, err;       /* err: the first write's errno (0: none) */
	size_t row;        /* floats per sample */
	off_t data;        /* the header's length */
} logits_dump;

static void dump_sink(void *ctx, const float *logits, int classes, const int *idx, int n)
{
	logits_dump *d = ctx;
	(void)classes; /* a language model's row is T of them: d->row */
	for (int i = 0; i < n && !d->err; i++) {
		const size_t bytes = sizeof(float) * d->row;
		const ssize_t w = pwrite(d->fd, logits + (size_t)i * d->row, bytes, d->data + (off_t)idx[i] * (off_t)bytes);
		if (w != (ssize_t)bytes)
			d->err = w < 0 ? errno : EIO;
	}
}

/* Opens path and writes the .npy header of n samples of shape (n, T, V) (T = 0: (n, V)). Returns 0,
 * or -1 after one error line. */
static int dump_open(logits_dump *d, const char *path, int n, int T, int V)
{
	char h[128];
	int len = T > 0 ? snprintf(h, sizeof(h), "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d, %d), }", n, T, V)
			: snprintf(h, sizeof(h), "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", n, V);
	while ((10 + len + 1) % 64 != 0) /* the magic, version and length take 10 bytes; the dict ends in \n */
		h[len++] = ' ';
	h[len++] = '\n';
	unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len & 0xff), (unsigned char)(len >> 8)};
	*d = (logits_dump){.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644), .row = (size_t)V * (T > 0 ? T : 1),
			   .data = 10 + len};
	if (d->fd < 0 || write(d->fd, pre, 10) != 10 || write(d->fd, h, (size_t)len) != len) {
		fprintf(stderr, "error: --dump-logits %s: %s\n", path, strerror(errno));
		if (d->fd >= 0)
			close(d->fd);
		d->fd = -1;
		return -1;
	}
	return 0;
}

/* Closes the dump; rc: the evaluation's. Returns 0, or -1 after one error line. */
static int dump_close(logits_dump *d, const char *path, int rc)
{
	if (d->fd < 0)
		return rc;
	if (close(d->fd) != 0 && !d->err)
		d->err = errno;
	if (d->err) {
		fprintf(stderr, "error: --dump-logits %s: %s\n", path, strerror(d->err));
		return -1;
	}
	return rc;
}

/* The evaluation of `starpu_anp eval`: the test-set metrics and, with --dump-logits, the logits
 * (read in the same pass, except for an image folder, whose ANP metrics read them in their own). */
static int eval_pass(dnn_model *m, dnn_dataset *test, const dnn_train_opts *o, int chunks, int T, dnn_anp_metrics *anp,
		     double *loss, double *acc)
{
	if (!o->dump_logits)
		return dnn_evaluate_test(m, test, o->batch, chunks, anp, loss, acc);
	logits_dump d;
	if (dump_open(&d, o->dump_logits, test->n, T, m->g->classes) != 0)
		return -1;
	int rc = test->folder ? dnn_evaluate_test(m, test, o->batch, chunks, anp, loss, acc) : 0;
	if (rc == 0)
		rc = dnn_evaluate(m, test, o->batch, chunks, dump_sink, &d, test->folder ? NULL : loss,
				  test->folder ? NULL : acc);
	return dump_close(&d, o->dump_logits, rc);
}

/* ---------------------------------------------------------------- starpu_anp eval */
int dnn_cmd_eval(const dnn_train_opts *o)
{
	char err[512];
	dnn_graph g;
	dnn_dataset test = {0};
	dnn_model m;
	int rc = 1, have_model = 0;
	dnn_knobs_set_bf16(o->bf16);
	if ((rc = dnn_ckpt_open_graph(&g, o, o->data_dir)) != 0) /* the checkpoint's net (model_ckpt.h) */
		return rc;
	rc = 1;
	if (dnn_data_load(o, &g, 0, &test) != 0)
		goto out;
	if (dnn_model_create(&m, &g, o->seed, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		goto out;
	}
	have_model = 1;
	m.class_names = test.class_names; /* image folders: must match the checkpoint's */
	uint64_t step;
	uint32_t epoch;
	if (dnn_model_load(&m, o->checkpoint_in, &step, &epoch, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		goto out;
	}
	int chunks = dnn_opts_chunks(o, m.g);
	const int T = dnn_data_token_context(&g); /* a language model: --val-batches bounds its windows */
	if (T > 0 && o->val_batches > 0 && (long)o->val_batches * o->batch < test.n)
		test.n = o->val_batches * o->batch;
	if (dnn_preflight_memory(&m, NULL, o->batch, chunks, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		goto out;
	}
	double loss, acc, t0 = dnn_now();
	dnn_anp_metrics anp = {0};
	if (eval_pass(&m, &test, o, chunks, T, &anp, &loss, &acc) != 0)
		goto out;
	double wall = dnn_now() - t0;
	printf("result: cmd=eval net=%s checkpoint=%s epoch=%u step=%llu samples=%d test_accuracy=%.4f test_loss=%.6f "
	       "images_per_s=%.1f wall_s=%.2f",
	       o->net, o->checkpoint_in, epoch, (unsigned long long)step, test.n, acc, loss, wall > 0 ? test.n / wall : 0, wall);
	if (test.folder)
		dnn_anp_print_fields(stdout, NULL, &test, &anp);
	if (T > 0)
		printf(" context=%d test_%s=%.4f test_tokens=%ld tokens_per_s=%.1f", T,
		       test.bytes ? "bits_per_byte" : "bits_per_token", loss / M_LN2, (long)test.n * T,
		       wall > 0 ? (double)test.n * T / wall : 0);
	printf("\n");
	fflush(stdout);
	rc = 0;
	if (o->report_path && dnn_anp_write_report(o->report_path, o, &g, NULL, &test, test.folder ? &anp : NULL,
						   wall > 0 ? test.n / wall : 0, wall, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		rc = 1;
	}
out:
	if (have_model)
		dnn_model_destroy(&m);
	dnn_dataset_free(&test);
	dnn_graph_free(&g);
	return rc;
}
