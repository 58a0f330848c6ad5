/* model.c — parameters, activation plans and the submission of one training step as tasks. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "add.h"
#include "avgpool.h"
#include "batchnorm.h"
#include "bias.h"
#include "conv2d.h"
#include "dense.h"
#include "dist.h"
#include "dnn_codelet.h"
#include "grad_accum.h"
#include "imagefolder.h"
#include "load_batch.h"
#include "maxpool.h"
#include "relu.h"
#include "sgd.h"
#include "softmax_xent.h"

/* ---------------------------------------------------------------- RNG (splitmix64) */
static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) { return ((splitmix(s) >> 11) + 0.5) / 9007199254740992.0; }

/* ---------------------------------------------------------------- model */
static int add_param(dnn_model *m, const char *node, const char *what, long n, int no_decay)
{
	dnn_param *p = &m->params[m->nparams];
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s.%s", node, what);
	p->n = n;
	p->no_decay = no_decay;
	p->w = calloc((size_t)n, sizeof(float));
	p->v = calloc((size_t)n, sizeof(float));
	p->g = calloc((size_t)n, sizeof(float));
	if (!p->w || !p->v || !p->g) {
		fprintf(stderr, "error: out of memory allocating parameter %s (%ld floats)\n", p->name, n);
		exit(1);
	}
	return m->nparams++;
}

int dnn_model_create(dnn_model *m, dnn_graph *g, uint64_t seed)
{
	memset(m, 0, sizeof(*m));
	m->g = g;
	m->params = calloc((size_t)g->nnodes * 2, sizeof(dnn_param));
	m->param_of = malloc((size_t)g->nnodes * sizeof(int));
	m->running = calloc((size_t)g->nnodes, sizeof(float *));
	m->hrunning = calloc((size_t)g->nnodes, sizeof(starpu_data_handle_t));
	int C0 = g->nodes[0].C;
	m->in_mean = malloc((size_t)C0 * sizeof(float));
	m->in_std = malloc((size_t)C0 * sizeof(float));
	if (!m->params || !m->param_of || !m->running || !m->hrunning || !m->in_mean || !m->in_std) {
		fprintf(stderr, "error: out of memory creating the model\n");
		exit(1);
	}
	for (int c = 0; c < C0; c++)
		m->in_mean[c] = 0.0f, m->in_std[c] = 1.0f;
	uint64_t rng = seed * 0x2545f4914f6cdd1dull + 1;
	for (int i = 0; i < g->nnodes; i++) {
		dnn_node *nd = &g->nodes[i];
		const dnn_node *in = nd->ninputs ? &g->nodes[nd->inputs[0]] : NULL;
		m->param_of[i] = -1;
		if (nd->op == DNN_OP_CONV || nd->op == DNN_OP_DENSE) {
			long fan_in = nd->op == DNN_OP_CONV ? (long)in->C * nd->k * nd->k : (long)in->C * in->H * in->W;
			long nw = nd->op == DNN_OP_CONV ? (long)nd->out * fan_in : (long)nd->out * fan_in;
			int pw = add_param(m, nd->name, "weight", nw, 0);
			m->param_of[i] = pw;
			/* PyTorch's default for Conv2d/Linear (kaiming_uniform with a=sqrt(5)): weights and
			 * biases uniform in +-1/sqrt(fan_in). Same init as the side-by-side PyTorch nets. */
			float bound = 1.0f / sqrtf((float)fan_in);
			for (long j = 0; j < nw; j++)
				m->params[pw].w[j] = bound * (float)(2.0 * uniform01(&rng) - 1.0);
			if (nd->bias) {
				int pb = add_param(m, nd->name, "bias", nd->out, 1);
				for (long j = 0; j < nd->out; j++)
					m->params[pb].w[j] = bound * (float)(2.0 * uniform01(&rng) - 1.0);
			}
		} else if (nd->op == DNN_OP_BATCHNORM) {
			int pg = add_param(m, nd->name, "gamma", nd->C, 1);
			add_param(m, nd->name, "beta", nd->C, 1);
			m->param_of[i] = pg;
			for (int c = 0; c < nd->C; c++)
				m->params[pg].w[c] = 1.0f;
			m->running[i] = calloc(2 * (size_t)nd->C, sizeof(float));
			if (!m->running[i]) {
				fprintf(stderr, "error: out of memory\n");
				exit(1);
			}
			for (int c = 0; c < nd->C; c++)
				m->running[i][nd->C + c] = 1.0f; /* running var */
		}
	}
	for (int i = 0; i < m->nparams; i++) {
		dnn_param *p = &m->params[i];
		starpu_vector_data_register(&p->hw, STARPU_MAIN_RAM, (uintptr_t)p->w, (uint32_t)p->n, sizeof(float));
		starpu_vector_data_register(&p->hv, STARPU_MAIN_RAM, (uintptr_t)p->v, (uint32_t)p->n, sizeof(float));
		starpu_vector_data_register(&p->hg, STARPU_MAIN_RAM, (uintptr_t)p->g, (uint32_t)p->n, sizeof(float));
		starpu_data_set_name(p->hw, p->name);
		dnn_grad_set_redux(p->hg);
	}
	for (int i = 0; i < g->nnodes; i++)
		if (m->running[i])
			starpu_vector_data_register(&m->hrunning[i], STARPU_MAIN_RAM, (uintptr_t)m->running[i],
						    2 * (uint32_t)g->nodes[i].C, sizeof(float));
	m->registered = 1;
	return 0;
}

void dnn_model_sync_to_host(dnn_model *m)
{
	for (int i = 0; i < m->nparams; i++) {
		starpu_data_acquire(m->params[i].hw, STARPU_R);
		starpu_data_release(m->params[i].hw);
		starpu_data_acquire(m->params[i].hv, STARPU_R);
		starpu_data_release(m->params[i].hv);
	}
	for (int i = 0; i < m->g->nnodes; i++)
		if (m->hrunning[i]) {
			starpu_data_acquire(m->hrunning[i], STARPU_R);
			starpu_data_release(m->hrunning[i]);
		}
}

void dnn_model_destroy(dnn_model *m)
{
	dnn_dist_destroy(m);
	for (int i = 0; i < m->nparams; i++) {
		dnn_param *p = &m->params[i];
		if (m->registered) {
			starpu_data_unregister(p->hw);
			starpu_data_unregister(p->hv);
			starpu_data_unregister(p->hg);
		}
		free(p->w), free(p->v), free(p->g);
	}
	for (int i = 0; m->g && i < m->g->nnodes; i++) {
		if (m->hrunning[i] && m->registered)
			starpu_data_unregister(m->hrunning[i]);
		free(m->running[i]);
	}
	free(m->params), free(m->param_of), free(m->running), free(m->hrunning);
	free(m->in_mean), free(m->in_std);
	memset(m, 0, sizeof(*m));
}

/* ---------------------------------------------------------------- plan */
static starpu_data_handle_t lazy_vector(size_t n, size_t elemsize)
{
	/* Home node -1: StarPU allocates the buffer where a task first needs it (a GPU's memory for
	 * GPU-only activations), no host copy. */
	starpu_data_handle_t h;
	if (n > UINT32_MAX) {
		/* StarPU vectors hold at most 2^32 - 1 elements. */
		fprintf(stderr, "error: one chunk's activation has %zu elements (more than 2^32 - 1): use more --chunks "
				"or a smaller --batch\n", n);
		exit(1);
	}
	starpu_vector_data_register(&h, -1, 0, (uint32_t)n, elemsize);
	return h;
}

/* The fusions of a plan (model.h): p->bn_relu and p->grad_of. (The third, a conv's bias in
 * the conv's forward and backward-filter tasks, needs no plan: submit_* test p->fuse >= 2.)
 *
 * Residual-add gradients. The add's backward gives each input's gradient its own dy. An input
 * ik joins the add's gradient handle (its "class": the handle of the add at the root of a chain
 * of single-consumer adds) instead, with no task, when that is exact under StarPU's sequential
 * consistency (backward tasks are submitted in decreasing node index):
 *   - ik has only this add as consumer: its backward reads the handle, which nobody writes
 *     between the add's consumers and the last reader, provided no accumulating writer (below)
 *     of the class comes before it: ik > maxw;
 *   - or ik has other consumers W (at most one such input per class): they accumulate their part
 *     into the shared handle (ik's gradient = the add's + theirs). This is exact only when every
 *     other reader of the handle is submitted before them (max W < every other member's index,
 *     the adds' included), and ik reads it after them (automatic: W > ik).
 * A relu fused with its batchnorm joins only as the input with other consumers: the fused
 * backward (at the batchnorm's index, below the relu's) masks its dy in place (CUDA), after
 * every other reader of the handle then (they all come after W). Inputs listed twice by one
 * add, and the net's input (no gradient), keep the copy task. */
static void plan_fuse(dnn_plan *p)
{
	const dnn_graph *g = p->m->g;
	const int nn = g->nnodes;
	p->bn_relu = malloc((size_t)nn * sizeof(int));
	p->grad_of = malloc((size_t)nn * sizeof(int));
	int *minr = malloc((size_t)nn * sizeof(int)), *maxw = calloc((size_t)nn, sizeof(int));
	char *multi = calloc((size_t)nn, 1);
	if (!p->bn_relu || !p->grad_of || !minr || !maxw || !multi) {
		fprintf(stderr, "error: out of memory creating the activation plan\n");
		exit(1);
	}
	for (int i = 0; i < nn; i++)
		p->bn_relu[i] = -1, p->grad_of[i] = i, minr[i] = nn;
	p->fuse = dnn_fuse_level(); /* DNN_FUSE=0: off, for comparisons */
	for (int i = 1; p->fuse && i < nn; i++) {
		const int j = dnn_graph_bn_relu(g, i);
		if (j >= 0)
			p->bn_relu[i] = j, p->bn_relu[j] = i;
	}
	if (p->fuse && p->train)
		for (int a = nn - 2; a >= 1; a--) {
			const dnn_node *nd = &g->nodes[a];
			if (nd->op != DNN_OP_ADD)
				continue;
			const int r = p->grad_of[a];
			if (a < minr[r])
				minr[r] = a; /* the add's own copy tasks, if any, read the handle here */
			for (int pass = 0; pass < 2; pass++) /* single-consumer inputs first: they bound W */
				for (int k = 0; k < nd->ninputs; k++) {
					const int ik = nd->inputs[k];
					int twice = 0;
					for (int l = 0; l < nd->ninputs; l++)
						twice |= l != k && nd->inputs[l] == ik;
					if (ik == 0 || twice)
						continue;
					const int single = g->nodes[ik].nconsumers == 1;
					const int fused_relu = g->nodes[ik].op == DNN_OP_RELU && p->bn_relu[ik] >= 0;
					if (pass == 0 && single && !fused_relu && ik > maxw[r]) {
						p->grad_of[ik] = r;
						if (ik < minr[r])
							minr[r] = ik;
					} else if (pass == 1 && !single && !multi[r]) {
						int w_max = 0;
						for (int w = ik + 1; w < nn; w++)
							for (int l = 0; w != a && l < g->nodes[w].ninputs; l++)
								if (g->nodes[w].inputs[l] == ik && w > w_max)
									w_max = w;
						if (w_max < minr[r] && w_max < a) {
							p->grad_of[ik] = r;
							multi[r] = 1;
							maxw[r] = w_max;
						}
					}
				}
		}
	free(minr), free(maxw), free(multi);
}

int dnn_plan_create(dnn_plan *p, dnn_model *m, int batch, int nchunks, int nslots, int train)
{
	const dnn_graph *g = m->g;
	memset(p, 0, sizeof(*p));
	if (nchunks > batch)
		nchunks = batch;
	p->m = m, p->batch = batch, p->nchunks = nchunks, p->nslots = nslots, p->train = train;
	p->global_batch = batch;
	p->chunk_n = malloc((size_t)nchunks * sizeof(int));
	p->chunk_off = malloc((size_t)nchunks * sizeof(int));
	size_t nh = (size_t)g->nnodes * nchunks, ns = (size_t)nslots * nchunks;
	p->y = calloc(nh, sizeof(starpu_data_handle_t));
	p->dy = calloc(nh, sizeof(starpu_data_handle_t));
	p->saved = calloc(nh, sizeof(starpu_data_handle_t));
	p->x = calloc(ns, sizeof(starpu_data_handle_t));
	p->labels = calloc(ns, sizeof(starpu_data_handle_t));
	p->stats = calloc(ns, sizeof(starpu_data_handle_t));
	p->stats_host = calloc(ns * 2, sizeof(float));
	if (!p->chunk_n || !p->chunk_off || !p->y || !p->dy || !p->saved || !p->x || !p->labels || !p->stats ||
	    !p->stats_host) {
		fprintf(stderr, "error: out of memory creating the activation plan\n");
		exit(1);
	}
	for (int c = 0, off = 0; c < nchunks; c++) {
		p->chunk_n[c] = batch / nchunks + (c < batch % nchunks ? 1 : 0);
		p->chunk_off[c] = off;
		off += p->chunk_n[c];
	}
	plan_fuse(p);
	const int loss = g->nnodes - 1, logits = g->nodes[loss].inputs[0];
	for (int i = 1; i < loss; i++) {
		const dnn_node *nd = &g->nodes[i];
		size_t per = (size_t)nd->C * nd->H * nd->W;
		/* A batchnorm fused with its relu writes the relu's y and reads the relu's dy. */
		const int fused_bn = nd->op == DNN_OP_BATCHNORM && p->bn_relu[i] >= 0;
		for (int c = 0; c < nchunks; c++) {
			size_t n = per * (size_t)p->chunk_n[c];
			if (!fused_bn)
				p->y[i * nchunks + c] = lazy_vector(n, sizeof(float));
			if ((train && !fused_bn && p->grad_of[i] == i) || i == logits)
				p->dy[i * nchunks + c] = lazy_vector(n, sizeof(float));
			if (train && nd->op == DNN_OP_BATCHNORM)
				p->saved[i * nchunks + c] = lazy_vector(3 * (size_t)nd->C, sizeof(float));
		}
	}
	const dnn_node *in = &g->nodes[0];
	for (int s = 0; s < nslots; s++)
		for (int c = 0; c < nchunks; c++) {
			size_t k = (size_t)s * nchunks + c;
			p->x[k] = lazy_vector((size_t)in->C * in->H * in->W * p->chunk_n[c], sizeof(float));
			p->labels[k] = lazy_vector((size_t)p->chunk_n[c], sizeof(int32_t));
			starpu_vector_data_register(&p->stats[k], STARPU_MAIN_RAM, (uintptr_t)(p->stats_host + 2 * k), 2,
						    sizeof(float));
		}
	return 0;
}

int dnn_plan_create_sharded(dnn_plan *p, dnn_model *m, int global_batch, int nchunks, int nslots)
{
	if (!m->dist)
		return dnn_plan_create(p, m, global_batch, nchunks, nslots, 1);
	/* Rank r's shard: contiguous, nearly equal (the first B % N ranks get one more sample). */
	const int N = m->dist->nranks, r = m->dist->rank;
	int shard = global_batch / N + (r < global_batch % N ? 1 : 0), off = 0;
	for (int j = 0; j < r; j++)
		off += global_batch / N + (j < global_batch % N ? 1 : 0);
	STARPU_ASSERT_MSG(shard > 0, "global batch smaller than the number of ranks");
	dnn_plan_create(p, m, shard, nchunks, nslots, 1);
	p->global_batch = global_batch;
	p->batch_offset = off;
	p->distributed = 1;
	return 0;
}

void dnn_plan_destroy(dnn_plan *p)
{
	size_t nh = (size_t)p->m->g->nnodes * p->nchunks, ns = (size_t)p->nslots * p->nchunks;
	for (size_t i = 0; i < nh; i++) {
		if (p->y[i])
			starpu_data_unregister_no_coherency(p->y[i]);
		if (p->dy[i])
			starpu_data_unregister_no_coherency(p->dy[i]);
		if (p->saved[i])
			starpu_data_unregister_no_coherency(p->saved[i]);
	}
	for (size_t i = 0; i < ns; i++) {
		starpu_data_unregister_no_coherency(p->x[i]);
		starpu_data_unregister_no_coherency(p->labels[i]);
		starpu_data_unregister(p->stats[i]);
	}
	free(p->chunk_n), free(p->chunk_off), free(p->y), free(p->dy), free(p->saved);
	free(p->bn_relu), free(p->grad_of);
	free(p->x), free(p->labels), free(p->stats), free(p->stats_host);
	memset(p, 0, sizeof(*p));
}

/* ---------------------------------------------------------------- submission */
#define Y(i, c) (p->y[(i) * p->nchunks + (c)])
#define DY(i, c) (p->dy[p->grad_of[i] * p->nchunks + (c)])
/* Count the tasks of a step (dnn_plan.tasks_per_step). */
#define TASK(call)                   \
	do {                         \
		call;                \
		p->tasks_per_step++; \
	} while (0)

/* Output handle of node i for chunk c in the given slot (the input node's is the slot's x). */
static starpu_data_handle_t out_handle(dnn_plan *p, int slot, int i, int c)
{
	return i == 0 ? p->x[slot * p->nchunks + c] : Y(i, c);
}

static void submit_forward(dnn_plan *p, int slot, int c)
{
	dnn_model *m = p->m;
	const dnn_graph *g = m->g;
	const int n = p->chunk_n[c];
	for (int i = 1; i < g->nnodes; i++) {
		const dnn_node *nd = &g->nodes[i];
		const dnn_node *in = &g->nodes[nd->inputs[0]];
		starpu_data_handle_t x = out_handle(p, slot, nd->inputs[0], c), y = Y(i, c);
		const int pi = m->param_of[i];
		switch (nd->op) {
		case DNN_OP_CONV: {
			dnn_conv2d_args a = {.N = n, .C = in->C, .H = in->H, .W = in->W, .K = nd->out, .R = nd->k,
					     .S = nd->k, .stride = nd->stride, .pad = nd->pad, .dilation = nd->dilation};
			dnn_conv2d_args_finish(&a);
			if (nd->bias && p->fuse >= 2) { /* conv + bias in one task */
				a.bias = 1;
				TASK(dnn_insert_conv2d_bias_fwd(&a, x, m->params[pi].hw, m->params[pi + 1].hw, y));
				break;
			}
			TASK(dnn_insert_conv2d_fwd(&a, x, m->params[pi].hw, y));
			if (nd->bias) {
				dnn_bias_args b = {.N = n, .C = nd->out, .HW = nd->H * nd->W};
				TASK(dnn_insert_bias_fwd(&b, y, m->params[pi + 1].hw));
			}
			break;
		}
		case DNN_OP_DENSE: {
			dnn_dense_args a = {.N = n, .IN = in->C * in->H * in->W, .OUT = nd->out};
			TASK(dnn_insert_dense_fwd(&a, x, m->params[pi].hw, m->params[pi + 1].hw, y));
			break;
		}
		case DNN_OP_RELU: {
			if (p->bn_relu[i] >= 0)
				break; /* done by its batchnorm's fused task */
			dnn_relu_args a = {.n = (long)n * nd->C * nd->H * nd->W};
			TASK(dnn_insert_relu_fwd(&a, x, y));
			break;
		}
		case DNN_OP_MAXPOOL: {
			dnn_maxpool_args a = {.N = n, .C = in->C, .H = in->H, .W = in->W, .k = nd->k, .stride = nd->stride,
					      .pad = nd->pad};
			dnn_maxpool_args_finish(&a);
			TASK(dnn_insert_maxpool_fwd(&a, x, y));
			break;
		}
		case DNN_OP_AVGPOOL: {
			dnn_avgpool_args a = {.N = n, .C = in->C, .HW = in->H * in->W};
			TASK(dnn_insert_avgpool_fwd(&a, x, y));
			break;
		}
		case DNN_OP_BATCHNORM: {
			dnn_batchnorm_args a = {.N = n, .C = nd->C, .HW = nd->H * nd->W, .eps = nd->eps,
						.momentum = nd->momentum, .relu = p->bn_relu[i] >= 0};
			if (a.relu)
				y = Y(p->bn_relu[i], c); /* fused: straight into the relu's output */
			if (p->train) {
				starpu_data_handle_t saved = p->saved[i * p->nchunks + c];
				TASK(dnn_insert_batchnorm_fwd_train(&a, x, m->params[pi].hw, m->params[pi + 1].hw, y, saved));
				/* Running statistics follow chunk 0, as a DDP replica's follow its own shard. */
				if (c == 0)
					TASK(dnn_insert_batchnorm_running(&a, saved, m->hrunning[i]));
			} else {
				TASK(dnn_insert_batchnorm_fwd_eval(&a, x, m->params[pi].hw, m->params[pi + 1].hw,
							      m->hrunning[i], y));
			}
			break;
		}
		case DNN_OP_ADD: {
			dnn_add_args a = {.n = (long)n * nd->C * nd->H * nd->W};
			TASK(dnn_insert_add_fwd(&a, x, out_handle(p, slot, nd->inputs[1], c), y));
			for (int k = 2; k < nd->ninputs; k++)
				TASK(dnn_insert_grad_accum(y, STARPU_RW, out_handle(p, slot, nd->inputs[k], c)));
			break;
		}
		case DNN_OP_SOFTMAX_XENT: {
			dnn_softmax_xent_args a = {.N = n, .CLS = g->classes};
			size_t k = (size_t)slot * p->nchunks + c;
			TASK(dnn_insert_softmax_xent(&a, x, p->labels[k], DY(nd->inputs[0], c), p->stats[k]));
			break;
		}
		case DNN_OP_INPUT:
		case DNN_OP_COUNT:
			break;
		}
	}
}

static void submit_backward(dnn_plan *p, int slot, int c, char *written)
{
	dnn_model *m = p->m;
	const dnn_graph *g = m->g;
	const int n = p->chunk_n[c];
	memset(written, 0, (size_t)g->nnodes);
	for (int i = g->nnodes - 1; i >= 1; i--) {
		const dnn_node *nd = &g->nodes[i];
		const int i0 = nd->inputs[0];
		const dnn_node *in = &g->nodes[i0];
		starpu_data_handle_t x = out_handle(p, slot, i0, c), y = Y(i, c), dy = DY(i, c);
		const int pi = m->param_of[i];
		/* Gradient into input 0: overwrite for its first contributor, accumulate after. */
		const int acc0 = written[i0];
		const int need_dx = i0 != 0;
		switch (nd->op) {
		case DNN_OP_SOFTMAX_XENT:
			break; /* dlogits was written by the forward task */
		case DNN_OP_CONV: {
			dnn_conv2d_args a = {.N = n, .C = in->C, .H = in->H, .W = in->W, .K = nd->out, .R = nd->k,
					     .S = nd->k, .stride = nd->stride, .pad = nd->pad, .dilation = nd->dilation,
					     .accumulate_dx = acc0};
			dnn_conv2d_args_finish(&a);
			if (nd->bias && p->fuse >= 2) { /* the bias gradient in the filter gradient's task */
				dnn_conv2d_args ab = a;
				ab.bias = 1;
				TASK(dnn_insert_conv2d_bias_bwd_filter(&ab, x, dy, m->params[pi].hg, m->params[pi + 1].hg,
								       STARPU_REDUX));
			} else {
				if (nd->bias) {
					dnn_bias_args b = {.N = n, .C = nd->out, .HW = nd->H * nd->W};
					TASK(dnn_insert_bias_bwd(&b, dy, m->params[pi + 1].hg, STARPU_REDUX));
				}
				TASK(dnn_insert_conv2d_bwd_filter(&a, x, dy, m->params[pi].hg, STARPU_REDUX));
			}
			if (need_dx)
				TASK(dnn_insert_conv2d_bwd_data(&a, dy, m->params[pi].hw, DY(i0, c)));
			break;
		}
		case DNN_OP_DENSE: {
			dnn_dense_args a = {.N = n, .IN = in->C * in->H * in->W, .OUT = nd->out, .accumulate_dx = acc0};
			TASK(dnn_insert_dense_bwd_weight(&a, x, dy, m->params[pi].hg, m->params[pi + 1].hg, STARPU_REDUX));
			if (need_dx)
				TASK(dnn_insert_dense_bwd_data(&a, dy, m->params[pi].hw, DY(i0, c)));
			break;
		}
		case DNN_OP_RELU:
			if (need_dx && p->bn_relu[i] < 0) { /* else: in its batchnorm's fused backward */
				dnn_relu_args a = {.n = (long)n * nd->C * nd->H * nd->W, .accumulate_dx = acc0};
				TASK(dnn_insert_relu_bwd(&a, y, dy, DY(i0, c)));
			}
			break;
		case DNN_OP_MAXPOOL:
			if (need_dx) {
				dnn_maxpool_args a = {.N = n, .C = in->C, .H = in->H, .W = in->W, .k = nd->k,
						      .stride = nd->stride, .pad = nd->pad, .accumulate_dx = acc0};
				dnn_maxpool_args_finish(&a);
				TASK(dnn_insert_maxpool_bwd(&a, x, y, dy, DY(i0, c)));
			}
			break;
		case DNN_OP_AVGPOOL:
			if (need_dx) {
				dnn_avgpool_args a = {.N = n, .C = in->C, .HW = in->H * in->W, .accumulate_dx = acc0};
				TASK(dnn_insert_avgpool_bwd(&a, dy, DY(i0, c)));
			}
			break;
		case DNN_OP_BATCHNORM: {
			/* BN on the raw input still needs its dgamma/dbeta; dx then goes to a scratch-free
			 * path: the input node has no gradient handle, so we require a real producer. */
			dnn_batchnorm_args a = {.N = n, .C = nd->C, .HW = nd->H * nd->W, .eps = nd->eps,
						.momentum = nd->momentum, .accumulate_dx = acc0};
			STARPU_ASSERT_MSG(need_dx, "batchnorm directly on the input is not supported");
			const int j = p->bn_relu[i];
			if (j >= 0) {
				a.relu = 1;
				TASK(dnn_insert_batchnorm_relu_bwd(&a, x, m->params[pi].hw, p->saved[i * p->nchunks + c],
								   DY(j, c), Y(j, c), DY(i0, c), m->params[pi].hg,
								   m->params[pi + 1].hg, STARPU_REDUX));
			} else {
				TASK(dnn_insert_batchnorm_bwd(&a, x, m->params[pi].hw, p->saved[i * p->nchunks + c], dy,
							      DY(i0, c), m->params[pi].hg, m->params[pi + 1].hg,
							      STARPU_REDUX));
			}
			break;
		}
		case DNN_OP_ADD:
			for (int k = 0; k < nd->ninputs; k++) {
				int ik = nd->inputs[k];
				if (ik == 0)
					continue;
				if (p->grad_of[ik] == p->grad_of[i]) {
					/* Its gradient is this add's, in the same handle (plan_fuse): no task. */
					STARPU_ASSERT(!written[ik]);
					written[ik] = 1;
					continue;
				}
				dnn_add_args a = {.n = (long)n * nd->C * nd->H * nd->W, .accumulate_dx = written[ik]};
				TASK(dnn_insert_add_bwd(&a, dy, DY(ik, c)));
				written[ik] = 1;
			}
			break;
		case DNN_OP_INPUT:
		case DNN_OP_COUNT:
			break;
		}
		if (nd->op != DNN_OP_ADD)
			written[i0] = 1;
	}
}

void dnn_submit_step(dnn_plan *p, int slot, const dnn_dataset *ds, const int *idx, const dnn_sgd_config *sgd)
{
	dnn_model *m = p->m;
	const dnn_node *in = &m->g->nodes[0];
	const long step = p->steps_submitted++;
	idx += p->batch_offset; /* this rank's shard of the global batch */
	p->tasks_per_step = 0;
	for (int c = 0; c < p->nchunks; c++) {
		size_t k = (size_t)slot * p->nchunks + c;
		if (ds->folder) /* image files: decoded, resized, cropped (random when training) in the task */
			TASK(dnn_imagefolder_insert_load(ds, idx + p->chunk_off[c], p->chunk_n[c], p->train, step, m->in_mean,
						    m->in_std, p->x[k], p->labels[k]));
		else
			TASK(dnn_insert_load_batch(ds->images, ds->labels, m->in_mean, m->in_std, in->C, in->H * in->W,
					      idx + p->chunk_off[c], p->chunk_n[c], p->x[k], p->labels[k]));
	}
	if (p->distributed)
		dnn_dist_before_forward(p, step);
	for (int c = 0; c < p->nchunks; c++)
		submit_forward(p, slot, c);
	if (p->distributed)
		dnn_dist_reduce_stats(p, slot);
	if (!p->train)
		return;
	char *written = malloc((size_t)m->g->nnodes);
	STARPU_ASSERT(written);
	for (int c = 0; c < p->nchunks; c++)
		submit_backward(p, slot, c, written);
	free(written);
	if (p->distributed) {
		dnn_dist_after_backward(p, slot, step, sgd);
		return;
	}
	for (int i = 0; i < m->nparams; i++) {
		dnn_param *pr = &m->params[i];
		dnn_sgd_args a = {.n = pr->n, .lr = sgd->lr, .momentum = sgd->momentum,
				  .weight_decay = pr->no_decay ? 0.0f : sgd->weight_decay,
				  .scale = 1.0f / (float)p->global_batch};
		TASK(dnn_insert_sgd_update(&a, pr->hw, pr->hv, pr->hg));
	}
}

void dnn_wait_step(dnn_plan *p, int slot, double *loss_sum, double *correct)
{
	*loss_sum = 0, *correct = 0;
	if (p->distributed) {
		float *host;
		starpu_data_handle_t h = dnn_dist_stats_handle(p, slot, &host);
		starpu_data_acquire(h, STARPU_R);
		*loss_sum = host[0], *correct = host[1];
		starpu_data_release(h);
		return;
	}
	for (int c = 0; c < p->nchunks; c++) {
		size_t k = (size_t)slot * p->nchunks + c;
		starpu_data_acquire(p->stats[k], STARPU_R);
		*loss_sum += p->stats_host[2 * k];
		*correct += p->stats_host[2 * k + 1];
		starpu_data_release(p->stats[k]);
	}
}
