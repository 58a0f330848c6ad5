/* onnx_emit.c — the walk over the net that calls each op's export_onnx, and the helpers the op
 * files share (onnx_emit.h). Nothing here knows protobuf: every node and initializer goes
 * through the emitter that runtime/onnx_export.c implements. */
#include "onnx_emit.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "op.h"

int dnn_onnx_emit_net(const dnn_model *m, const dnn_onnx_emitter *e, char *err, size_t errlen)
{
	const dnn_graph *g = m->g;
	dnn_onnx_ctx x = {.e = e, .m = m, .g = g, .err = err, .errlen = errlen};
	x.v = calloc((size_t)g->nnodes, sizeof(*x.v));
	if (!x.v) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	int rc = 0;
	for (int i = 0; i < g->nnodes && rc == 0; i++) {
		const dnn_node *nd = &g->nodes[i];
		const dnn_op_desc *d = dnn_op_get(nd->op);
		x.v[i] = (dnn_onnx_value){.val = nd->name, .rank = 4};
		if (!d->export_onnx)
			rc = dnn_onnx_fail(&x, i, "op %s has no ONNX equivalent in this exporter", d->name);
		else
			rc = d->export_onnx(&x, i);
	}
	free(x.v);
	return rc;
}

int dnn_onnx_fail(dnn_onnx_ctx *x, int i, const char *fmt, ...)
{
	const dnn_node *nd = &x->g->nodes[i];
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(x->err, x->errlen, "node '%s' (%s line %d): %s", nd->name, x->g->source, nd->line, msg);
	return -1;
}

dnn_onnx_node *dnn_onnx_node1(dnn_onnx_ctx *x, const char *op_type, const char *name, int nin, const char *const *in,
			      const char *out)
{
	return x->e->node(x->e->impl, op_type, name, nin, in, 1, &out);
}

void dnn_onnx_attr_int(dnn_onnx_ctx *x, dnn_onnx_node *nd, const char *key, int64_t v)
{
	x->e->attr_int(x->e->impl, nd, key, v);
}

void dnn_onnx_attr_float(dnn_onnx_ctx *x, dnn_onnx_node *nd, const char *key, float v)
{
	x->e->attr_float(x->e->impl, nd, key, v);
}

void dnn_onnx_attr_ints2(dnn_onnx_ctx *x, dnn_onnx_node *nd, const char *key, int n, int64_t a, int64_t b)
{
	int64_t v[8];
	if (n > 8)
		n = 8;
	for (int k = 0; k < n; k++)
		v[k] = k % 2 ? b : a;
	x->e->attr_ints(x->e->impl, nd, key, n, v);
}

const char *dnn_onnx_name(dnn_onnx_ctx *x, int i, const char *suffix)
{
	char s[DNN_NAME_MAX + 160]; /* suffixes are short: ".running_<block>", ".shape4d", ... */
	snprintf(s, sizeof(s), "%s%s", x->g->nodes[i].name, suffix);
	return x->e->name(x->e->impl, s);
}

const char *dnn_onnx_init(dnn_onnx_ctx *x, const char *name, int ndims, const int64_t *dims, const float *v)
{
	return x->e->init_float(x->e->impl, name, ndims, dims, v);
}

static long long elems(int ndims, const int64_t *dims)
{
	long long n = 1;
	for (int k = 0; k < ndims; k++)
		n *= dims[k];
	return n;
}

const char *dnn_onnx_param(dnn_onnx_ctx *x, int i, int slot, int ndims, const int64_t *dims)
{
	const dnn_op_desc *d = dnn_op_get(x->g->nodes[i].op);
	const char *what = slot >= 0 && slot < d->nparam_slots ? d->param_slots[slot].name : "?";
	const dnn_param *p = dnn_op_param(x->m, i, slot);
	const long long want = elems(ndims, dims);
	if (!p || p->n != want) {
		dnn_onnx_fail(x, i, "parameter '%s' has %ld values, the ONNX node needs %lld", what, p ? p->n : 0L, want);
		return NULL;
	}
	return dnn_onnx_init(x, p->name, ndims, dims, p->w);
}

const char *dnn_onnx_running(dnn_onnx_ctx *x, int i, int k)
{
	const dnn_node *nd = &x->g->nodes[i];
	const dnn_op_desc *d = dnn_op_get(nd->op);
	const dnn_model *m = x->m;
	if (k < 0 || k >= d->nrunning_blocks || !m->running[i] ||
	    m->running_n[i] != (size_t)d->nrunning_blocks * (size_t)nd->C) {
		dnn_onnx_fail(x, i, "no running statistics of %d blocks of %d channels (the model holds %zu floats)",
			      d->nrunning_blocks, nd->C, m->running[i] ? m->running_n[i] : 0);
		return NULL;
	}
	char suffix[80];
	snprintf(suffix, sizeof(suffix), ".running_%s", d->running_blocks[k]);
	int64_t dims[1] = {nd->C};
	return dnn_onnx_init(x, dnn_onnx_name(x, i, suffix), 1, dims, m->running[i] + (size_t)k * (size_t)nd->C);
}

const char *dnn_onnx_as4d(dnn_onnx_ctx *x, int j)
{
	dnn_onnx_value *o = &x->v[j];
	if (o->rank == 4)
		return o->val;
	if (o->v4)
		return o->v4;
	int64_t dims[1] = {4}, shape[4] = {0, x->g->nodes[j].C, 1, 1};
	const char *sname = x->e->init_int64(x->e->impl, dnn_onnx_name(x, j, ".shape4d"), 1, dims, shape);
	const char *out = dnn_onnx_name(x, j, ".4d");
	const char *in[2] = {o->val, sname};
	dnn_onnx_node1(x, "Reshape", dnn_onnx_name(x, j, ".reshape"), 2, in, out);
	return o->v4 = out;
}

const char *dnn_onnx_as2d(dnn_onnx_ctx *x, int j)
{
	const dnn_onnx_value *o = &x->v[j];
	if (o->rank == 2)
		return o->val;
	const char *out = dnn_onnx_name(x, j, ".flat");
	dnn_onnx_attr_int(x, dnn_onnx_node1(x, "Flatten", dnn_onnx_name(x, j, ".flatten"), 1, &o->val, out), "axis", 1);
	return out;
}

int dnn_onnx_unary(dnn_onnx_ctx *x, int i, const char *op_type)
{
	const dnn_node *nd = &x->g->nodes[i];
	const int i0 = nd->inputs[0];
	dnn_onnx_node1(x, op_type, nd->name, 1, &x->v[i0].val, nd->name);
	x->v[i].rank = x->v[i0].rank;
	return 0;
}
