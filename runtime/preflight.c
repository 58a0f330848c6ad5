/* preflight.c — memory check before a run (see preflight.h). */
#include "preflight.h"
#include "knobs.h"

#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>

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
