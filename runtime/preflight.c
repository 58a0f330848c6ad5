/* preflight.c — memory check before a run (see preflight.h). */
#include "preflight.h"

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
	if (train_plan && train_plan->train) {
		double grads = 0;
		for (int i = 0; i < m->nparams; i++)
			grads += (double)m->params[i].n * sizeof(float);
		redux = grads * starpu_cpu_worker_get_count();
	}
	int batch = train_plan ? train_plan->batch : 0, chunks = train_plan ? train_plan->nchunks : 0;
	int window = train_plan ? train_plan->nslots : 0;
	if (eval_batch > 0) {
		// dnn_evaluate's plan, exactly as it will make it (registering allocates nothing).
		dnn_plan ep;
		dnn_plan_create(&ep, m, eval_batch, eval_chunks, 2, 0);
		eval = dnn_plan_starpu_bytes(&ep);
		if (!train_plan)
			batch = eval_batch, chunks = ep.nchunks, window = ep.nslots;
		dnn_plan_destroy(&ep);
	}
	double need = plan + redux + eval;
	if (need <= (double)avail)
		return 0;
	const char *lim = getenv("STARPU_LIMIT_CPU_MEM");
	char where[128];
	if (lim && *lim)
		snprintf(where, sizeof(where), "STARPU_LIMIT_CPU_MEM=%s", lim);
	else
		snprintf(where, sizeof(where), "90%% of this machine's memory");
	snprintf(err, errlen,
		 "not enough memory for this run: it needs %.1f MiB of StarPU-allocated main memory "
		 "(activations for batch %d in %d chunks with window %d: %.1f MiB; per-worker gradient copies: "
		 "%.1f MiB; evaluation: %.1f MiB) but only %.1f MiB is available (%s). StarPU would wait for memory "
		 "forever: raise STARPU_LIMIT_CPU_MEM, or lower --batch or --window",
		 need / MIB, batch, chunks, window, plan / MIB, redux / MIB, eval / MIB, (double)avail / MIB, where);
	return -1;
}
