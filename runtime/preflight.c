/* preflight.c — memory check before a run (see preflight.h). */
#include "preflight.h"
#include "knobs.h"

#include <limits.h>
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double handles_bytes(starpu_data_handle_t *h, size_t n)
{
	double b = 0;
	for (size_t i = 0; h && i < n; i++)
		if (h[i] && starpu_data_get_home_node(h[i]) < 0)
			b += (double)starpu_data_get_size(h[i]);
	return b;
}

double dnn_plan_starpu_bytes(const dnn_plan *p)
{
	size_t nh = (size_t)p->m->g->nnodes * p->nchunks, ns = (size_t)p->nslots * p->nchunks;
	return handles_bytes(p->y, nh) + handles_bytes(p->dy, nh) + handles_bytes(p->saved, nh) +
	       handles_bytes(p->x, ns) + handles_bytes(p->labels, ns) + handles_bytes(p->stats, ns);
}

#define MIB (1024.0 * 1024.0)

int dnn_preflight_memory(dnn_model *m, const dnn_plan *train_plan, int eval_batch, int eval_chunks, char *err,
			 size_t errlen)
{
	if (starpu_cuda_worker_get_count() > 0)
		return 0;
	starpu_ssize_t avail = starpu_memory_get_available(STARPU_MAIN_RAM);
	if (avail < 0)
		return 0; // StarPU knows no size for main memory: nothing to compare with
	double plan = train_plan ? dnn_plan_starpu_bytes(train_plan) : 0, redux = 0, eval = 0;
	/* The gradients' extra copies: with fixed-order sums (graph/chunksum.h) every chunk but the
	 * first has its own partial of every gradient (and of --batchnorm global's sums); with
	 * --deterministic off, StarPU's REDUX gives every CPU worker one copy of each. */
	const int fixed = train_plan && train_plan->train && !train_plan->sum_redux;
	if (fixed) {
		const dnn_plan *tp = train_plan;
		redux = handles_bytes(tp->gpart, (size_t)m->nparams * tp->nchunks) +
			handles_bytes(tp->bn_part, (size_t)m->g->nnodes * tp->nslots * 2 * tp->nchunks);
		if (!tp->gpart) /* not registered (cannot happen after dnn_plan_create): count them anyway */
			redux = (double)dnn_model_grad_bytes(m) * (tp->nchunks - 1);
	} else if (train_plan && train_plan->train)
		redux = (double)dnn_model_grad_bytes(m) * starpu_cpu_worker_get_count();
	int eval_k = 0;
	if (eval_batch > 0) {
		// dnn_evaluate's plan, exactly as it will make it (registering allocates nothing).
		dnn_plan ep;
		if (dnn_plan_create(&ep, m, eval_batch, eval_chunks, 2, 0, dnn_knobs_get(), err, errlen) != 0)
			return -1;
		eval = dnn_plan_starpu_bytes(&ep);
		eval_k = ep.nchunks;
		dnn_plan_destroy(&ep);
	}
	double need = plan + redux + eval;
	if (need <= (double)avail)
		return 0;
	char parts[320] = "";
	size_t k = 0;
	if (train_plan)
		k += (size_t)snprintf(parts + k, sizeof(parts) - k, "training activations for batch %d in %d chunks, window %d: %.1f MiB; ",
				      train_plan->batch, train_plan->nchunks, train_plan->nslots, plan / MIB);
	if (redux > 0 && k < sizeof(parts))
		k += (size_t)snprintf(parts + k, sizeof(parts) - k, "%s: %.1f MiB; ",
				      fixed ? "per-chunk gradient partials" : "per-worker gradient copies", redux / MIB);
	if (eval_batch > 0 && k < sizeof(parts))
		k += (size_t)snprintf(parts + k, sizeof(parts) - k, "evaluation batch %d in %d chunks: %.1f MiB; ", eval_batch,
				      eval_k, eval / MIB);
	if (k >= 2 && k < sizeof(parts))
		parts[k - 2] = '\0'; // drop the last "; "
	const char *lim = getenv("STARPU_LIMIT_CPU_MEM");
	char where[128];
	if (lim && *lim)
		snprintf(where, sizeof(where), "STARPU_LIMIT_CPU_MEM=%s", lim);
	else
		snprintf(where, sizeof(where), "90%% of this machine's memory");
	snprintf(err, errlen,
		 "not enough memory: this run needs %.1f MiB of StarPU-allocated main memory (%s) but %s leaves "
		 "%.1f MiB, and StarPU would wait for memory forever. Raise STARPU_LIMIT_CPU_MEM or lower --batch%s",
		 need / MIB, parts, where, (double)avail / MIB, train_plan ? " or --window" : "");
	return -1;
}

static double handle_bytes(starpu_data_handle_t h) { return h ? (double)starpu_data_get_size(h) : 0; }

/* The buffers chunk c keeps: every node's output, gradient and saved buffer, and its input,
 * labels and loss statistics (one slot's). */
static double chunk_bytes(const dnn_plan *p, int c)
{
	double b = 0;
	for (int i = 0; i < p->m->g->nnodes; i++) {
		const size_t k = (size_t)i * p->nchunks + c;
		b += (p->y ? handle_bytes(p->y[k]) : 0) + (p->dy ? handle_bytes(p->dy[k]) : 0) +
		     (p->saved ? handle_bytes(p->saved[k]) : 0);
	}
	b += (p->x ? handle_bytes(p->x[c]) : 0) + (p->labels ? handle_bytes(p->labels[c]) : 0) +
	     (p->stats ? handle_bytes(p->stats[c]) : 0);
	return b;
}

#define GIB (1024.0 * 1024.0 * 1024.0)

/* need(s), the bytes per device with chunks of s samples: fixed + cpg s per_sample + wpd scratch(s) (each of the
 * device's wpd CUDA workers has its own scratch block, dnn_plan_cuda_scratch_bytes). */
static double need_at(const dnn_plan *p, double fixed, double cpg, double per_sample, int wpd, double s)
{
	return fixed + cpg * s * per_sample + wpd * dnn_plan_cuda_scratch_bytes(p, (int)s);
}

/* The largest s with need_at(s) <= cap, 0 when none: need grows with s, and the scratch only adds to the
 * activations, so s lies below the activations' own bound; a binary search finds it. */
static double largest_chunk(const dnn_plan *p, double cap, double fixed, double cpg, double per_sample, int wpd)
{
	double lo = 0, hi = floor((cap - fixed) / (cpg * per_sample));
	if (hi > INT_MAX)
		hi = INT_MAX;
	while (lo < hi) {
		const double mid = floor((lo + hi + 1) / 2);
		if (need_at(p, fixed, cpg, per_sample, wpd, mid) <= cap)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

int dnn_preflight_gpu_memory(dnn_model *m, const dnn_plan *p, char *info, size_t infolen, char *err, size_t errlen)
{
	if (info && infolen)
		info[0] = '\0';
	const int ngpu = (int)starpu_cuda_worker_get_count();
	if (ngpu <= 0 || !p || !p->train || p->nchunks <= 0 || p->batch <= 0)
		return 0;
	double cap = -1;
	int wpd = 1; /* the most CUDA workers that share one device (STARPU_NWORKER_PER_CUDA) */
	for (int w = 0; w < (int)starpu_worker_get_count(); w++) {
		if (starpu_worker_get_type(w) != STARPU_CUDA_WORKER)
			continue;
		const unsigned node = starpu_worker_get_memory_node((unsigned)w);
		const starpu_ssize_t t = starpu_memory_get_total(node);
		if (t > 0 && (cap < 0 || (double)t < cap))
			cap = (double)t;
		int same = 0;
		for (int v = 0; v < (int)starpu_worker_get_count(); v++)
			same += starpu_worker_get_type(v) == STARPU_CUDA_WORKER &&
				starpu_worker_get_memory_node((unsigned)v) == node;
		wpd = same > wpd ? same : wpd;
	}
	if (cap <= 0)
		return 0; // StarPU knows no size for the devices: nothing to compare with
	double params = 0, state = 0;
	for (int q = 0; q < m->nparams; q++) {
		params += 4.0 * (double)m->params[q].n;
		state += 4.0 * (double)dnn_param_state_n(m, &m->params[q]);
	}
	/* dnn_cuda.cu's workspace: DNN_CUDA_WORKSPACE_MB, else the default capped at 1/16 of the device */
	double ws = (double)DNN_CUDA_WORKSPACE_DEFAULT_MB * 1024 * 1024;
	if (p->cfg.cuda.workspace_mb >= 0)
		ws = (double)p->cfg.cuda.workspace_mb * 1024 * 1024;
	else if (ws > cap / 16)
		ws = cap / 16;
	/* chunk 0 is the largest (the first batch % nchunks chunks have one more sample) */
	const double per_chunk = chunk_bytes(p, 0), per_sample = per_chunk / p->chunk_n[0];
	const int T = m->g->nodes[0].tokens ? m->g->nodes[0].H : 0;
	const int ranks = p->global_batch > p->batch ? p->global_batch / p->batch : 1;
	/* need(K, s): the bytes per device with K chunks of s samples on this rank */
	double need_fixed[2], cpg[2];
	int kk[2] = {p->nchunks, ngpu < p->nchunks ? ngpu : p->nchunks};
	for (int j = 0; j < 2; j++) {
		cpg[j] = ceil((double)kk[j] / ngpu);
		need_fixed[j] = params + (p->sum_redux ? 1.0 : cpg[j]) * params + state + ws;
	}
	/* conv2d.cu's bf16 copies (--precision bf16): one scratch block per CUDA worker, for the largest chunk */
	const double scratch = wpd * dnn_plan_cuda_scratch_bytes(p, p->chunk_n[0]);
	const double act = cpg[0] * per_chunk, need = need_fixed[0] + act + scratch;
	char scratch_what[96] = "";
	if (scratch > 0)
		snprintf(scratch_what, sizeof(scratch_what), ", bf16 scratch %.2f GiB", scratch / GIB);
	char act_what[160];
	if (T > 0)
		snprintf(act_what, sizeof(act_what), "%d samples x %d tokens x %.1f KiB per token", (int)cpg[0] * p->chunk_n[0],
			 T, per_sample / T / 1024);
	else
		snprintf(act_what, sizeof(act_what), "%d samples x %.1f KiB per sample", (int)cpg[0] * p->chunk_n[0],
			 per_sample / 1024);
	if (info && infolen)
		snprintf(info, infolen,
			 "GPU memory per device: %.2f GiB of %.2f GiB: activations %.2f GiB (%d chunk(s) of %d: %s), "
			 "parameters %.2f GiB, gradients %.2f GiB, optimiser state %.2f GiB, workspace %.2f GiB%s",
			 need / GIB, cap / GIB, act / GIB, (int)cpg[0], p->chunk_n[0], act_what, params / GIB,
			 (p->sum_redux ? 1.0 : cpg[0]) * params / GIB, state / GIB, ws / GIB, scratch_what);
	if (need <= cap)
		return 0;
	char fit[200];
	const double s0 = largest_chunk(p, cap, need_fixed[0], cpg[0], per_sample, wpd);
	const double s1 = largest_chunk(p, cap, need_fixed[1], cpg[1], per_sample, wpd);
	if (s0 >= 1)
		snprintf(fit, sizeof(fit), "the largest that fits: --batch %.0f (%d chunk(s) of %.0f per rank)",
			 s0 * p->nchunks * ranks, p->nchunks, s0);
	else if (s1 >= 1)
		snprintf(fit, sizeof(fit), "no batch fits at %d chunks; with one chunk per GPU: --batch %.0f --chunks %d",
			 p->nchunks, s1 * kk[1] * ranks, kk[1]);
	else
		snprintf(fit, sizeof(fit), "no batch fits: the parameters, gradients, optimiser state and workspace alone "
					   "need %.2f GiB",
			 need_fixed[1] / GIB);
	snprintf(err, errlen,
		 "not enough GPU memory: --batch %d needs %.2f GiB per device (activations %.2f GiB for %s; parameters, "
		 "gradients, optimiser state and workspace %.2f GiB%s) and the smallest has %.2f GiB%s; %s",
		 p->global_batch, need / GIB, act / GIB, act_what, need_fixed[0] / GIB, scratch_what, cap / GIB,
		 getenv("STARPU_LIMIT_CUDA_MEM") ? " (STARPU_LIMIT_CUDA_MEM)" : "", fit);
	return -1;
}
