/* model.c — parameters, activation plans and the submission of one training step as tasks.
 * What each node submits is its op descriptor's (op.h, graph/ops/); this file owns the handles
 * and walks the nodes: forward in topological order, backward in reverse, then the update. */
#include "model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bnstats.h"
#include "chunksum.h"
#include "dist.h"
#include "dnn_codelet.h"
#include "dnn_rng.h"
#include "errline.h"
#include "fuse.h"
#include "gradclip.h"
#include "vec.h"
#include "op.h"
#include "optim.h"

/* ---------------------------------------------------------------- model */
#ifdef DNN_SIMGRID
#include <smpi/smpi.h>
/* In simulation no kernel reads a parameter, and SMPI holds every rank in one process: a big
 * parameter's three host arrays are SMPI shared memory (one folded block for all ranks, so 16
 * ResNet-50 ranks need no 16 x 300 MB), left uninitialised (op.c skips the random init). */
static float *param_alloc(long n)
{
	return n >= DNN_SIM_SHARED_PARAM_MIN ? SMPI_SHARED_MALLOC((size_t)n * sizeof(float)) : calloc((size_t)n, sizeof(float));
}
static void param_free(float *a, long n)
{
	if (a && n >= DNN_SIM_SHARED_PARAM_MIN)
		SMPI_SHARED_FREE(a);
	else
		free(a);
}
#else
static float *param_alloc(long n)
{
	return calloc((size_t)n, sizeof(float));
}
static void param_free(float *a, long n)
{
	(void)n;
	free(a);
}
#endif

/* The contract of op.h param_slots: node's next slot is `slot`, and node's tensors are consecutive. */
static int check_slot(const dnn_model *m, int node, int slot, char *err, size_t errlen)
{
	const dnn_node *nd = &m->g->nodes[node];
	const dnn_op_desc *d = dnn_op_get(nd->op);
	const int have = m->param_of[node] < 0 ? 0 : m->nparams - m->param_of[node];
	if (slot < 0 || slot >= d->nparam_slots) {
		dnn_set_err(err, errlen, m->g->source, "node %s: op %s has %d parameter tensor(s), no tensor %d", nd->name,
			    d->name, d->nparam_slots, slot);
		return -1;
	}
	const char *what = d->param_slots[slot].name;
	if (have > 0 && m->params[m->nparams - 1].node != node) {
		dnn_set_err(err, errlen, m->g->source,
			    "node %s: op %s adds its parameter '%s' after another node's (a node's tensors are consecutive)",
			    nd->name, d->name, what);
		return -1;
	}
	if (slot != have) {
		dnn_set_err(err, errlen, m->g->source,
			    "node %s: op %s adds its parameter '%s' (tensor %d) when it has %d: slots go in order, once each",
			    nd->name, d->name, what, slot, have);
		return -1;
	}
	if (m->nparams >= m->params_cap) { /* not reachable after the checks above */
		dnn_set_err(err, errlen, m->g->source, "node %s: no room for parameter '%s' (%d tensors)", nd->name, what,
			    m->params_cap);
		return -1;
	}
	return 0;
}

int dnn_model_add_param(dnn_model *m, int node, int slot, long n, char *err, size_t errlen)
{
	if (check_slot(m, node, slot, err, errlen) != 0)
		return -1;
	const dnn_op_param_slot *s = &dnn_op_get(m->g->nodes[node].op)->param_slots[slot];
	dnn_param *p = &m->params[m->nparams];
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s.%s", m->g->nodes[node].name, s->name);
	p->n = n;
	p->no_decay = s->no_decay;
	p->node = node, p->slot = slot;
	p->w = param_alloc(n);
	p->v = param_alloc(n);
	p->g = param_alloc(n);
	m->nparams++; /* counted even when incomplete: dnn_model_destroy frees what there is */
	if (!p->w || !p->v || !p->g) {
		dnn_set_err(err, errlen, m->g->source, "out of memory allocating parameter %s (%ld floats)", p->name, n);
		return -1;
	}
	if (m->param_of[node] < 0)
		m->param_of[node] = m->nparams - 1;
	return m->nparams - 1;
}

float *dnn_model_add_running(dnn_model *m, int node, char *err, size_t errlen)
{
	const dnn_node *nd = &m->g->nodes[node];
	const dnn_op_desc *d = dnn_op_get(nd->op);
	if (d->nrunning_blocks <= 0 || m->running[node]) {
		dnn_set_err(err, errlen, m->g->source, "node %s: op %s declares no running statistics%s", nd->name, d->name,
			    m->running[node] ? " beyond the ones it has" : "");
		return NULL;
	}
	size_t n = (size_t)d->nrunning_blocks * (size_t)nd->C;
	m->running[node] = calloc(n, sizeof(float));
	m->running_n[node] = n;
	if (!m->running[node])
		dnn_set_err(err, errlen, m->g->source, "out of memory allocating the running statistics of %s", nd->name);
	return m->running[node];
}

dnn_optim_args dnn_param_optim_args(const dnn_param *pr, const dnn_optim_config *optim, int global_batch, int decay_share)
{
	const double t = optim->t > 0 ? (double)optim->t : 1.0;
	return (dnn_optim_args){.n = pr->n, .lr = optim->lr, .momentum = optim->momentum,
			      .weight_decay = pr->no_decay ? 0.0f : optim->weight_decay / (float)decay_share,
			      .scale = 1.0f / (float)global_batch, .optimizer = (int)optim->optimizer,
			      .layerwise = !pr->no_decay, .beta1 = optim->beta1, .beta2 = optim->beta2, .eps = optim->eps,
			      .trust = optim->trust, .bc1 = (float)(1.0 - pow((double)optim->beta1, t)),
			      .bc2 = (float)(1.0 - pow((double)optim->beta2, t))};
}

long dnn_param_state_n(const dnn_model *m, const dnn_param *pr)
{
	return pr->n * dnn_optimizer_state_mult(m->optimizer);
}

int dnn_model_set_optimizer(dnn_model *m, dnn_optimizer opt, char *err, size_t errlen)
{
	if (!dnn_optimizer_name(opt)) {
		dnn_set_err(err, errlen, m->g->source, "unknown optimizer %d", (int)opt);
		return -1;
	}
	m->optimizer_set = 1;
	if (dnn_optimizer_state_mult(opt) == dnn_optimizer_state_mult(m->optimizer)) {
		m->optimizer = opt;
		return 0;
	}
	for (int i = 0; i < m->nparams; i++) { /* a state of another size: new zeroed buffers */
		dnn_param *p = &m->params[i];
		float *v = param_alloc(p->n * dnn_optimizer_state_mult(opt));
		if (!v) {
			dnn_set_err(err, errlen, m->g->source, "out of memory allocating the %s state of %s",
				    dnn_optimizer_name(opt), p->name);
			return -1;
		}
		starpu_data_unregister(p->hv);
		param_free(p->v, dnn_param_state_n(m, p));
		p->v = v;
		starpu_vector_data_register(&p->hv, STARPU_MAIN_RAM, (uintptr_t)v,
					    (uint32_t)(p->n * dnn_optimizer_state_mult(opt)), sizeof(float));
	}
	m->optimizer = opt;
	return 0;
}

int dnn_model_create(dnn_model *m, dnn_graph *g, uint64_t seed, char *err, size_t errlen)
{
	memset(m, 0, sizeof(*m));
	m->g = g;
	m->seed = seed;
	for (int i = 0; i < g->nnodes; i++) /* the tensors each op may add (op.h param_slots) */
		m->params_cap += dnn_op_get(g->nodes[i].op)->nparam_slots;
	m->params = calloc((size_t)(m->params_cap > 0 ? m->params_cap : 1), sizeof(dnn_param));
	m->param_of = malloc((size_t)g->nnodes * sizeof(int));
	m->running = calloc((size_t)g->nnodes, sizeof(float *));
	m->running_n = calloc((size_t)g->nnodes, sizeof(size_t));
	m->hrunning = calloc((size_t)g->nnodes, sizeof(starpu_data_handle_t));
	int C0 = g->nodes[0].C;
	m->in_mean = malloc((size_t)C0 * sizeof(float));
	m->in_std = malloc((size_t)C0 * sizeof(float));
	if (!m->params || !m->param_of || !m->running || !m->running_n || !m->hrunning || !m->in_mean || !m->in_std) {
		dnn_set_err(err, errlen, g->source, "out of memory creating the model");
		dnn_model_destroy(m);
		return -1;
	}
	for (int c = 0; c < C0; c++)
		m->in_mean[c] = 0.0f, m->in_std[c] = 1.0f;
	uint64_t rng = seed * 0x2545f4914f6cdd1dull + 1;
	for (int i = 0; i < g->nnodes; i++)
		m->param_of[i] = -1;
	for (int i = 0; i < g->nnodes; i++) {
		const dnn_op_desc *d = dnn_op_get(g->nodes[i].op);
		if (d->create_params && d->create_params(m, i, &rng, err, errlen) != 0) {
			dnn_model_destroy(m);
			return -1;
		}
	}
	for (int i = 0; i < m->nparams; i++) {
		dnn_param *p = &m->params[i];
		starpu_vector_data_register(&p->hw, STARPU_MAIN_RAM, (uintptr_t)p->w, (uint32_t)p->n, sizeof(float));
		starpu_vector_data_register(&p->hv, STARPU_MAIN_RAM, (uintptr_t)p->v, (uint32_t)p->n, sizeof(float));
		starpu_vector_data_register(&p->hg, STARPU_MAIN_RAM, (uintptr_t)p->g, (uint32_t)p->n, sizeof(float));
		starpu_data_set_name(p->hw, p->name);
		dnn_vec_set_sum_redux(p->hg);
	}
	for (int i = 0; i < g->nnodes; i++)
		if (m->running[i])
			starpu_vector_data_register(&m->hrunning[i], STARPU_MAIN_RAM, (uintptr_t)m->running[i],
						    (uint32_t)m->running_n[i], sizeof(float));
	m->registered = 1;
	return 0;
}

/* Acquire-and-release: waits for the tasks that write h, and brings it home. */
static int fetch_home(starpu_data_handle_t h, const char *what, char *err, size_t errlen)
{
	int rc = starpu_data_acquire(h, STARPU_R);
	if (rc != 0) {
		dnn_set_err(err, errlen, what, "starpu_data_acquire failed: %s", strerror(-rc));
		return -1;
	}
	starpu_data_release(h);
	return 0;
}

int dnn_model_sync_to_host(dnn_model *m, char *err, size_t errlen)
{
	for (int i = 0; i < m->nparams; i++)
		if (fetch_home(m->params[i].hw, m->params[i].name, err, errlen) != 0 ||
		    fetch_home(m->params[i].hv, m->params[i].name, err, errlen) != 0)
			return -1;
	for (int i = 0; i < m->g->nnodes; i++)
		if (m->hrunning[i] && fetch_home(m->hrunning[i], m->g->nodes[i].name, err, errlen) != 0)
			return -1;
	return 0;
}

size_t dnn_model_grad_bytes(const dnn_model *m)
{
	size_t bytes = 0;
	for (int i = 0; i < m->nparams; i++)
		bytes += (size_t)m->params[i].n * sizeof(float);
	return bytes;
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
		param_free(p->w, p->n), param_free(p->v, dnn_param_state_n(m, p)), param_free(p->g, p->n);
	}
	for (int i = 0; m->g && m->running && i < m->g->nnodes; i++) {
		if (m->hrunning && m->hrunning[i] && m->registered)
			starpu_data_unregister(m->hrunning[i]);
		free(m->running[i]);
	}
	free(m->params), free(m->param_of), free(m->running), free(m->running_n), free(m->hrunning);
	free(m->in_mean), free(m->in_std);
	memset(m, 0, sizeof(*m));
}

/* ---------------------------------------------------------------- plan */
/* A vector with home node -1: StarPU allocates the buffer where a task first needs it (a GPU's
 * memory for GPU-only activations), no host copy. NULL (and err) when it is too large. */
static starpu_data_handle_t lazy_vector(size_t n, size_t elemsize, char *err, size_t errlen)
{
	starpu_data_handle_t h;
	if (n > UINT32_MAX) { /* StarPU vectors hold at most 2^32 - 1 elements */
		snprintf(err, errlen, "one chunk's activation has %zu elements (more than 2^32 - 1): use more --chunks "
				      "or a smaller --batch", n);
		return NULL;
	}
	starpu_vector_data_register(&h, -1, 0, (uint32_t)n, elemsize);
	return h;
}

/* Register the handles of node i for every chunk: its output y (not for a batchnorm fused with
 * its relu: it writes the relu's; nor for a relu fused into its maxpool), its gradient dy (training, unless it shares an add's), and
 * the op's saved buffer (training). */
static int plan_node_handles(dnn_plan *p, int i, char *err, size_t errlen)
{
	const dnn_graph *g = p->m->g;
	const dnn_node *nd = &g->nodes[i];
	const dnn_op_desc *d = dnn_op_get(nd->op);
	const int logits = g->nodes[g->nnodes - 1].inputs[0];
	/* a batchnorm fused with its relu, or a relu fused into its maxpool: no handles of its own */
	const int fused_bn = (nd->op == DNN_OP_BATCHNORM && dnn_fuse_bn_relu_partner(p, i) >= 0) ||
			     (nd->op == DNN_OP_RELU && dnn_fuse_relu_pool_partner(p, i) >= 0);
	const size_t per = (size_t)nd->C * nd->H * nd->W, saved0 = d->saved_floats ? d->saved_floats(nd) : 0,
		     saved_per = d->saved_floats_per_sample ? d->saved_floats_per_sample(nd) : 0;
	for (int c = 0; c < p->nchunks; c++) {
		const size_t n = per * (size_t)p->chunk_n[c], k = (size_t)i * p->nchunks + c;
		const size_t saved = saved0 + saved_per * (size_t)p->chunk_n[c];
		if (!fused_bn && !(p->y[k] = lazy_vector(n, p->y_bf16[i] ? sizeof(uint16_t) : sizeof(float), err, errlen)))
			return -1;
		if (((p->train && !fused_bn && p->grad_of[i] == i) || i == logits) &&
		    !(p->dy[k] = lazy_vector(n, sizeof(float), err, errlen)))
			return -1;
		if (p->train && saved && !(p->saved[k] = lazy_vector(saved, sizeof(float), err, errlen)))
			return -1;
	}
	return 0;
}

/* bf16 activation storage (model.h y_bf16): node i's y in bf16 when its writer and every reader
 * take it so. Not with CUDA workers: the CUDA kernels read and write fp32 activations only. */
static int plan_bf16_storage(dnn_plan *p)
{
	const dnn_graph *g = p->m->g;
	if (!(p->y_bf16 = calloc((size_t)g->nnodes, 1)))
		return -1;
	if (!p->cfg.bf16 || !p->cfg.bf16_act || starpu_cuda_worker_get_count() > 0)
		return 0;
	const int logits = g->nodes[g->nnodes - 1].inputs[0];
	for (int i = 1; i < g->nnodes - 1; i++) {
		const dnn_op_desc *d = dnn_op_get(g->nodes[i].op);
		int ok = i != logits && d->bf16_out && d->bf16_out(p, i);
		for (int k = i + 1; ok && k < g->nnodes; k++)
			for (int j = 0; ok && j < g->nodes[k].ninputs; j++)
				if (g->nodes[k].inputs[j] == i) {
					const dnn_op_desc *dk = dnn_op_get(g->nodes[k].op);
					ok = dk->bf16_in && dk->bf16_in(p, k, i);
				}
		p->y_bf16[i] = (unsigned char)ok;
	}
	return 0;
}

int dnn_plan_create(dnn_plan *p, dnn_model *m, int batch, int nchunks, int nslots, int train,
		    const dnn_exec_config *cfg, char *err, size_t errlen)
{
	const dnn_graph *g = m->g;
	static const dnn_exec_config defaults = DNN_EXEC_CONFIG_DEFAULTS;
	memset(p, 0, sizeof(*p));
	p->cfg = cfg ? *cfg : defaults;
	if (batch < 1 || nchunks < 1) {
		snprintf(err, errlen, "a plan needs a batch and chunks of at least 1 (got %d in %d)", batch, nchunks);
		return -1;
	}
	if (nchunks > batch)
		nchunks = batch;
	/* The ops' limits on one chunk (cuDNN's int sizes), for the largest chunk, before anything
	 * is allocated or registered. */
	const int max_chunk = batch / nchunks + (batch % nchunks ? 1 : 0);
	for (int i = 1; i < g->nnodes; i++) {
		const dnn_op_desc *d = dnn_op_get(g->nodes[i].op);
		if (d->check_chunk && d->check_chunk(g, &g->nodes[i], max_chunk, err, errlen) != 0)
			return -1;
	}
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
	p->written = malloc((size_t)g->nnodes * nchunks); /* per chunk: layer-major backward (bn_global) */
	if (!p->chunk_n || !p->chunk_off || !p->y || !p->dy || !p->saved || !p->x || !p->labels || !p->stats ||
	    !p->stats_host || !p->written) {
		dnn_set_err(err, errlen, g->source, "out of memory creating the activation plan");
		goto fail;
	}
	for (int c = 0, off = 0; c < nchunks; c++) {
		p->chunk_n[c] = batch / nchunks + (c < batch % nchunks ? 1 : 0);
		p->chunk_off[c] = off;
		off += p->chunk_n[c];
	}
	if (dnn_fuse_plan(p, err, errlen) != 0)
		goto fail;
	if (plan_bf16_storage(p) != 0) {
		dnn_set_err(err, errlen, g->source, "out of memory creating the activation plan");
		goto fail;
	}
	for (int i = 1; i < g->nnodes - 1; i++)
		if (plan_node_handles(p, i, err, errlen) != 0)
			goto fail;
	if (dnn_chunksum_plan_register(p, err, errlen) != 0) /* fixed-order sums by default */
		goto fail;
	if (dnn_clip_plan_register(p, err, errlen) != 0)
		goto fail;
	const dnn_node *in = &g->nodes[0];
	const size_t label_len = g->label_len > 0 ? (size_t)g->label_len : 1; /* T labels per sample: per-token loss */
	for (int s = 0; s < nslots; s++)
		for (int c = 0; c < nchunks; c++) {
			size_t k = (size_t)s * nchunks + c;
			if (!(p->x[k] = lazy_vector((size_t)in->C * in->H * in->W * p->chunk_n[c], sizeof(float), err, errlen)) ||
			    !(p->labels[k] = lazy_vector((size_t)p->chunk_n[c] * label_len, sizeof(int32_t), err, errlen)))
				goto fail;
			starpu_vector_data_register(&p->stats[k], STARPU_MAIN_RAM, (uintptr_t)(p->stats_host + 2 * k), 2,
						    sizeof(float));
		}
	return 0;
fail:
	dnn_plan_destroy(p);
	return -1;
}

int dnn_plan_create_sharded(dnn_plan *p, dnn_model *m, int global_batch, int nchunks, int nslots,
			    const dnn_exec_config *cfg, char *err, size_t errlen)
{
	if (!m->dist)
		return dnn_plan_create(p, m, global_batch, nchunks, nslots, 1, cfg, err, errlen);
	/* Rank r's shard: contiguous, nearly equal (the first B % N ranks get one more sample). */
	const int N = dnn_dist_nranks(m->dist), r = dnn_dist_rank(m->dist);
	int shard = global_batch / N + (r < global_batch % N ? 1 : 0), off = 0;
	for (int j = 0; j < r; j++)
		off += global_batch / N + (j < global_batch % N ? 1 : 0);
	if (shard <= 0) {
		snprintf(err, errlen, "--batch %d is smaller than the number of ranks (%d)", global_batch, N);
		return -1;
	}
	if (dnn_plan_create(p, m, shard, nchunks, nslots, 1, cfg, err, errlen) != 0)
		return -1;
	p->global_batch = global_batch;
	p->batch_offset = off;
	p->distributed = 1;
	return 0;
}

double dnn_plan_cuda_scratch_bytes(const dnn_plan *p, int n)
{
	size_t most = 0;
	for (int i = 1; i < p->m->g->nnodes; i++) {
		const dnn_op_desc *d = dnn_op_get(p->m->g->nodes[i].op);
		const size_t b = d->cuda_scratch_bytes ? d->cuda_scratch_bytes(p, i, n) : 0;
		most = b > most ? b : most;
	}
	return most ? (double)dnn_cuda_scratch_alloc_bytes(most) : 0;
}

void dnn_plan_destroy(dnn_plan *p)
{
	if (!p->m)
		return;
	size_t nh = (size_t)p->m->g->nnodes * p->nchunks, ns = (size_t)p->nslots * p->nchunks;
	for (size_t i = 0; i < nh && p->y && p->dy && p->saved; i++) {
		if (p->y[i])
			starpu_data_unregister_no_coherency(p->y[i]);
		if (p->dy[i])
			starpu_data_unregister_no_coherency(p->dy[i]);
		if (p->saved[i])
			starpu_data_unregister_no_coherency(p->saved[i]);
	}
	for (size_t i = 0; i < ns && p->x && p->labels && p->stats; i++) {
		if (p->x[i])
			starpu_data_unregister_no_coherency(p->x[i]);
		if (p->labels[i])
			starpu_data_unregister_no_coherency(p->labels[i]);
		if (p->stats[i])
			starpu_data_unregister(p->stats[i]);
	}
	dnn_chunksum_plan_free(p);
	dnn_clip_plan_free(p);
	free(p->chunk_n), free(p->chunk_off), free(p->chunk_worker), free(p->y), free(p->dy), free(p->saved);
	dnn_plan_bn_destroy(p);
	free(p->bn_relu), free(p->relu_pool), free(p->grad_of), free(p->written), free(p->y_bf16);
	free(p->bn_stats_conv), free(p->bn_apply_conv);
	free(p->x), free(p->labels), free(p->stats), free(p->stats_host);
	memset(p, 0, sizeof(*p));
}

/* ---------------------------------------------------------------- submission */
static int submit_forward(dnn_op_ctx *ctx)
{
	for (int i = 1; i < ctx->g->nnodes; i++) {
		int rc = dnn_op_get(ctx->g->nodes[i].op)->forward(ctx, i);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static int submit_backward_node(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const dnn_op_desc *d = dnn_op_get(nd->op);
	int rc = d->backward ? d->backward(ctx, i) : 0;
	if (rc != 0)
		return rc;
	if (!d->routes_grads) /* its input 0's gradient now holds a contribution */
		ctx->written[nd->inputs[0]] = 1;
	return 0;
}

static int submit_backward(dnn_op_ctx *ctx)
{
	memset(ctx->written, 0, (size_t)ctx->g->nnodes);
	for (int i = ctx->g->nnodes - 1; i >= 1; i--) {
		int rc = submit_backward_node(ctx, i);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* The updates, one per parameter tensor; with --clip-grad-norm first the clipping tasks
 * (gradclip.h) over the summed gradients, whose coefficient every update then reads. */
static int submit_update(dnn_plan *p, int slot, const dnn_optim_config *optim)
{
	dnn_model *m = p->m;
	const int clip = optim->clip_norm > 0;
	if (p->clip_used)
		p->clip_used[slot] = 0;
	if (clip) {
		for (int i = 0; i < m->nparams; i++)
			p->clip_grad[i] = m->params[i].hg;
		int n = dnn_clip_submit(p, slot, p->clip_grad, NULL, NULL, optim->clip_norm);
		if (n < 0)
			return n;
		p->tasks_per_step += n;
	}
	for (int i = 0; i < m->nparams; i++) {
		dnn_param *pr = &m->params[i];
		dnn_optim_args a = dnn_param_optim_args(pr, optim, p->global_batch, 1);
		int rc = clip ? dnn_insert_optim_update_clipped(NULL, &a, pr->hw, pr->hv, pr->hg, dnn_clip_coef(p, slot))
			      : dnn_insert_optim_update(NULL, &a, pr->hw, pr->hv, pr->hg);
		if (rc != 0)
			return rc;
		p->tasks_per_step++;
	}
	return 0;
}

/* The insert options of chunk c's tasks: with --pin-chunks (dnn_plan_pin_chunks) its worker, in
 * *buf; else NULL (local inserts, the scheduler chooses). */
static const dnn_task_opts *chunk_opts(const dnn_plan *p, int c, dnn_task_opts *buf)
{
	if (!p->chunk_worker)
		return NULL;
	*buf = (dnn_task_opts){.pinned = 1, .worker = p->chunk_worker[c], .pin_queue = !p->cfg.pin_by_mask};
	return buf;
}

void dnn_op_ctx_chunk(dnn_op_ctx *ctx, int c, dnn_task_opts *buf)
{
	const dnn_plan *p = ctx->p;
	ctx->c = c, ctx->n = p->chunk_n[c], ctx->sample0 = p->batch_offset + p->chunk_off[c];
	ctx->opts = chunk_opts(p, c, buf);
	ctx->written = p->written + (size_t)c * ctx->g->nnodes;
}

/* --batchnorm global: forward and backward layer by layer, every chunk's tasks of a node before
 * the next node's, so that a batch norm's sums over all chunks are submitted before any chunk
 * reads them (op.h: dnn_op_desc.forward). Each chunk has its own `written` bytes. */
static int submit_layer_major(dnn_op_ctx *ctx, int backward)
{
	dnn_task_opts pin;
	const int K = ctx->p->nchunks, n = ctx->g->nnodes;
	if (backward)
		memset(ctx->p->written, 0, (size_t)n * K);
	for (int k = 1; k < n; k++) {
		const int i = backward ? n - k : k;
		for (int c = 0; c < K; c++) {
			dnn_op_ctx_chunk(ctx, c, &pin);
			int rc = backward ? submit_backward_node(ctx, i) : dnn_op_get(ctx->g->nodes[i].op)->forward(ctx, i);
			if (rc != 0)
				return rc;
		}
	}
	return 0;
}

static int submit_step(dnn_plan *p, int slot, const dnn_data_source *src, const int *idx, long step,
		       const dnn_optim_config *optim)
{
	dnn_model *m = p->m;
	dnn_op_ctx ctx = {.p = p, .m = m, .g = m->g, .slot = slot, .step = step, .written = p->written};
	dnn_task_opts pin;
	int rc;
	idx += p->batch_offset; /* this rank's shard of the global batch */
	p->tasks_per_step = 0;
	for (int c = 0; c < p->nchunks; c++) {
		size_t k = (size_t)slot * p->nchunks + c;
		if ((rc = src->insert_load(src, chunk_opts(p, c, &pin), idx + p->chunk_off[c], p->chunk_n[c], p->train,
					   step, m->in_mean, m->in_std, p->x[k], p->labels[k])) != 0)
			return rc;
		p->tasks_per_step++;
	}
	/* The cross-rank DAG counts this process's steps (async server versions start at 0 in every
	 * run, resumed or not); the data source and the ops get the global step. */
	const long local_step = p->steps_submitted - 1;
	if (p->distributed && (rc = dnn_dist_before_forward(p, local_step)) != 0)
		return rc;
	if (p->bn_global && p->train) {
		if ((rc = submit_layer_major(&ctx, 0)) != 0)
			return rc;
	} else
		for (int c = 0; c < p->nchunks; c++) {
			dnn_op_ctx_chunk(&ctx, c, &pin);
			if ((rc = submit_forward(&ctx)) != 0)
				return rc;
		}
	if (p->distributed && (rc = dnn_dist_reduce_stats(p, slot)) != 0)
		return rc;
	if (!p->train)
		return 0;
	if (p->bn_global) {
		if ((rc = submit_layer_major(&ctx, 1)) != 0)
			return rc;
	} else
		for (int c = 0; c < p->nchunks; c++) {
			dnn_op_ctx_chunk(&ctx, c, &pin);
			if ((rc = submit_backward(&ctx)) != 0)
				return rc;
		}
	if ((rc = dnn_chunksum_submit_grads(p)) != 0) /* each gradient's chunks, in a fixed order, into its hg */
		return rc;
	if (p->distributed)
		return dnn_dist_after_backward(p, slot, local_step, optim);
	return submit_update(p, slot, optim);
}

int dnn_submit_step(dnn_plan *p, int slot, const dnn_data_source *src, const int *idx, long step,
		    const dnn_optim_config *optim, char *err, size_t errlen)
{
	if (p->train && optim->clip_norm > 0 && p->distributed && !dnn_dist_is_sync(p->m->dist)) {
		snprintf(err, errlen, "--clip-grad-norm: not with --mode async (each rank pushes its own share of the "
				      "update; there is no global gradient to take the norm of)");
		return -1;
	}
	if (p->train && optim->clip_norm > 0 && !p->clip_coef) {
		snprintf(err, errlen, "--clip-grad-norm: the plan has no clipping handles");
		return -1;
	}
	p->steps_submitted++;
	int rc = submit_step(p, slot, src, idx, step, optim);
	if (rc != 0) {
		snprintf(err, errlen, "step %ld: StarPU refused a task: %s", step,
			 rc == -ENODEV ? "no worker can run it (-ENODEV)" : strerror(-rc));
		return -1;
	}
	return 0;
}

/* A task that could not run (dnn_worker_error) ends the run with its message. */
static int worker_failed(char *err, size_t errlen)
{
	char msg[512];
	if (!dnn_worker_error_get(msg, sizeof(msg)))
		return 0;
	snprintf(err, errlen, "a task failed: %s", msg);
	return 1;
}

static int read_stats(starpu_data_handle_t h, const float *host, double *loss_sum, double *correct, char *err,
		      size_t errlen)
{
	int rc = starpu_data_acquire(h, STARPU_R);
	if (rc != 0) {
		snprintf(err, errlen, "waiting for a step: starpu_data_acquire failed: %s", strerror(-rc));
		return -1;
	}
	*loss_sum += host[0], *correct += host[1];
	starpu_data_release(h);
	return 0;
}

int dnn_wait_step(dnn_plan *p, int slot, double *loss_sum, double *correct, char *err, size_t errlen)
{
	*loss_sum = 0, *correct = 0;
	if (p->distributed) {
		float *host;
		starpu_data_handle_t h = dnn_dist_stats_handle(p, slot, &host);
		if (read_stats(h, host, loss_sum, correct, err, errlen) != 0)
			return -1;
	} else {
		for (int c = 0; c < p->nchunks; c++) {
			size_t k = (size_t)slot * p->nchunks + c;
			if (read_stats(p->stats[k], p->stats_host + 2 * k, loss_sum, correct, err, errlen) != 0)
				return -1;
		}
	}
	return worker_failed(err, errlen) ? -1 : 0;
}

int dnn_plan_pin_chunks(dnn_plan *p, char *err, size_t errlen)
{
	int ids[STARPU_NMAXWORKERS];
	int n = starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, ids, STARPU_NMAXWORKERS);
	if (n <= 0)
		n = starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, ids, STARPU_NMAXWORKERS);
	if (n <= 0) {
		snprintf(err, errlen, "--pin-chunks: no CUDA or CPU worker to pin the chunks to");
		return -1;
	}
	free(p->chunk_worker);
	p->chunk_worker = malloc(sizeof(int) * (size_t)p->nchunks);
	if (!p->chunk_worker) {
		snprintf(err, errlen, "--pin-chunks: out of memory");
		return -1;
	}
	/* In blocks: chunks 0..K/n-1 on the first worker, and so on. The fixed-order sum over chunks
	 * (graph/chunksum.c) adds chunk c + 1 into c first, so its first levels then stay on one GPU;
	 * spread round-robin (c mod n), every add of that level moved a whole gradient between GPUs,
	 * which cost a simulated 16 x 4-K80 ResNet-50 step 12% against REDUX, 6% in blocks. */
	for (int c = 0; c < p->nchunks; c++)
		p->chunk_worker[c] = ids[p->nchunks >= n ? (int)((long)c * n / p->nchunks) : c];
	return 0;
}
