/* gradclip.c — global gradient-norm clipping as tasks (gradclip.h). */
#include "gradclip.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clip.h"
#include "errline.h"

void dnn_clip_plan_free(dnn_plan *p)
{
	for (int q = 0; p->clip_sumsq && q < p->m->nparams; q++)
		if (p->clip_sumsq[q])
			starpu_data_unregister_no_coherency(p->clip_sumsq[q]);
	for (int s = 0; s < p->nslots; s++) {
		if (p->clip_coef && p->clip_coef[s])
			starpu_data_unregister_no_coherency(p->clip_coef[s]);
		if (p->clip_norm && p->clip_norm[s])
			starpu_data_unregister(p->clip_norm[s]);
	}
	free(p->clip_sumsq), free(p->clip_coef), free(p->clip_norm), free(p->clip_norm_host), free(p->clip_used);
	free(p->clip_grad), free(p->clip_keep);
	p->clip_sumsq = p->clip_coef = p->clip_norm = p->clip_grad = NULL;
	p->clip_norm_host = NULL, p->clip_used = NULL, p->clip_keep = NULL;
}

int dnn_clip_plan_register(dnn_plan *p, char *err, size_t errlen)
{
	dnn_model *m = p->m;
	if (!p->train)
		return 0;
	const size_t P = (size_t)(m->nparams > 0 ? m->nparams : 1), S = (size_t)p->nslots;
	p->clip_sumsq = calloc(P, sizeof(starpu_data_handle_t));
	p->clip_grad = calloc(P, sizeof(starpu_data_handle_t));
	p->clip_keep = calloc(P, 1);
	p->clip_coef = calloc(S, sizeof(starpu_data_handle_t));
	p->clip_norm = calloc(S, sizeof(starpu_data_handle_t));
	p->clip_norm_host = calloc(S, sizeof(double));
	p->clip_used = calloc(S, 1);
	if (!p->clip_sumsq || !p->clip_grad || !p->clip_keep || !p->clip_coef || !p->clip_norm || !p->clip_norm_host ||
	    !p->clip_used) {
		dnn_set_err(err, errlen, m->g->source, "out of memory creating the gradient-clipping handles");
		return -1;
	}
	/* Home -1: allocated where their first task runs (a GPU's memory when a GPU computes them);
	 * only the norm has a host home, which dnn_plan_grad_norm reads. */
	for (int q = 0; q < m->nparams; q++)
		starpu_vector_data_register(&p->clip_sumsq[q], -1, 0, 1, sizeof(double));
	for (size_t s = 0; s < S; s++) {
		starpu_vector_data_register(&p->clip_coef[s], -1, 0, 1, sizeof(float));
		p->clip_norm_host[s] = NAN;
		starpu_vector_data_register(&p->clip_norm[s], STARPU_MAIN_RAM, (uintptr_t)&p->clip_norm_host[s], 1,
					    sizeof(double));
	}
	return 0;
}

int dnn_clip_submit(dnn_plan *p, int slot, const starpu_data_handle_t *grad, const dnn_task_opts *opts,
		    const dnn_task_opts *copt, float max_norm)
{
	const int P = p->m->nparams;
	const float scale = 1.0f / (float)p->global_batch; /* as dnn_param_optim_args: the mean over the batch */
	int rc;
	if (!p->clip_coef || slot < 0 || slot >= p->nslots || !(max_norm > 0))
		return -EINVAL;
	/* The last parameters' first: their gradients are complete first (the backward's order). */
	for (int q = P - 1; q >= 0; q--)
		if ((rc = dnn_insert_grad_sumsq(opts ? &opts[q] : NULL, p->clip_sumsq[q], grad[q], scale)) != 0)
			return rc;
	if ((rc = dnn_insert_clip_coef(copt, p->clip_coef[slot], p->clip_norm[slot], p->clip_sumsq, P, max_norm)) != 0)
		return rc;
	p->clip_used[slot] = 1;
	return P + 1;
}

starpu_data_handle_t dnn_clip_coef(const dnn_plan *p, int slot) { return p->clip_coef[slot]; }

int dnn_plan_grad_norm(dnn_plan *p, int slot, double *norm, char *err, size_t errlen)
{
	*norm = NAN;
	if (!p->clip_used || slot < 0 || slot >= p->nslots || !p->clip_used[slot])
		return 0;
	int rc = starpu_data_acquire(p->clip_norm[slot], STARPU_R);
	if (rc != 0) {
		snprintf(err, errlen, "reading a step's gradient norm: starpu_data_acquire failed: %s", strerror(-rc));
		return -1;
	}
	*norm = p->clip_norm_host[slot];
	starpu_data_release(p->clip_norm[slot]);
	return 0;
}
