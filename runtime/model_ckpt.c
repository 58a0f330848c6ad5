/* model_ckpt.c — dnn_model_save / dnn_model_load (see model_ckpt.h). */
#include "model_ckpt.h"

#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

/* The model's tensors in checkpoint order; names[] holds the composed names (cap entries, NULL
 * where unused; free with free_names). Returns the count, or -1 (out of memory, err set). */
static int model_tensors(dnn_model *m, dnn_ckpt_tensor **out, char ***names_out, int *cap_out, const char *path,
			 char *err, size_t errlen)
{
	const dnn_graph *g = m->g;
	int cap = 2 * m->nparams + g->nnodes + 2, n = 0;
	dnn_ckpt_tensor *t = calloc((size_t)cap, sizeof(*t));
	char **names = calloc((size_t)cap, sizeof(char *));
	*cap_out = cap;
	if (!t || !names)
		goto oom;
	for (int i = 0; i < m->nparams; i++) {
		t[n].name = m->params[i].name, t[n].data = m->params[i].w, t[n].n = (uint64_t)m->params[i].n, n++;
		if (!(names[n] = malloc(strlen(m->params[i].name) + 10)))
			goto oom;
		sprintf(names[n], "%s.momentum", m->params[i].name);
		t[n].name = names[n], t[n].data = m->params[i].v, t[n].n = (uint64_t)m->params[i].n, n++;
	}
	for (int i = 0; i < g->nnodes; i++)
		if (m->running[i]) {
			if (!(names[n] = malloc(strlen(g->nodes[i].name) + 10)))
				goto oom;
			sprintf(names[n], "%s.running", g->nodes[i].name);
			t[n].name = names[n], t[n].data = m->running[i], t[n].n = 2 * (uint64_t)g->nodes[i].C, n++;
		}
	t[n].name = "input.mean", t[n].data = m->in_mean, t[n].n = (uint64_t)g->nodes[0].C, n++;
	t[n].name = "input.std", t[n].data = m->in_std, t[n].n = (uint64_t)g->nodes[0].C, n++;
	*out = t;
	*names_out = names;
	return n;
oom:
	snprintf(err, errlen, "%s: out of memory for the checkpoint's tensor list", path);
	for (int i = 0; names && i < cap; i++)
		free(names[i]);
	free(names);
	free(t);
	return -1;
}

static void free_names(char **names, int cap)
{
	for (int i = 0; i < cap; i++)
		free(names[i]);
	free(names);
}

int dnn_model_save(dnn_model *m, const char *path, uint64_t step, uint32_t epoch, uint64_t seed, char *err,
		   size_t errlen)
{
	if (dnn_model_sync_to_host(m, err, errlen) != 0)
		return -1;
	dnn_ckpt_tensor *t;
	char **names;
	int cap, n = model_tensors(m, &t, &names, &cap, path, err, errlen);
	if (n < 0)
		return -1;
	dnn_ckpt_meta meta = {.net_fingerprint = dnn_graph_fingerprint(m->g), .step = step, .epoch = epoch,
			      .rng_state = seed, .nclasses = m->class_names ? (uint32_t)m->g->classes : 0,
			      .class_names = m->class_names};
	int rc = 0;
	/* An update can make the parameters non-finite a step before the loss shows it: never let
	 * such a state replace the last good checkpoint (it could not be resumed). */
	for (int i = 0; rc == 0 && i < n; i++)
		for (uint64_t j = 0; j < t[i].n; j++)
			if (!isfinite(t[i].data[j])) {
				snprintf(err, errlen, "%s: not written: at step %llu, %s holds %g at [%llu]; the previous "
					 "checkpoint is kept. Training stopped (try a lower --lr)", path,
					 (unsigned long long)step, t[i].name, (double)t[i].data[j], (unsigned long long)j);
				rc = -1;
				break;
			}
	if (rc == 0)
		rc = dnn_checkpoint_save(path, &meta, t, n, err, errlen);
	free(t);
	free_names(names, cap);
	return rc;
}

/* The handles that loading writes into: every parameter's value and momentum, and the batch-norm
 * running statistics. Returns how many were put in h (capacity 2 * nparams + nnodes). */
static int model_handles(dnn_model *m, starpu_data_handle_t *h)
{
	int k = 0;
	for (int i = 0; i < m->nparams; i++)
		h[k++] = m->params[i].hw, h[k++] = m->params[i].hv;
	for (int i = 0; i < m->g->nnodes; i++)
		if (m->hrunning[i])
			h[k++] = m->hrunning[i];
	return k;
}

int dnn_model_load(dnn_model *m, const char *path, uint64_t *step, uint32_t *epoch, uint64_t *seed, char *err,
		   size_t errlen)
{
	dnn_ckpt_tensor *t;
	char **names;
	int cap, n = model_tensors(m, &t, &names, &cap, path, err, errlen);
	if (n < 0)
		return -1;
	starpu_data_handle_t *h = malloc(sizeof(*h) * (size_t)(2 * m->nparams + m->g->nnodes + 1));
	if (!h) {
		snprintf(err, errlen, "%s: out of memory", path);
		free(t);
		free_names(names, cap);
		return -1;
	}
	dnn_ckpt_meta meta = {.net_fingerprint = dnn_graph_fingerprint(m->g)};
	/* The tensors are registered with StarPU: take them for writing while we load. */
	int nh = model_handles(m, h), acquired = 0, rc = 0;
	for (; acquired < nh; acquired++) {
		int r = starpu_data_acquire(h[acquired], STARPU_W);
		if (r != 0) {
			snprintf(err, errlen, "%s: cannot take the model's tensors to load them: starpu_data_acquire: %s",
				 path, strerror(-r));
			rc = -1;
			break;
		}
	}
	if (rc == 0)
		rc = dnn_checkpoint_load(path, &meta, t, n, err, errlen);
	for (int i = 0; i < acquired; i++)
		starpu_data_release(h[i]);
	free(h);
	/* An image folder's classes must be the checkpoint's, in the same order. */
	for (uint32_t i = 0; rc == 0 && m->class_names && i < meta.nclasses; i++)
		if (strcmp(meta.class_names[i], m->class_names[i]) != 0) {
			snprintf(err, errlen, "%s: class %u is '%s' in the checkpoint but '%s' in the data", path, i,
				 meta.class_names[i], m->class_names[i]);
			dnn_ckpt_free_names(&meta);
			rc = -1;
		}
	if (rc == 0) {
		if (step)
			*step = meta.step;
		if (epoch)
			*epoch = meta.epoch;
		if (seed)
			*seed = meta.rng_state;
		dnn_ckpt_free_names(&meta);
	}
	free(t);
	free_names(names, cap);
	return rc;
}
