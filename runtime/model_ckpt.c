/* model_ckpt.c — dnn_model_save / dnn_model_load (see model_ckpt.h). */
#include "model_ckpt.h"

#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "data.h"
#include "optim.h"

/* The names of each optimiser's state tensors, "<param>.<name>" (sgd's are version 3's). */
static const char *const state_names[][2] = {
	[DNN_OPT_SGD] = {"momentum", NULL}, [DNN_OPT_LARS] = {"lars_momentum", NULL}, [DNN_OPT_ADAMW] = {"adamw_m", "adamw_v"},
	[DNN_OPT_LAMB] = {"lamb_m", "lamb_v"}};

/* The model's tensors in checkpoint order, with the state tensors of optimiser opt: the model's
 * own (scratch NULL), or all pointing at scratch (a load that keeps no state); names[] holds the
 * composed names (cap entries, NULL where unused; free with free_names). Returns the count, or -1
 * (out of memory, err set). */
static int model_tensors(dnn_model *m, dnn_optimizer opt, float *scratch, dnn_ckpt_tensor **out, char ***names_out,
			 int *cap_out, const char *path, char *err, size_t errlen)
{
	const dnn_graph *g = m->g;
	int cap = 3 * m->nparams + g->nnodes + 2, n = 0;
	dnn_ckpt_tensor *t = calloc((size_t)cap, sizeof(*t));
	char **names = calloc((size_t)cap, sizeof(char *));
	*cap_out = cap;
	if (!t || !names)
		goto oom;
	for (int i = 0; i < m->nparams; i++) {
		const dnn_param *pr = &m->params[i];
		t[n].name = pr->name, t[n].data = pr->w, t[n].n = (uint64_t)pr->n, n++;
		for (int k = 0; k < 2 && state_names[opt][k]; k++) {
			if (!(names[n] = malloc(strlen(pr->name) + 16)))
				goto oom;
			sprintf(names[n], "%s.%s", pr->name, state_names[opt][k]);
			t[n].name = names[n], t[n].data = scratch ? scratch : pr->v + (size_t)k * (size_t)pr->n;
			t[n].n = (uint64_t)pr->n, n++;
		}
	}
	for (int i = 0; i < g->nnodes; i++)
		if (m->running[i]) {
			if (!(names[n] = malloc(strlen(g->nodes[i].name) + 10)))
				goto oom;
			sprintf(names[n], "%s.running", g->nodes[i].name);
			t[n].name = names[n], t[n].data = m->running[i], t[n].n = (uint64_t)m->running_n[i], n++;
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
	int cap, n = model_tensors(m, m->optimizer, NULL, &t, &names, &cap, path, err, errlen);
	if (n < 0)
		return -1;
	char comment[400];
	snprintf(comment, sizeof(comment), "net %s, as trained (written by starpu_anp into checkpoints)",
		 m->g->source);
	for (char *c = comment; *c; c++) /* one comment line, whatever the source's name holds */
		if (*c == '\n' || *c == '\r' || (unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
			*c = '?';
	char *net_text = dnn_graph_to_text(m->g, comment);
	if (!net_text) {
		snprintf(err, errlen, "%s: out of memory for the net's text", path);
		free(t);
		free_names(names, cap);
		return -1;
	}
	dnn_ckpt_meta meta = {.net_fingerprint = dnn_graph_fingerprint(m->g), .step = step, .epoch = epoch,
			      .rng_state = seed, .nclasses = m->class_names ? (uint32_t)m->g->classes : 0,
			      .class_names = m->class_names, .net_text = net_text};
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
	free(net_text);
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

/* Acquire the model's tensors for writing (they are registered with StarPU), load the checkpoint
 * into them (its fingerprint must be fp), release them. */
static int load_into_handles(dnn_model *m, const char *path, uint64_t fp, dnn_ckpt_tensor *t, int n,
			     dnn_ckpt_meta *meta, char *err, size_t errlen)
{
	starpu_data_handle_t *h = malloc(sizeof(*h) * (size_t)(2 * m->nparams + m->g->nnodes + 1));
	if (!h) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	*meta = (dnn_ckpt_meta){.net_fingerprint = fp};
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
		rc = dnn_checkpoint_load(path, meta, t, n, err, errlen);
	for (int i = 0; i < acquired; i++)
		starpu_data_release(h[i]);
	free(h);
	return rc;
}

/* The optimiser whose state a checkpoint holds, from its first state tensor's name (meta.state);
 * a checkpoint older than the other optimisers holds sgd's momentum. */
static dnn_optimizer ckpt_optimizer(const dnn_ckpt_meta *info)
{
	for (int k = 0; k < (int)(sizeof(state_names) / sizeof(state_names[0])); k++)
		if (strcmp(info->state, state_names[k][0]) == 0)
			return (dnn_optimizer)k;
	return DNN_OPT_SGD;
}

/* The fingerprint a checkpoint of m's net holds: the canonical text's hash from version 3 on, the
 * structure hash before, and the optimiser of its state (*opt). Checks first that the checkpoint
 * is of m's net (dnn_ckpt_check_net). */
static int expected_fingerprint(dnn_model *m, const char *path, uint64_t *fp, dnn_optimizer *opt, char *err,
				size_t errlen)
{
	dnn_ckpt_meta info;
	if (dnn_checkpoint_read_info(path, &info, 0, err, errlen) != 0)
		return -1;
	int rc = dnn_ckpt_check_net(m->g, m->g->source, path, &info, NULL, err, errlen);
	*fp = info.version >= 3 ? dnn_graph_fingerprint(m->g) : dnn_graph_structure_hash(m->g);
	*opt = ckpt_optimizer(&info);
	dnn_ckpt_free_names(&info);
	return rc == 0 ? 0 : -1;
}

int dnn_model_load(dnn_model *m, const char *path, uint64_t *step, uint32_t *epoch, uint64_t *seed, char *err,
		   size_t errlen)
{
	uint64_t fp;
	dnn_optimizer opt;
	if (expected_fingerprint(m, path, &fp, &opt, err, errlen) != 0)
		return -1;
	if (opt != m->optimizer && m->optimizer_set) {
		snprintf(err, errlen, "%s holds the state of --optimizer %s, this run uses --optimizer %s (a resume "
			 "keeps its optimiser)", path, dnn_optimizer_name(opt), dnn_optimizer_name(m->optimizer));
		return -1;
	}
	/* eval, predict, export: the parameters only; another optimiser's state goes to a scratch */
	float *scratch = NULL;
	long max_n = 1;
	for (int i = 0; i < m->nparams; i++)
		max_n = m->params[i].n > max_n ? m->params[i].n : max_n;
	if (opt != m->optimizer && !(scratch = malloc((size_t)max_n * sizeof(float)))) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	dnn_ckpt_tensor *t;
	char **names;
	int cap, n = model_tensors(m, opt, scratch, &t, &names, &cap, path, err, errlen);
	if (n < 0) {
		free(scratch);
		return -1;
	}
	dnn_ckpt_meta meta;
	int rc = load_into_handles(m, path, fp, t, n, &meta, err, errlen);
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
	free(scratch);
	return rc;
}

/* ---------------------------------------------------------------- the net of a checkpoint */

/* "resnet18" from the comment line "# net resnet18.net, as trained ..." (else "checkpoint"). */
static void net_name_of(const char *text, char *name, size_t len)
{
	snprintf(name, len, "checkpoint");
	if (strncmp(text, "# net ", 6) != 0)
		return;
	const char *b = text + 6, *e = b;
	while (*e && *e != ',' && *e != '\n' && *e != ' ')
		e++;
	const char *slash = b;
	for (const char *c = b; c < e; c++)
		if (*c == '/')
			slash = c + 1;
	size_t n = (size_t)(e - slash);
	if (n > 4 && !strncmp(e - 4, ".net", 4))
		n -= 4;
	if (n > 0 && n < len)
		snprintf(name, len, "%.*s", (int)n, slash);
}

/* given is not ckpt_net (the net the checkpoint at path carries): "--net NET is not the net of
 * PATH: node 4 (d1): p=0.899999976 in --net, p=0.25 in the checkpoint[ (hint)]". Returns 0 when
 * they are the same net, else 2. */
static int same_net(const dnn_graph *ckpt_net, const dnn_graph *given, const char *net, const char *path,
		    const char *hint, char *err, size_t errlen)
{
	dnn_graph_diff d;
	if (dnn_graph_compare(given, ckpt_net, &d) == 0)
		return 0;
	char what[2 * DNN_DIFF_TEXT + 200];
	dnn_graph_diff_line(&d, "--net", "the checkpoint", what, sizeof(what));
	snprintf(err, errlen, "--net %s is not the net of %s: %s%s%s%s", net, path, what, hint ? " (" : "", hint ? hint : "",
		 hint ? ")" : "");
	return 2;
}

/* dnn_ckpt_check_net, for a header already verified or not. */
static int check_net(const dnn_graph *g, const char *net, const char *path, const dnn_ckpt_meta *info,
		     const char *hint, char *err, size_t errlen)
{
	if (!info->net_text) { /* version 1 (or a file saved without it): the hash is all there is */
		uint64_t want = info->version >= 3 ? dnn_graph_fingerprint(g) : dnn_graph_structure_hash(g);
		if (info->net_fingerprint == want)
			return 0;
		snprintf(err, errlen, "--net %s is not the net of %s: its %s %016llx is not the checkpoint's %016llx (a "
			 "version-%u checkpoint carries no net to compare key by key)%s%s%s", net, path,
			 info->version >= 3 ? "fingerprint" : "structure hash", (unsigned long long)want,
			 (unsigned long long)info->net_fingerprint, info->version, hint ? " (" : "", hint ? hint : "",
			 hint ? ")" : "");
		return 2;
	}
	dnn_graph c;
	char src[300], perr[512];
	snprintf(src, sizeof(src), "%s (its net)", path);
	if (dnn_graph_parse(&c, info->net_text, src, perr, sizeof(perr)) != 0) {
		snprintf(err, errlen, "%s", perr);
		return 1;
	}
	int rc = same_net(&c, g, net, path, hint, err, errlen);
	dnn_graph_free(&c);
	return rc;
}

int dnn_ckpt_check_net(const dnn_graph *g, const char *net, const char *path, const dnn_ckpt_meta *info,
		       const char *hint, char *err, size_t errlen)
{
	int rc = check_net(g, net, path, info, hint, err, errlen);
	if (rc == 0)
		return 0;
	/* A refusal may come from damage (a flipped bit in the net text): then say that instead. */
	dnn_ckpt_meta v;
	char verr[1024];
	if (dnn_checkpoint_read_info(path, &v, 1, verr, sizeof(verr)) != 0) {
		snprintf(err, errlen, "%s", verr);
		return 1;
	}
	dnn_ckpt_free_names(&v);
	return rc;
}

/* A checkpoint without its net text (version 1): the net is --net's, at --input, as before. */
static int open_v1_net(dnn_graph *g, const dnn_train_opts *o, uint32_t version, char *err, size_t errlen)
{
	if (!o->net_set) {
		snprintf(err, errlen, "--checkpoint %s: a version-%u checkpoint does not carry its net: give the --net "
			 "(and --input) it was trained with", o->checkpoint_in, version);
		return 2;
	}
	if (dnn_graph_load(g, o->net, err, errlen) != 0)
		return 1;
	if (o->input && dnn_graph_set_input_hw(g, o->input, o->input, err, errlen) != 0) {
		dnn_graph_free(g);
		return 1;
	}
	return 0;
}

/* --net given with a checkpoint that carries its net g: it must be the same net, once given the
 * checkpoint's input size and class count (the rewrites that --input and an image folder make). */
static int check_given_net(const dnn_graph *g, const dnn_train_opts *o, char *err, size_t errlen)
{
	const char *path = o->checkpoint_in;
	const dnn_node *in = &g->nodes[0];
	dnn_graph u;
	if (dnn_graph_load(&u, o->net, err, errlen) != 0)
		return 1;
	char e2[512];
	int rc = 0;
	if (u.nodes[0].C == in->C && (u.nodes[0].H != in->H || u.nodes[0].W != in->W) &&
	    dnn_graph_set_input_hw(&u, in->H, in->W, e2, sizeof(e2)) != 0)
		rc = 2;
	if (rc == 0 && u.classes != g->classes && dnn_graph_set_classes(&u, g->classes, e2, sizeof(e2)) != 0)
		rc = 2;
	if (rc != 0 && u.nodes[0].seq) { /* a language model: its classes are its embed's vocab=, no rewrite makes
					 * them; the first node and key that differ say why, as for any other key */
		dnn_graph_free(&u);
		if (dnn_graph_load(&u, o->net, err, errlen) != 0)
			return 1;
		rc = 0;
	}
	if (rc != 0)
		snprintf(err, errlen, "--net %s is not the net of %s (it cannot take its %dx%dx%d input and %d classes: %s)",
			 o->net, path, in->C, in->H, in->W, g->classes, e2);
	else
		rc = same_net(g, &u, o->net, path, "leave --net out: the checkpoint carries its net", err, errlen);
	dnn_graph_free(&u);
	return rc;
}

int dnn_ckpt_open_net(dnn_graph *g, const dnn_train_opts *o, char *name, size_t namelen, char *err, size_t errlen)
{
	const char *path = o->checkpoint_in;
	dnn_ckpt_meta info;
	if (name && namelen)
		snprintf(name, namelen, "%s", o->net);
	if (dnn_checkpoint_read_info(path, &info, 1, err, errlen) != 0)
		return 1;
	if (!info.net_text) { /* version 1: the net comes from --net and --input, as before */
		dnn_ckpt_free_names(&info);
		return open_v1_net(g, o, info.version, err, errlen);
	}
	char src[300], perr[512];
	snprintf(src, sizeof(src), "%s (its net)", path);
	if (dnn_graph_parse(g, info.net_text, src, perr, sizeof(perr)) != 0) {
		snprintf(err, errlen, "%s", perr);
		dnn_ckpt_free_names(&info);
		return 1;
	}
	if (name && namelen && !o->net_set)
		net_name_of(info.net_text, name, namelen);
	dnn_ckpt_free_names(&info);
	const dnn_node *in = &g->nodes[0];
	int rc = 0;
	if (o->input && (o->input != in->H || o->input != in->W)) {
		snprintf(err, errlen, "--input %d: %s was trained at %dx%d (leave --input out: the checkpoint carries its net)",
			 o->input, path, in->H, in->W);
		rc = 2;
	} else if (o->net_set)
		rc = check_given_net(g, o, err, errlen);
	if (rc != 0)
		dnn_graph_free(g);
	return rc;
}

/* A version-1 checkpoint's net (--net's) once every rewrite is made: the structure hash it stored. */
static int check_v1_net(const dnn_graph *g, const dnn_train_opts *o)
{
	char err[1024];
	dnn_ckpt_meta info;
	if (dnn_checkpoint_read_info(o->checkpoint_in, &info, 0, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	int rc = info.net_text ? 0 : dnn_ckpt_check_net(g, o->net, o->checkpoint_in, &info, NULL, err, sizeof(err));
	dnn_ckpt_free_names(&info);
	if (rc != 0)
		fprintf(stderr, "error: %s\n", err);
	return rc;
}

/* dnn_ckpt_open_net, then an image folder's classes: the exit status (message printed). */
static int open_graph(dnn_graph *g, const dnn_train_opts *o, const char *data_dir)
{
	char err[2600];
	int rc = dnn_ckpt_open_net(g, o, NULL, 0, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "error: %s\n", err);
		return rc;
	}
	/* An image folder's classes (a mismatch with the checkpoint is dnn_model_load's to report). */
	if (dnn_data_prepare_graph(g, 0, data_dir, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		dnn_graph_free(g);
		return 1;
	}
	return 0;
}

int dnn_ckpt_open_graph_classes(dnn_graph *g, const dnn_train_opts *o, dnn_ckpt_meta *meta)
{
	int rc = open_graph(g, o, NULL);
	if (rc != 0)
		return rc;
	char err[1024];
	if (dnn_checkpoint_read_classes(o->checkpoint_in, meta, err, sizeof(err)) != 0 ||
	    (meta->nclasses > 0 && dnn_graph_set_classes(g, (int)meta->nclasses, err, sizeof(err)) != 0)) {
		fprintf(stderr, "error: %s\n", err);
		dnn_graph_free(g);
		return 1;
	}
	if ((rc = check_v1_net(g, o)) != 0) {
		dnn_ckpt_free_names(meta);
		dnn_graph_free(g);
	}
	return rc;
}

int dnn_ckpt_open_graph(dnn_graph *g, const dnn_train_opts *o, const char *data_dir)
{
	int rc = open_graph(g, o, data_dir);
	if (rc == 0 && (rc = check_v1_net(g, o)) != 0)
		dnn_graph_free(g);
	return rc;
}
