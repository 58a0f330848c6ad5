/* op_harness — the ops' test harness (op_harness.h says what it checks; op_cases.c holds the
 * table). `op_harness unit|grad|gpu [OP ...]` runs one mode over every op of the table (or the
 * ops named); CTest runs it as unit_op_harness, grad_op_harness and gpu_op_harness. gpu exits 77
 * without a CUDA worker (gpu_util.h), as the gpu label does; `op_harness list` prints the rows. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunksum.h"
#include "fuse.h"
#include "gpu_util.h"
#include "model.h"
#include "op.h"
#include "op_harness.h"
#include "test_util.h"

#define H_STEP 5 /* the global step the tasks see (dropout's mask) */

int h_cpu_worker(void) { return gpu_cpu_worker; }
int h_cuda_worker(void) { return gpu_cuda_worker; }

/* ------------------------------------------------------------------ the one-op net */

typedef struct {
	dnn_graph g;
	dnn_model m;
	dnn_plan p;
	int ok_g, ok_m, ok_p;
	int t, d[2], nd;          // the op's node, its distinct placeholders
	size_t in_per, out_per;   // floats per sample of an input and of the op's output
	int nparams;
	dnn_param *pr[4];
	long pn[4];
} h_net;

static void net_free(h_net *h)
{
	if (h->ok_p)
		dnn_plan_destroy(&h->p);
	if (h->ok_m)
		dnn_model_destroy(&h->m);
	if (h->ok_g)
		dnn_graph_free(&h->g);
}

static int node_of(const dnn_graph *g, const char *name)
{
	for (int i = 0; i < g->nnodes; i++)
		if (strcmp(g->nodes[i].name, name) == 0)
			return i;
	return -1;
}

static int net_make(h_net *h, const h_op *op, const h_shape *s)
{
	memset(h, 0, sizeof(*h));
	char text[1024], err[512];
	int len;
	if (op->net) {
		len = op->net(s, text, sizeof(text));
	} else {
		len = s->seq ? snprintf(text, sizeof(text), "input x seq %d %d\ndropout d0 x p=0\n", s->H, s->C)
			     : snprintf(text, sizeof(text), "input x %d %d %d\ndropout d0 x p=0\n", s->C, s->H, s->W);
		if (op->ninputs > 1 && !op->fanout)
			len += snprintf(text + len, sizeof(text) - len, "dropout d1 x p=0\n");
		len += snprintf(text + len, sizeof(text) - len, "%s t d0%s %s\n", op->op,
				op->ninputs > 1 ? (op->fanout ? ",d0" : ",d1") : "", s->keys ? s->keys : "");
	}
	if (!op->is_loss)
		snprintf(text + len, sizeof(text) - len, "dense o t out=2\nsoftmax_xent loss o\n");
	if (dnn_graph_parse(&h->g, text, "op_harness", err, sizeof(err)) != 0) {
		TEST_CHECK(0, "%s: the net does not parse: %s\n%s", op->op, err, text);
		return -1;
	}
	h->ok_g = 1;
	if (dnn_model_create(&h->m, &h->g, 1, err, sizeof(err)) != 0) {
		TEST_CHECK(0, "%s: model: %s", op->op, err);
		return -1;
	}
	h->ok_m = 1;
	if (dnn_plan_create(&h->p, &h->m, s->N, s->chunks > 0 ? s->chunks : 1, 1, 1, &h_cfg, err, sizeof(err)) != 0) {
		TEST_CHECK(0, "%s: plan: %s", op->op, err);
		return -1;
	}
	h->ok_p = 1;
	h->t = node_of(&h->g, "t");
	h->d[0] = node_of(&h->g, "d0");
	h->d[1] = node_of(&h->g, "d1");
	h->nd = h->d[1] >= 0 ? 2 : 1;
	const dnn_node *t = &h->g.nodes[h->t], *in = &h->g.nodes[h->d[0]];
	h->in_per = (size_t)in->C * in->H * in->W;
	h->out_per = (size_t)t->C * t->H * t->W;
	const int pnode = op->param_node ? node_of(&h->g, op->param_node) : h->t;
	const dnn_op_desc *desc = dnn_op_get(h->g.nodes[pnode].op);
	for (int s2 = 0; s2 < desc->nparam_slots && s2 < 4; s2++) {
		dnn_param *pr = dnn_op_param(&h->m, pnode, s2);
		if (!pr)
			break;
		h->pr[h->nparams] = pr;
		h->pn[h->nparams++] = pr->n;
	}
	return 0;
}

/* ------------------------------------------------------------------ handles */

static void h_set(starpu_data_handle_t h, const void *src, size_t bytes)
{
	if (starpu_data_acquire(h, STARPU_W) != 0) {
		fprintf(stderr, "FAIL: starpu_data_acquire(W)\n");
		exit(1);
	}
	memcpy(starpu_data_get_local_ptr(h), src, bytes);
	starpu_data_release(h);
}

static void h_get(starpu_data_handle_t h, void *dst, size_t bytes)
{
	if (starpu_data_acquire(h, STARPU_R) != 0) {
		fprintf(stderr, "FAIL: starpu_data_acquire(R)\n");
		exit(1);
	}
	memcpy(dst, starpu_data_get_local_ptr(h), bytes);
	starpu_data_release(h);
}

/* ------------------------------------------------------------------ one case's data */

typedef struct {
	int N;
	float *x[2];        // inputs (N x in_per)
	int32_t *labels;    // the loss's (N)
	float *r;           // dL/dy (N x out_per)
	float *dx0[2];      // what an accumulating backward adds to
	float *w[4], *g0[4];
	/* results of a run: forward y (or per-chunk stats for the loss), dx after = and after +=,
	 * the parameter gradients after the = pass and after the += pass */
	float *y, *stats, *dxw[2], *dxa[2], *gA[4], *gB[4];
} h_data;

static void data_alloc_results(h_data *d, const h_net *h, int K)
{
	d->y = alloc_f((size_t)d->N * h->out_per);
	d->stats = alloc_f(2 * (size_t)K);
	for (int k = 0; k < h->nd; k++)
		d->dxw[k] = alloc_f((size_t)d->N * h->in_per), d->dxa[k] = alloc_f((size_t)d->N * h->in_per);
	for (int s = 0; s < h->nparams; s++)
		d->gA[s] = alloc_f(h->pn[s]), d->gB[s] = alloc_f(h->pn[s]);
}

static void data_free_results(h_data *d)
{
	free(d->y), free(d->stats);
	for (int k = 0; k < 2; k++)
		free(d->dxw[k]), free(d->dxa[k]), d->dxw[k] = d->dxa[k] = NULL;
	for (int s = 0; s < 4; s++)
		free(d->gA[s]), free(d->gB[s]), d->gA[s] = d->gB[s] = NULL;
	d->y = d->stats = NULL;
}

static void data_make(h_data *d, const h_op *op, const h_net *h, int mode, const h_shape *s)
{
	const int N = s->N;
	memset(d, 0, sizeof(*d));
	d->N = N;
	const size_t nx = (size_t)N * h->in_per, ny = (size_t)N * h->out_per;
	for (int k = 0; k < h->nd; k++) {
		d->x[k] = alloc_f(nx);
		const char *voc = s->keys ? strstr(s->keys, "vocab=") : NULL;
		if (h->d[k] == 0 && h->g.nodes[0].tokens) /* the net's token input: integer ids in [0, V) */
			for (size_t i = 0; i < nx; i++)
				d->x[k][i] = (float)test_rng_int(0, (voc ? atoi(voc + 6) : 1) - 1);
		else if (op->fill)
			op->fill(mode, k, d->x[k], nx);
		else
			test_fill_uniform(d->x[k], nx, -1, 1);
		for (size_t i = 0; i < nx && s->shift != 0; i++)
			d->x[k][i] += s->shift;
	}
	if (op->is_loss) { /* label_len per sample (T on a sequence), each in [0, classes) */
		const size_t nl = (size_t)N * (size_t)h->g.label_len;
		d->labels = malloc(nl * sizeof(int32_t));
		for (size_t i = 0; i < nl; i++)
			d->labels[i] = test_rng_int(0, h->g.classes - 1);
	}
	d->r = alloc_f(ny);
	test_fill_uniform(d->r, ny, -1, 1);
	for (size_t i = 0; i < ny && op->dy_min > 0; i++)
		if (fabsf(d->r[i]) < op->dy_min)
			d->r[i] = d->r[i] < 0 ? -(float)op->dy_min : (float)op->dy_min;
	for (int k = 0; k < h->nd; k++) {
		d->dx0[k] = alloc_f(nx);
		test_fill_uniform(d->dx0[k], nx, -1, 1);
	}
	for (int s = 0; s < h->nparams; s++) {
		d->w[s] = alloc_f(h->pn[s]);
		if (op->fill_param)
			op->fill_param(s, d->w[s], h->pn[s]);
		else
			test_fill_uniform(d->w[s], h->pn[s], -1, 1);
		d->g0[s] = alloc_f(h->pn[s]);
		test_fill_uniform(d->g0[s], h->pn[s], -1, 1); /* REDUX must add onto what is there */
	}
}

static void data_free(h_data *d)
{
	data_free_results(d);
	for (int k = 0; k < 2; k++)
		free(d->x[k]), free(d->dx0[k]);
	for (int s = 0; s < 4; s++)
		free(d->w[s]), free(d->g0[s]);
	free(d->labels), free(d->r);
}

/* ------------------------------------------------------------------ running the descriptor */

/* Forward, then backward overwriting (pass 0) and accumulating (pass 1), every chunk, through the
 * op's descriptor; opts: the tasks' worker (NULL: the scheduler's). Results into d. */
static void run(h_net *h, const h_op *op, h_data *d, const dnn_task_opts *opts)
{
	dnn_plan *p = &h->p;
	const dnn_op_desc *desc = dnn_op_get(h->g.nodes[h->t].op);
	const int K = p->nchunks;
	for (int s = 0; s < h->nparams; s++) {
		h_set(h->pr[s]->hw, d->w[s], h->pn[s] * sizeof(float));
		h_set(h->pr[s]->hg, d->g0[s], h->pn[s] * sizeof(float));
	}
	const size_t most = (size_t)d->N * (h->in_per > h->out_per ? h->in_per : h->out_per) + 2;
	float *nan = alloc_f(most);
	fill_nan(nan, most);
	/* The parameters' gradients go as in training: each chunk into its own partial (zero when
	 * first used), then the fixed-order sum over chunks into hg (graph/chunksum.h), from g0. */
	for (int pass = 0; pass < (op->is_loss ? 1 : 2); pass++) {
		for (int c = 0; c < K; c++) {
			dnn_op_ctx ctx = {.p = p, .m = &h->m, .g = &h->g, .slot = 0, .step = H_STEP};
			dnn_task_opts pin;
			dnn_op_ctx_chunk(&ctx, c, &pin);
			ctx.opts = opts;
			const size_t n = (size_t)ctx.n, off = (size_t)p->chunk_off[c];
			for (int k = 0; k < h->nd; k++)
				h_set(dnn_op_out(&ctx, h->d[k]), d->x[k] + off * h->in_per, n * h->in_per * sizeof(float));
			if (op->is_loss) {
				h_set(p->labels[c], d->labels + off * (size_t)h->g.label_len,
				      n * (size_t)h->g.label_len * sizeof(int32_t));
				h_set(dnn_op_dy(&ctx, h->d[0]), nan, n * h->in_per * sizeof(float));
			}
			if (op->is_loss) /* NaN: an output the tasks leave unwritten shows */
				h_set(p->stats[c], nan, 2 * sizeof(float));
			else
				h_set(dnn_op_out(&ctx, h->t), nan, n * h->out_per * sizeof(float));
			int rc = desc->forward(&ctx, h->t);
			TEST_CHECK(rc == 0, "%s: forward submission: %d", op->op, rc);
			if (!op->is_loss) {
				memset(ctx.written, 0, (size_t)h->g.nnodes);
				h_set(dnn_op_dy(&ctx, h->t), d->r + off * h->out_per, n * h->out_per * sizeof(float));
				ctx.written[h->t] = 1; /* as in training: its gradient holds the consumers' part */
				for (int k = 0; k < h->nd; k++) {
					if (h->d[k] == 0)
						continue; /* the net's input: no gradient */
					const float *init = pass ? d->dx0[k] + off * h->in_per : nan;
					h_set(dnn_op_dy(&ctx, h->d[k]), init, n * h->in_per * sizeof(float));
					ctx.written[h->d[k]] = (char)pass;
				}
				rc = desc->backward ? desc->backward(&ctx, h->t) : 0;
				TEST_CHECK(rc == 0, "%s: backward submission: %d", op->op, rc);
				h_get(dnn_op_out(&ctx, h->t), d->y + off * h->out_per, n * h->out_per * sizeof(float));
			} else {
				h_get(p->stats[c], d->stats + 2 * c, 2 * sizeof(float));
			}
			for (int k = 0; k < h->nd; k++)
				if (h->d[k] != 0)
					h_get(dnn_op_dy(&ctx, h->d[k]), (pass ? d->dxa[k] : d->dxw[k]) + off * h->in_per,
					      n * h->in_per * sizeof(float));
		}
		if (p->train && dnn_chunksum_submit_grads(p) != 0)
			TEST_CHECK(0, "%s: the sums over chunks failed", op->op);
		for (int s = 0; s < h->nparams; s++)
			h_get(h->pr[s]->hg, pass ? d->gB[s] : d->gA[s], h->pn[s] * sizeof(float));
	}
	free(nan);
	if (starpu_task_wait_for_all() != 0)
		TEST_CHECK(0, "%s: starpu_task_wait_for_all", op->op);
}

/* ------------------------------------------------------------------ references */

typedef struct {
	double *x[2], *w[4];
	const h_net *h;
	const h_op *op;
	const h_data *d;
} h_dref;

static void dref_make(h_dref *r, const h_op *op, const h_net *h, const h_data *d)
{
	memset(r, 0, sizeof(*r));
	r->h = h, r->op = op, r->d = d;
	for (int k = 0; k < h->nd; k++)
		r->x[k] = to_double(d->x[k], (size_t)d->N * h->in_per);
	for (int s = 0; s < h->nparams; s++)
		r->w[s] = to_double(d->w[s], h->pn[s]);
}

static void dref_free(h_dref *r)
{
	for (int k = 0; k < 2; k++)
		free(r->x[k]);
	for (int s = 0; s < 4; s++)
		free(r->w[s]);
}

static h_ref_args ref_args(const h_dref *r, int c, const double **xs)
{
	const dnn_plan *p = &r->h->p;
	const size_t off = (size_t)p->chunk_off[c];
	xs[0] = r->x[0] + off * r->h->in_per;
	xs[1] = r->op->fanout ? xs[0] : (r->x[1] ? r->x[1] + off * r->h->in_per : NULL);
	return (h_ref_args){.nd = &r->h->g.nodes[r->h->t], .in = &r->h->g.nodes[r->h->d[0]], .n = p->chunk_n[c],
			    .x = xs, .w = (const double *const *)r->w,
			    .labels = r->d->labels ? r->d->labels + off * (size_t)r->h->g.label_len : NULL};
}

/* The forward reference of every chunk into y (N x out_per), or the loss's (loss, correct) pairs. */
static void ref_forward(const h_dref *r, double *y)
{
	const dnn_plan *p = &r->h->p;
	for (int c = 0; c < p->nchunks; c++) {
		const double *xs[2];
		h_ref_args a = ref_args(r, c, xs);
		r->op->ref(&a, r->op->is_loss ? y + 2 * c : y + (size_t)p->chunk_off[c] * r->h->out_per);
	}
}

/* L_c = sum(ref(chunk c) .* r) (the loss: its summed loss). */
static double chunk_loss(const h_dref *r, int c)
{
	const dnn_plan *p = &r->h->p;
	const double *xs[2];
	h_ref_args a = ref_args(r, c, xs);
	const size_t n = (size_t)a.n * r->h->out_per;
	double *y = alloc_d(r->op->is_loss ? 2 : n), L = 0;
	r->op->ref(&a, y);
	if (r->op->is_loss)
		L = y[0];
	else
		for (size_t j = 0; j < n; j++)
			L += y[j] * r->d->r[(size_t)p->chunk_off[c] * r->h->out_per + j];
	free(y);
	return L;
}

/* ------------------------------------------------------------------ comparisons */

static void cmp(const char *what, h_tol t, const float *got, const double *ref, const double *scale, size_t n)
{
	if (t.m == H_MIXED) {
		test_close_mixed(what, got, ref, n, t.tol);
		return;
	}
	if (t.m == H_REL) {
		test_close_rel(what, got, ref, n, t.tol);
		return;
	}
	if (t.m == H_EXACT) {
		float *f = alloc_f(n);
		for (size_t i = 0; i < n; i++)
			f[i] = (float)ref[i];
		test_same_bits(what, got, f, n);
		free(f);
		return;
	}
	double worst = 0;
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		const double s = scale ? scale[i] : fabs(ref[i]);
		const double e = fabs((double)got[i] - ref[i]) / fmax(s, 1e-30);
		if (!(e <= worst))
			worst = isnan(e) ? INFINITY : e, at = i;
	}
	TEST_CHECK(worst <= t.tol, "%s: error %.3g of the terms' size > %.3g at [%zu] (%.9g vs %.9g)", what, worst, t.tol,
		   at, n ? (double)got[at] : 0.0, n ? ref[at] : 0.0);
}

static void shape_name(char *buf, size_t len, const h_op *op, const h_shape *s, const char *variant)
{
	if (s->seq)
		snprintf(buf, len, "%s N%d seq T%d C%d%s%s K%d%s%s%s", op->op, s->N, s->H, s->C, s->keys ? " " : "",
			 s->keys ? s->keys : "", s->chunks > 0 ? s->chunks : 1, s->shift != 0 ? " shifted" : "",
			 variant ? " " : "", variant ? variant : "");
	else
		snprintf(buf, len, "%s N%d %dx%dx%d%s%s K%d%s%s%s", op->op, s->N, s->C, s->H, s->W, s->keys ? " " : "",
			 s->keys ? s->keys : "", s->chunks > 0 ? s->chunks : 1, s->shift != 0 ? " shifted" : "",
			 variant ? " " : "", variant ? variant : "");
}

/* Forward (and the analytic backward, where the row has one) against the references: y, the
 * loss's stats, dx (=) and dx (+=, as dx0 + dx). */
static void check_against_ref(const char *name, const h_op *op, const h_net *h, const h_data *d, h_tol ft, h_tol bt)
{
	h_dref r;
	dref_make(&r, op, h, d);
	const size_t nx = (size_t)d->N * h->in_per, ny = (size_t)d->N * h->out_per;
	const int K = h->p.nchunks;
	char what[512];
	if (op->ref) {
		double *y = alloc_d(op->is_loss ? 2 * (size_t)K : ny);
		ref_forward(&r, y);
		if (op->is_loss) {
			for (int c = 0; c < K; c++) {
				snprintf(what, sizeof(what), "%s: chunk %d loss", name, c);
				cmp(what, ft, &d->stats[2 * c], &y[2 * c], NULL, 1);
				TEST_CHECK(d->stats[2 * c + 1] == (float)y[2 * c + 1], "%s: chunk %d correct %g, want %g", name, c,
					   (double)d->stats[2 * c + 1], y[2 * c + 1]);
			}
		} else {
			snprintf(what, sizeof(what), "%s: y", name);
			cmp(what, ft, d->y, y, NULL, ny);
		}
		free(y);
	}
	if (op->ref_bwd) {
		double *g = alloc_d(nx), *rd = to_double(d->r, ny);
		for (int c = 0; c < K; c++) {
			const double *xs[2];
			h_ref_args a = ref_args(&r, c, xs);
			const size_t off = (size_t)h->p.chunk_off[c];
			op->ref_bwd(&a, rd + off * h->out_per, g + off * h->in_per);
		}
		snprintf(what, sizeof(what), "%s: dx", name);
		cmp(what, bt, d->dxw[0], g, NULL, nx);
		if (!op->is_loss) {
			double *acc = alloc_d(nx), *scale = alloc_d(nx);
			for (size_t i = 0; i < nx; i++)
				acc[i] = (double)d->dx0[0][i] + g[i], scale[i] = fabs((double)d->dx0[0][i]) + fabs(g[i]);
			snprintf(what, sizeof(what), "%s: dx +=", name);
			cmp(what, bt, d->dxa[0], acc, scale, nx);
			free(acc), free(scale);
		}
		free(g), free(rd);
	}
	dref_free(&r);
}

dnn_exec_config h_cfg = DNN_EXEC_CONFIG_DEFAULTS;

/* ------------------------------------------------------------------ modes */

static void unit_shape(const h_op *op, const h_shape *s)
{
	const int nv = op->nvariants > 0 ? op->nvariants : 1;
	float *y0 = NULL, *dx0w = NULL, *dx0a = NULL;
	int have0 = 0;
	for (int v = 0; v < nv; v++) {
		char vname[64] = "", name[256];
		if (op->set_variant && !op->set_variant(v, vname, sizeof(vname))) {
			printf("%-60s variant %s does not run here\n", op->op, vname);
			continue;
		}
		h_net h;
		if (net_make(&h, op, s) == 0) {
			shape_name(name, sizeof(name), op, s, op->set_variant ? vname : NULL);
			test_rng_seed(1000); /* the same data for every variant */
			h_data d;
			data_make(&d, op, &h, H_UNIT, s);
			data_alloc_results(&d, &h, h.p.nchunks);
			run(&h, op, &d, NULL);
			check_against_ref(name, op, &h, &d, op->fwd, op->bwd);
			const size_t ny = (size_t)s->N * h.out_per, nx = (size_t)s->N * h.in_per;
			if (op->variants_same_bits && have0) { /* every variant gives the first one's floats */
				char what[512];
				snprintf(what, sizeof(what), "%s: y vs the first variant", name);
				test_same_bits(what, d.y, y0, ny);
				snprintf(what, sizeof(what), "%s: dx vs the first variant", name);
				test_same_bits(what, d.dxw[0], dx0w, nx);
				snprintf(what, sizeof(what), "%s: dx += vs the first variant", name);
				test_same_bits(what, d.dxa[0], dx0a, nx);
			} else if (op->variants_same_bits) {
				y0 = gpu_copy_f(d.y, ny), dx0w = gpu_copy_f(d.dxw[0], nx), dx0a = gpu_copy_f(d.dxa[0], nx);
				have0 = 1;
			}
			printf("%-60s unit: checked\n", name);
			data_free(&d);
		}
		net_free(&h);
	}
	if (op->set_variant)
		op->set_variant(-1, NULL, 0); /* back to the default */
	free(y0), free(dx0w), free(dx0a);
}

/* Indices of up to max elements of [0, n) (all of them when max is 0 or n <= max). */
static size_t fd_points(size_t *idx, size_t n, int max)
{
	if (max <= 0 || n <= (size_t)max) {
		for (size_t i = 0; i < n; i++)
			idx[i] = i;
		return n;
	}
	for (int i = 0; i < max; i++)
		idx[i] = (size_t)test_rng_int(0, (int)(n - 1));
	return (size_t)max;
}

static void grad_shape(const h_op *op, const h_shape *s)
{
	h_net h;
	if (net_make(&h, op, s) != 0) {
		net_free(&h);
		return;
	}
	char name[256], what[512];
	shape_name(name, sizeof(name), op, s, NULL);
	h_data d;
	data_make(&d, op, &h, H_GRAD, s);
	data_alloc_results(&d, &h, h.p.nchunks);
	run(&h, op, &d, NULL);
	h_dref r;
	dref_make(&r, op, &h, &d);
	const double eps = op->fd_eps;
	const int K = h.p.nchunks;
	/* inputs: only the perturbed element's chunk's loss changes */
	const size_t nx = (size_t)s->N * h.in_per;
	size_t *idx = malloc((nx > 1 ? nx : 1) * sizeof(size_t));
	for (int k = 0; k < (op->fanout ? 1 : h.nd) && h.d[k] != 0; k++) { /* the net's input has no gradient */
		size_t m = fd_points(idx, nx, op->fd_points);
		float *gw = alloc_f(m), *ga = alloc_f(m);
		double *g = alloc_d(m), *acc = alloc_d(m), *sa = alloc_d(m);
		for (size_t j = 0; j < m; j++) {
			const size_t i = idx[j];
			int c = 0;
			while (c + 1 < K && (size_t)h.p.chunk_off[c + 1] * h.in_per <= i)
				c++;
			const double keep = r.x[k][i];
			r.x[k][i] = keep + eps;
			const double lp = chunk_loss(&r, c);
			r.x[k][i] = keep - eps;
			const double lm = chunk_loss(&r, c);
			r.x[k][i] = keep;
			g[j] = (lp - lm) / (2 * eps);
			gw[j] = d.dxw[k][i], ga[j] = d.dxa[k][i];
			acc[j] = (double)d.dx0[k][i] + g[j], sa[j] = fabs((double)d.dx0[k][i]) + fabs(g[j]);
		}
		snprintf(what, sizeof(what), "%s: dx%d (fd, %zu points)", name, k, m);
		cmp(what, op->grad, gw, g, NULL, m);
		if (!op->is_loss) {
			snprintf(what, sizeof(what), "%s: dx%d += (fd)", name, k);
			cmp(what, op->grad, ga, acc, sa, m);
		}
		free(gw), free(ga), free(g), free(acc), free(sa);
	}
	free(idx);
	/* parameters: every chunk's loss; REDUX over the chunks onto g0, once and then twice */
	for (int p = 0; p < h.nparams; p++) {
		const size_t n = (size_t)h.pn[p];
		size_t *pi = malloc(n * sizeof(size_t)), m = fd_points(pi, n, op->fd_points);
		float *gotA = alloc_f(m), *gotB = alloc_f(m);
		double *wantA = alloc_d(m), *wantB = alloc_d(m);
		for (size_t j = 0; j < m; j++) {
			const size_t i = pi[j];
			const double keep = r.w[p][i];
			double G = 0;
			for (int c = 0; c < K; c++) {
				r.w[p][i] = keep + eps;
				const double lp = chunk_loss(&r, c);
				r.w[p][i] = keep - eps;
				const double lm = chunk_loss(&r, c);
				G += (lp - lm) / (2 * eps);
			}
			r.w[p][i] = keep;
			wantA[j] = (double)d.g0[p][i] + G, wantB[j] = (double)d.g0[p][i] + 2 * G;
			gotA[j] = d.gA[p][i], gotB[j] = d.gB[p][i];
		}
		const char *pname = h.pr[p]->name;
		snprintf(what, sizeof(what), "%s: %s grad (REDUX over %d chunks, fd)", name, pname, K);
		cmp(what, (h_tol){H_MIXED, op->grad.tol}, gotA, wantA, NULL, m);
		snprintf(what, sizeof(what), "%s: %s grad after the second pass (fd)", name, pname);
		cmp(what, (h_tol){H_MIXED, op->grad.tol}, gotB, wantB, NULL, m);
		free(pi), free(gotA), free(gotB), free(wantA), free(wantB);
	}
	printf("%-60s grad: checked\n", name);
	dref_free(&r);
	data_free(&d);
	net_free(&h);
}

static void gpu_shape(const h_op *op, const h_shape *s)
{
	h_net h;
	if (net_make(&h, op, s) != 0) {
		net_free(&h);
		return;
	}
	char name[256], what[512];
	shape_name(name, sizeof(name), op, s, NULL);
	h_data d[2];
	const int workers[2] = {gpu_cpu_worker, gpu_cuda_worker};
	const char *dev[2] = {"cpu", "cuda"};
	test_rng_seed(2000);
	data_make(&d[0], op, &h, H_GPU, s);
	for (int w = 0; w < 2; w++) {
		if (w)
			d[1] = d[0]; /* the same inputs; its own results */
		data_alloc_results(&d[w], &h, h.p.nchunks);
		dnn_task_opts o = {.node = -1, .pinned = 1, .worker = workers[w]};
		run(&h, op, &d[w], &o);
		if (op->gpu_vs_ref) {
			snprintf(what, sizeof(what), "%s %s", name, dev[w]);
			check_against_ref(what, op, &h, &d[w], op->gpu, op->gpu);
		}
	}
	if (!op->gpu_vs_ref) {
		const size_t ny = (size_t)s->N * h.out_per, nx = (size_t)s->N * h.in_per;
		const double tol = op->gpu.tol;
		if (op->is_loss) {
			snprintf(what, sizeof(what), "%s: stats (cuda vs cpu)", name);
			test_close_mixed_f(what, d[1].stats, d[0].stats, 2 * (size_t)h.p.nchunks, tol);
		} else {
			snprintf(what, sizeof(what), "%s: y (cuda vs cpu)", name);
			test_close_mixed_f(what, d[1].y, d[0].y, ny, op->gpu_y_exact ? 0 : tol);
		}
		for (int k = 0; k < h.nd && h.d[k] != 0; k++) {
			snprintf(what, sizeof(what), "%s: dx%d (cuda vs cpu)", name, k);
			test_close_mixed_f(what, d[1].dxw[k], d[0].dxw[k], nx, tol);
			if (!op->is_loss) {
				snprintf(what, sizeof(what), "%s: dx%d += (cuda vs cpu)", name, k);
				test_close_mixed_f(what, d[1].dxa[k], d[0].dxa[k], nx, tol);
			}
		}
		for (int p = 0; p < h.nparams; p++) {
			snprintf(what, sizeof(what), "%s: %s grad (REDUX, cuda vs cpu)", name, h.pr[p]->name);
			test_close_mixed_f(what, d[1].gA[p], d[0].gA[p], h.pn[p], tol);
			snprintf(what, sizeof(what), "%s: %s grad, second pass (cuda vs cpu)", name, h.pr[p]->name);
			test_close_mixed_f(what, d[1].gB[p], d[0].gB[p], h.pn[p], tol);
		}
	}
	printf("%-60s gpu: cpu worker %d, cuda worker %d: checked\n", name, gpu_cpu_worker, gpu_cuda_worker);
	data_free_results(&d[1]);
	data_free(&d[0]);
	net_free(&h);
}

/* `op_harness onnx DIR`: DIR/<op>.net and DIR/<op>.py of every row with an ONNX net; prints the
 * ops' names, one a line. */
static int write_onnx(const char *dir)
{
	for (int i = 0; i < h_nops; i++) {
		const h_op *op = &h_ops[i];
		if (!op->onnx_net)
			continue;
		char path[4096];
		const char *what[2] = {op->onnx_net, op->onnx_py ? op->onnx_py : "pass\n"};
		const char *ext[2] = {"net", "py"};
		for (int f = 0; f < 2; f++) {
			snprintf(path, sizeof(path), "%s/%s.%s", dir, op->op, ext[f]);
			FILE *fp = fopen(path, "w");
			if (!fp || fprintf(fp, "%s%s", f ? "" : "input x 1 28 28\n", what[f]) < 0 || fclose(fp) != 0) {
				fprintf(stderr, "op_harness: cannot write %s\n", path);
				return 1;
			}
		}
		printf("%s\n", op->op);
	}
	return 0;
}

static const char *mode_names[H_NMODES] = {"unit", "grad", "gpu"};

static int wanted(const h_op *op, int argc, char **argv)
{
	if (argc <= 2)
		return 1;
	for (int i = 2; i < argc; i++)
		if (strcmp(argv[i], op->op) == 0)
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	int mode = -1;
	for (int m = 0; m < H_NMODES && argc > 1; m++)
		if (strcmp(argv[1], mode_names[m]) == 0)
			mode = m;
	if (argc > 1 && strcmp(argv[1], "list") == 0) {
		for (int i = 0; i < h_nops; i++)
			printf("%-14s unit %2d shapes, grad %2d, gpu %2d, variants %d\n", h_ops[i].op, h_ops[i].nshapes[H_UNIT],
			       h_ops[i].nshapes[H_GRAD], h_ops[i].nshapes[H_GPU], h_ops[i].nvariants > 0 ? h_ops[i].nvariants : 1);
		return 0;
	}
	if (argc > 2 && strcmp(argv[1], "onnx") == 0)
		return write_onnx(argv[2]);
	if (mode < 0) {
		fprintf(stderr, "usage: op_harness unit|grad|gpu|list [OP ...] | onnx DIR\n");
		return 2;
	}
	/* The whole command line: start-up may re-execute the program (runtime/cpu_kernels.c, to fix
	 * OpenBLAS's kernel set), and the copy must run the same mode. */
	int ac = argc;
	char **av = argv;
	if (mode == H_GPU) {
		int rc = gpu_setup(&ac, &av, "gpu_op_harness", 1);
		if (rc != 0)
			return rc;
	} else {
		test_starpu_init(&ac, &av);
	}
	/* Each op's own tasks, no fusion across the placeholders (a row's variants may set a level). */
	h_cfg.fuse = 0;
	/* Every op of ops.def except the input line has a row. */
	for (int o = 1; o < DNN_OP_COUNT; o++) {
		int found = 0;
		for (int i = 0; i < h_nops; i++)
			found |= strcmp(h_ops[i].op, dnn_op_name((dnn_op)o)) == 0;
		TEST_CHECK(found, "op %s (graph/ops/ops.def) has no row in tests/op_cases.c", dnn_op_name((dnn_op)o));
	}
	for (int i = 0; i < h_nops; i++) {
		const h_op *op = &h_ops[i];
		if (!wanted(op, argc, argv))
			continue;
		test_rng_seed(op->seed[mode] ? (uint64_t)op->seed[mode] : 1234);
		for (int s = 0; s < op->nshapes[mode]; s++) {
			const h_shape *sh = &op->shapes[mode][s];
			if (mode == H_UNIT)
				unit_shape(op, sh);
			else if (mode == H_GRAD)
				grad_shape(op, sh);
			else
				gpu_shape(op, sh);
		}
		if (op->extra[mode]) {
			test_rng_seed(op->seed[mode] ? (uint64_t)op->seed[mode] : 1234);
			op->extra[mode]();
			printf("%-60s %s: its own checks done\n", op->op, mode_names[mode]);
		}
	}
	test_starpu_shutdown();
	char name[64];
	snprintf(name, sizeof(name), "%s_op_harness", mode_names[mode]);
	return test_report(name);
}
