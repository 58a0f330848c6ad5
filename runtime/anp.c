/* anp.c — image-folder nets, ANP evaluation and reports, and `starpu_anp predict` (see anp.h). */
#include "anp.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <starpu.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "dnn_codelet.h"
#include "dnn_runtime.h"
#include "imagefolder.h"
#include "progress.h"

static int is_dir(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int dnn_anp_prepare_graph(dnn_graph *g, int input, const char *data_dir, char *err, size_t errlen)
{
	if (input > 0 && dnn_graph_set_input_hw(g, input, input, err, errlen) != 0)
		return -1;
	/* "fashion-mnist" and "synthetic" are names of sets, not folders (as in load_data). */
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

/* ---------------------------------------------------------------- forward with logits */
typedef void (*logits_sink)(void *ctx, const float *logits, int classes, const int *idx, int n);

typedef struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int pending;
	logits_sink sink;
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

static void read_logits(logits_reader *r, dnn_plan *p, const int *idx)
{
	const dnn_graph *g = p->m->g;
	const int logits = g->nodes[g->nnodes - 1].inputs[0];
	for (int c = 0; c < p->nchunks; c++) {
		logits_req *q = malloc(sizeof(*q) + sizeof(int) * (size_t)p->chunk_n[c]);
		STARPU_ASSERT(q);
		q->r = r, q->h = p->y[logits * p->nchunks + c], q->n = p->chunk_n[c];
		memcpy(q->idx, idx + p->chunk_off[c], sizeof(int) * (size_t)q->n);
		pthread_mutex_lock(&r->mu);
		r->pending++;
		pthread_mutex_unlock(&r->mu);
		DNN_CHECK_STARPU(starpu_data_acquire_on_node_cb(q->h, STARPU_MAIN_RAM, STARPU_R, logits_ready, q));
	}
}

static void wait_readers(logits_reader *r)
{
	pthread_mutex_lock(&r->mu);
	while (r->pending > 0)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
}

/* Forward passes over the samples idx[0..n) of ds, `batch` at a time (the last batch smaller),
 * handing each chunk's logits to the sink. */
static void forward_logits(dnn_model *m, const dnn_dataset *ds, int batch, int chunks, logits_sink sink, void *ctx)
{
	logits_reader r = {.sink = sink, .ctx = ctx, .classes = m->g->classes};
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	int *idx = malloc(sizeof(int) * (size_t)(ds->n ? ds->n : 1));
	STARPU_ASSERT(idx);
	for (int i = 0; i < ds->n; i++)
		idx[i] = i;
	if (batch > ds->n)
		batch = ds->n;
	const int full = batch > 0 ? ds->n / batch : 0, rest = batch > 0 ? ds->n % batch : 0;
	dnn_sgd_config none = {0};
	for (int pass = 0; pass < 2; pass++) {
		const int nsteps = pass == 0 ? full : (rest > 0), bsz = pass == 0 ? batch : rest;
		if (nsteps == 0)
			continue;
		const int slots = pass == 0 ? 2 : 1, off = pass == 0 ? 0 : full * batch;
		dnn_plan p;
		dnn_plan_create(&p, m, bsz, chunks < bsz ? chunks : bsz, slots, 0);
		for (int s = 0; s < nsteps; s++) {
			if (s >= slots) { /* at most `slots` batches in flight */
				double l, c;
				dnn_wait_step(&p, s % slots, &l, &c);
			}
			dnn_submit_step(&p, s % slots, ds, idx + off + (size_t)s * bsz, &none);
			read_logits(&r, &p, idx + off + (size_t)s * bsz);
		}
		starpu_task_wait_for_all();
		wait_readers(&r);
		dnn_plan_destroy(&p);
	}
	free(idx);
	pthread_cond_destroy(&r.cv);
	pthread_mutex_destroy(&r.mu);
}

typedef struct {
	dnn_anp_acc acc;
	const dnn_dataset *ds;
} eval_ctx;

static void eval_sink(void *ctx, const float *logits, int classes, const int *idx, int n)
{
	eval_ctx *e = ctx;
	for (int i = 0; i < n; i++)
		if (!dnn_imagefolder_is_bad(e->ds->folder, idx[i]))
			dnn_anp_acc_add(&e->acc, logits + (size_t)i * classes, &e->ds->labels[idx[i]], 1);
}

void dnn_anp_evaluate(dnn_model *m, const dnn_dataset *ds, int batch, int chunks, dnn_anp_metrics *mt,
		      double *loss, double *acc)
{
	eval_ctx e = {.ds = ds};
	if (dnn_anp_acc_init(&e.acc, m->g->classes, (const char *const *)ds->class_names) != 0) {
		fprintf(stderr, "error: out of memory for the evaluation metrics\n");
		exit(1);
	}
	forward_logits(m, ds, batch, chunks, eval_sink, &e);
	dnn_anp_acc_finish(&e.acc, mt);
	dnn_anp_acc_free(&e.acc);
	*loss = mt->loss;
	*acc = mt->top1;
}

/* ---------------------------------------------------------------- result line and report */
static void print_name(FILE *out, const char *s)
{
	for (; *s; s++)
		fputc(*s == ' ' || *s == '\t' || *s == ',' || *s == '>' || *s == ':' || *s == '=' || *s == '\n' ? '?' : *s,
		      out);
}

static int skipped(const dnn_dataset *train, const dnn_dataset *test)
{
	return (train ? dnn_imagefolder_skipped(train->folder) : 0) + (test ? dnn_imagefolder_skipped(test->folder) : 0);
}

void dnn_anp_print_fields(FILE *out, const dnn_dataset *train, const dnn_dataset *test, const dnn_anp_metrics *mt)
{
	const dnn_dataset *named = test && test->class_names ? test : train;
	if (mt) {
		fprintf(out, " top5_accuracy=%.4f adjective_accuracy=%.4f noun_accuracy=%.4f confused=", mt->top5,
			mt->adjective, mt->noun);
		for (int i = 0; i < mt->nconfused; i++) {
			if (i)
				fputc(',', out);
			print_name(out, named->class_names[mt->confused[i].truth]);
			fputc('>', out);
			print_name(out, named->class_names[mt->confused[i].pred]);
			fprintf(out, ":%ld", mt->confused[i].count);
		}
		if (mt->nconfused == 0)
			fputs("none", out);
	}
	fprintf(out, " skipped_images=%d", skipped(train, test));
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

int dnn_anp_write_report(const char *path, const dnn_train_opts *o, const dnn_graph *g, const dnn_dataset *train,
			 const dnn_dataset *test, const dnn_anp_metrics *mt, double images_per_s, double wall_s,
			 char *err, size_t errlen)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f) {
		snprintf(err, errlen, "--report %s: %s", path, strerror(errno));
		return -1;
	}
	const dnn_dataset *named = test && test->class_names ? test : train;
	const dnn_node *in = &g->nodes[0];
	fprintf(f, "{\n  \"cmd\": ");
	json_str(f, o->cmd);
	fprintf(f, ",\n  \"net\": ");
	json_str(f, o->net);
	fprintf(f, ",\n  \"data\": ");
	json_str(f, o->data_dir);
	fprintf(f, ",\n  \"input\": [%d, %d, %d],\n  \"classes\": %d,\n  \"class_names\": [", in->C, in->H, in->W,
		g->classes);
	for (int i = 0; named && named->class_names && i < named->classes; i++) {
		fprintf(f, i ? ", " : "");
		json_str(f, named->class_names[i]);
	}
	fprintf(f, "],\n  \"train_images\": %d,\n  \"val_images\": %d,\n  \"skipped_images\": %d,\n  \"skipped_files\": [",
		train ? train->n : 0, test ? test->n : 0, skipped(train, test));
	int k = 0;
	for (int side = 0; side < 2; side++) {
		const dnn_dataset *d = side == 0 ? train : test;
		const char *list[100];
		int nl = d ? dnn_imagefolder_skipped_list(d->folder, list, 100) : 0;
		for (int i = 0; i < nl; i++, k++) {
			fprintf(f, k ? ", " : "");
			json_str(f, list[i]);
		}
	}
	fprintf(f, "]");
	if (mt) {
		fprintf(f, ",\n  \"evaluated\": %ld,\n  \"loss\": %.6f,\n  \"top1_accuracy\": %.6f,\n  \"top5_accuracy\": %.6f,\n"
			   "  \"adjective_accuracy\": %.6f,\n  \"noun_accuracy\": %.6f,\n  \"most_confused\": [",
			mt->n, mt->loss, mt->top1, mt->top5, mt->adjective, mt->noun);
		for (int i = 0; i < mt->nconfused; i++) {
			fprintf(f, "%s\n    {\"true\": ", i ? "," : "");
			json_str(f, named->class_names[mt->confused[i].truth]);
			fprintf(f, ", \"predicted\": ");
			json_str(f, named->class_names[mt->confused[i].pred]);
			fprintf(f, ", \"count\": %ld}", mt->confused[i].count);
		}
		fprintf(f, "%s]", mt->nconfused ? "\n  " : "");
	}
	fprintf(f, ",\n  \"images_per_s\": %.1f,\n  \"wall_s\": %.2f\n}\n", images_per_s, wall_s);
	int bad = ferror(f);
	bad |= fflush(f) != 0;
	bad |= fclose(f) != 0;
	if (bad || rename(tmp, path) != 0) {
		snprintf(err, errlen, "--report %s: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------- predict */
#define TOPK 5

typedef struct {
	int k;
	int *cls;    // (n, k)
	float *prob; // (n, k)
} predict_ctx;

static void predict_sink(void *ctx, const float *logits, int classes, const int *idx, int n)
{
	predict_ctx *pc = ctx;
	for (int i = 0; i < n; i++) {
		const float *l = logits + (size_t)i * classes;
		float mx = l[0];
		for (int c = 1; c < classes; c++)
			mx = l[c] > mx ? l[c] : mx;
		double se = 0;
		for (int c = 0; c < classes; c++)
			se += exp((double)l[c] - mx);
		int *cls = pc->cls + (size_t)idx[i] * pc->k;
		float *pr = pc->prob + (size_t)idx[i] * pc->k;
		for (int t = 0; t < pc->k; t++) { /* selection of the k best, lower index first on ties */
			int best = -1;
			for (int c = 0; c < classes; c++) {
				int taken = 0;
				for (int u = 0; u < t; u++)
					taken |= cls[u] == c;
				if (!taken && (best < 0 || l[c] > l[best]))
					best = c;
			}
			cls[t] = best;
			pr[t] = (float)(exp((double)l[best] - mx) / se);
		}
	}
}

int dnn_cmd_predict(const dnn_train_opts *o, const char *const *images, int nimages)
{
	char err[1024];
	dnn_graph g;
	if (dnn_graph_load(&g, o->net, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	dnn_ckpt_meta meta;
	if (dnn_anp_prepare_graph(&g, o->input, NULL, err, sizeof(err)) != 0 ||
	    dnn_checkpoint_read_classes(o->resume_path, &meta, err, sizeof(err)) != 0 ||
	    (meta.nclasses > 0 && dnn_graph_set_classes(&g, (int)meta.nclasses, err, sizeof(err)) != 0)) {
		fprintf(stderr, "error: %s\n", err);
		dnn_graph_free(&g);
		return 1;
	}
	dnn_dataset ds;
	if (dnn_imagefolder_from_files(&ds, images, nimages, g.nodes[0].C, g.nodes[0].H, g.nodes[0].W, err,
				       sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		dnn_ckpt_free_names(&meta);
		dnn_graph_free(&g);
		return 1;
	}
	dnn_model m;
	dnn_model_create(&m, &g, o->seed);
	m.class_names = meta.class_names;
	if (dnn_model_load(&m, o->resume_path, NULL, NULL, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s (predict needs the --net and --input it was trained with)\n", err);
		dnn_model_destroy(&m), dnn_dataset_free(&ds), dnn_ckpt_free_names(&meta), dnn_graph_free(&g);
		return 1;
	}
	predict_ctx pc = {.k = g.classes < TOPK ? g.classes : TOPK};
	pc.cls = malloc(sizeof(int) * (size_t)nimages * pc.k);
	pc.prob = malloc(sizeof(float) * (size_t)nimages * pc.k);
	STARPU_ASSERT(pc.cls && pc.prob);
	int chunks = o->chunks > 0 ? o->chunks : 2 * (int)starpu_worker_get_count();
	double t0 = dnn_now();
	forward_logits(&m, &ds, o->batch, chunks, predict_sink, &pc);
	double wall = dnn_now() - t0;
	int nbad = 0;
	for (int i = 0; i < nimages; i++) {
		if (dnn_imagefolder_is_bad(ds.folder, i)) {
			nbad++;
			continue;
		}
		printf("%s:", images[i]);
		for (int t = 0; t < pc.k; t++) {
			int c = pc.cls[(size_t)i * pc.k + t];
			putchar(' ');
			if (meta.class_names)
				print_name(stdout, meta.class_names[c]);
			else
				printf("class%d", c);
			printf("=%.4f", pc.prob[(size_t)i * pc.k + t]);
		}
		putchar('\n');
	}
	printf("result: cmd=predict net=%s checkpoint=%s images=%d predicted=%d skipped_images=%d images_per_s=%.1f "
	       "wall_s=%.2f\n",
	       o->net, o->resume_path, nimages, nimages - nbad, nbad, wall > 0 ? nimages / wall : 0, wall);
	fflush(stdout);
	free(pc.cls), free(pc.prob);
	dnn_model_destroy(&m);
	dnn_dataset_free(&ds);
	dnn_ckpt_free_names(&meta);
	dnn_graph_free(&g);
	return nbad ? 1 : 0;
}
