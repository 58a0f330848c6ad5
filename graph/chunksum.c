/* chunksum.c — sums over chunks in an order fixed by chunk index (chunksum.h). */
#include "chunksum.h"

#include <stdio.h>
#include <stdlib.h>

#include "batchnorm.h"
#include "bnstats.h"
#include "errline.h"
#include "vec.h"

int dnn_chunksum_submit(const dnn_task_opts *o, starpu_data_handle_t *part, int K, int reverse)
{
	int n = 0, rc;
	if (reverse) { /* part[0] + (part[1] + (... + part[K-1])) */
		for (int c = K - 2; c >= 0; c--, n++)
			if ((rc = dnn_insert_vec_add_clear(o, part[c], part[c + 1])) != 0)
				return rc;
		return n;
	}
	for (int s = 1; s < K; s *= 2)
		for (int c = 0; c + s < K; c += 2 * s, n++)
			if ((rc = dnn_insert_vec_add_clear(o, part[c], part[c + s])) != 0)
				return rc;
	return n;
}

void dnn_chunksum_plan_free(dnn_plan *p)
{
	const int K = p->nchunks;
	for (int q = 0; p->gpart && q < p->m->nparams; q++)
		for (int c = 1; c < K; c++)
			if (p->gpart[(size_t)q * K + c])
				starpu_data_unregister_no_coherency(p->gpart[(size_t)q * K + c]);
	free(p->gpart);
	p->gpart = NULL;
}

int dnn_chunksum_plan_register(dnn_plan *p, char *err, size_t errlen)
{
	dnn_model *m = p->m;
	const int K = p->nchunks;
	dnn_chunksum_plan_free(p);
	if (p->sum_redux || !p->train)
		return 0;
	p->gpart = calloc((size_t)m->nparams * K, sizeof(starpu_data_handle_t));
	if (!p->gpart) {
		dnn_set_err(err, errlen, m->g->source, "out of memory creating the per-chunk gradients");
		return -1;
	}
	for (int q = 0; q < m->nparams; q++) {
		starpu_data_handle_t *part = &p->gpart[(size_t)q * K];
		part[0] = m->params[q].hg;
		for (int c = 1; c < K; c++) {
			/* Home -1: allocated where chunk c's first task needs it, and zeroed there by StarPU's
			 * lazy initialisation (the init method: a call inside that task's data fetch, no task
			 * of its own, so no perf model to calibrate for the simulation); later steps find it
			 * zeroed by the sum's add-and-clear. */
			starpu_vector_data_register(&part[c], -1, 0, (uint32_t)m->params[q].n, sizeof(float));
			dnn_vec_set_sum_redux(part[c]);
		}
	}
	return 0;
}

int dnn_plan_set_sum_redux(dnn_plan *p, int sum_redux, char *err, size_t errlen)
{
	if (p->sum_redux == (sum_redux ? 1 : 0))
		return 0;
	p->sum_redux = sum_redux ? 1 : 0;
	if (dnn_chunksum_plan_register(p, err, errlen) != 0)
		return -1;
	return dnn_bn_parts_register(p, err, errlen);
}

int dnn_chunksum_submit_grads(dnn_plan *p)
{
	if (!p->gpart || p->nchunks < 2)
		return 0;
	for (int q = p->m->nparams - 1; q >= 0; q--) {
		int n = dnn_chunksum_submit(&(dnn_task_opts){.name = "grad_sum"}, &p->gpart[(size_t)q * p->nchunks],
					    p->nchunks, p->cfg.test_sum_reverse);
		if (n < 0)
			return n;
		p->tasks_per_step += n;
	}
	return 0;
}

starpu_data_handle_t dnn_chunksum_grad(const dnn_plan *p, int q, int c, int *mode)
{
	if (!p->gpart) {
		*mode = STARPU_REDUX;
		return p->m->params[q].hg;
	}
	*mode = STARPU_RW;
	return p->gpart[(size_t)q * p->nchunks + c];
}
