/* onnx_export.c — `starpu_anp export`: a checkpoint's eval-mode net as a standard ONNX model
 * (see onnx_export.h). The protobuf is built with protobuf-c from the onnx.proto schema of
 * third_party/onnx/ (compiled at build time: CMakeLists.txt); nothing here knows the wire format.
 *
 * The model: input "pixels" (float32 N x C x H x W, pixel values 0-255 of the centre crop, as
 * load_images.h makes it), the input normalisation as Mul + Sub, then one ONNX node per net
 * node (Flatten / Reshape where the ranks need it), and "probabilities" (Softmax) at the end.
 * What each net node becomes is its op descriptor's (graph/ops/<op>.c export_onnx, through the
 * emitter of graph/onnx_emit.h); this file implements that emitter over protobuf-c, wraps the
 * nodes in a model with its metadata, and writes the file. */
#include "onnx_export.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "errline.h"
#include "load_images.h"
#include "model_ckpt.h"
#include "onnx.pb-c.h"
#include "onnx_emit.h"
#include "progress.h"

#define OPSET 17
#define IR_VERSION 8 /* the IR of opset 17 (ONNX 1.12) */

/* ---------------------------------------------------------------- an arena for the messages */
typedef struct {
	void **ptrs;
	size_t n, cap;
	int oom;
	Onnx__NodeProto **nodes;
	size_t nnodes, capnodes;
	Onnx__TensorProto **inits;
	size_t ninits, capinits;
} ox;

static void *ar(ox *x, size_t n)
{
	if (x->oom)
		return NULL;
	if (x->n == x->cap) {
		size_t nc = x->cap ? 2 * x->cap : 256;
		void **np = realloc(x->ptrs, nc * sizeof(void *));
		if (!np) {
			x->oom = 1;
			return NULL;
		}
		x->ptrs = np, x->cap = nc;
	}
	void *p = calloc(1, n ? n : 1);
	if (!p) {
		x->oom = 1;
		return NULL;
	}
	return x->ptrs[x->n++] = p;
}

static char *str(ox *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *str(ox *x, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	char *s = n >= 0 ? ar(x, (size_t)n + 1) : NULL;
	if (!s)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

static void ar_free(ox *x)
{
	for (size_t i = 0; i < x->n; i++)
		free(x->ptrs[i]);
	free(x->ptrs);
	free(x->nodes);
	free(x->inits);
}

/* Append p to a growable array of pointers (arr, n, cap); 0 or -1 (out of memory). */
static int push(ox *x, void ***arr, size_t *n, size_t *cap, void *p)
{
	if (!p)
		return -1;
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		void **np = realloc(*arr, nc * sizeof(void *));
		if (!np) {
			x->oom = 1;
			return -1;
		}
		*arr = np, *cap = nc;
	}
	(*arr)[(*n)++] = p;
	return 0;
}

/* ---------------------------------------------------------------- nodes, attributes, tensors */
static Onnx__NodeProto *node(ox *x, const char *op, const char *name, int nin, const char *const *in, int nout,
			     const char *const *out)
{
	Onnx__NodeProto *nd = ar(x, sizeof(*nd));
	char **ins = ar(x, sizeof(char *) * (size_t)(nin > 0 ? nin : 1));
	char **outs = ar(x, sizeof(char *) * (size_t)(nout > 0 ? nout : 1));
	if (!nd || !ins || !outs)
		return NULL;
	onnx__node_proto__init(nd);
	for (int i = 0; i < nin; i++)
		ins[i] = (char *)in[i];
	for (int i = 0; i < nout; i++)
		outs[i] = (char *)out[i];
	nd->n_input = (size_t)nin, nd->input = ins;
	nd->n_output = (size_t)nout, nd->output = outs;
	nd->op_type = (char *)op;
	nd->name = (char *)name;
	if (push(x, (void ***)&x->nodes, &x->nnodes, &x->capnodes, nd) != 0)
		return NULL;
	return nd;
}

static Onnx__AttributeProto *attr(ox *x, Onnx__NodeProto *nd, const char *name, Onnx__AttributeProto__AttributeType t)
{
	if (!nd)
		return NULL;
	Onnx__AttributeProto *a = ar(x, sizeof(*a));
	Onnx__AttributeProto **list = ar(x, sizeof(*list) * (nd->n_attribute + 1));
	if (!a || !list)
		return NULL;
	onnx__attribute_proto__init(a);
	a->name = (char *)name;
	a->has_type = 1, a->type = t;
	/* The old list stays in the arena; attributes are few. */
	for (size_t i = 0; i < nd->n_attribute; i++)
		list[i] = nd->attribute[i];
	list[nd->n_attribute++] = a;
	nd->attribute = list;
	return a;
}

static void attr_int(ox *x, Onnx__NodeProto *nd, const char *name, int64_t v)
{
	Onnx__AttributeProto *a = attr(x, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
	if (a)
		a->has_i = 1, a->i = v;
}

static void attr_float(ox *x, Onnx__NodeProto *nd, const char *name, float v)
{
	Onnx__AttributeProto *a = attr(x, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
	if (a)
		a->has_f = 1, a->f = v;
}

static void attr_ints(ox *x, Onnx__NodeProto *nd, const char *name, int n, const int64_t *vals)
{
	Onnx__AttributeProto *a = attr(x, nd, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
	int64_t *v = a ? ar(x, sizeof(int64_t) * (size_t)(n > 0 ? n : 1)) : NULL;
	if (!v)
		return;
	for (int i = 0; i < n; i++)
		v[i] = vals[i];
	a->n_ints = (size_t)n, a->ints = v;
}

/* An initializer (float32, or int64 when i64) with raw little-endian data; returns its name. */
static const char *tensor(ox *x, const char *name, const int64_t *dims, int ndims, const float *f, const int64_t *i64,
			  size_t n)
{
	Onnx__TensorProto *t = ar(x, sizeof(*t));
	int64_t *d = ar(x, sizeof(int64_t) * (size_t)(ndims ? ndims : 1));
	size_t esz = i64 ? 8 : 4;
	unsigned char *raw = ar(x, n * esz);
	if (!t || !d || !raw || !name)
		return NULL;
	onnx__tensor_proto__init(t);
	memcpy(d, dims, sizeof(int64_t) * (size_t)ndims);
	t->n_dims = (size_t)ndims, t->dims = d;
	t->has_data_type = 1;
	t->data_type = i64 ? ONNX__TENSOR_PROTO__DATA_TYPE__INT64 : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
	for (size_t k = 0; k < n; k++) { /* little-endian whatever the host */
		uint64_t u = 0;
		if (i64)
			u = (uint64_t)i64[k];
		else {
			uint32_t w;
			memcpy(&w, &f[k], 4);
			u = w;
		}
		for (size_t b = 0; b < esz; b++)
			raw[k * esz + b] = (unsigned char)(u >> (8 * b));
	}
	t->has_raw_data = 1, t->raw_data.len = n * esz, t->raw_data.data = raw;
	t->name = (char *)name;
	if (push(x, (void ***)&x->inits, &x->ninits, &x->capinits, t) != 0)
		return NULL;
	return name;
}

static Onnx__ValueInfoProto *value_info(ox *x, const char *name, int ndims, const int64_t *dims)
{
	Onnx__ValueInfoProto *v = ar(x, sizeof(*v));
	Onnx__TypeProto *tp = ar(x, sizeof(*tp));
	Onnx__TypeProto__Tensor *tt = ar(x, sizeof(*tt));
	Onnx__TensorShapeProto *sh = ar(x, sizeof(*sh));
	Onnx__TensorShapeProto__Dimension **dl = ar(x, sizeof(*dl) * (size_t)ndims);
	if (!v || !tp || !tt || !sh || !dl)
		return NULL;
	onnx__value_info_proto__init(v);
	onnx__type_proto__init(tp);
	onnx__type_proto__tensor__init(tt);
	onnx__tensor_shape_proto__init(sh);
	for (int i = 0; i < ndims; i++) {
		Onnx__TensorShapeProto__Dimension *d = ar(x, sizeof(*d));
		if (!d)
			return NULL;
		onnx__tensor_shape_proto__dimension__init(d);
		if (dims[i] < 0) { /* the batch: any size */
			d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
			d->dim_param = "N";
		} else {
			d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
			d->dim_value = dims[i];
		}
		dl[i] = d;
	}
	sh->n_dim = (size_t)ndims, sh->dim = dl;
	tt->has_elem_type = 1, tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, tt->shape = sh;
	tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, tp->tensor_type = tt;
	v->name = (char *)name, v->type = tp;
	return v;
}

static Onnx__StringStringEntryProto *prop(ox *x, const char *key, const char *value)
{
	Onnx__StringStringEntryProto *p = ar(x, sizeof(*p));
	if (!p || !value)
		return NULL;
	onnx__string_string_entry_proto__init(p);
	p->key = (char *)key, p->value = (char *)value;
	return p;
}

/* JSON string list of the class names (or class0, class1, ...). */
static char *json_names(ox *x, char *const *names, int n)
{
	size_t cap = 3;
	for (int i = 0; i < n; i++)
		cap += 6 * (names ? strlen(names[i]) : 16) + 24;
	char *s = ar(x, cap);
	if (!s)
		return NULL;
	size_t o = 0;
	s[o++] = '[';
	for (int i = 0; i < n; i++) {
		if (i)
			s[o++] = ',', s[o++] = ' ';
		s[o++] = '"';
		if (!names)
			o += (size_t)snprintf(s + o, cap - o, "class%d", i);
		else
			for (const unsigned char *c = (const unsigned char *)names[i]; *c; c++) {
				if (*c == '"' || *c == '\\')
					s[o++] = '\\', s[o++] = (char)*c;
				else if (*c < 0x20)
					o += (size_t)snprintf(s + o, cap - o, "\\u%04x", *c);
				else
					s[o++] = (char)*c;
			}
		s[o++] = '"';
	}
	s[o++] = ']';
	s[o] = '\0';
	return s;
}

static char *float_list(ox *x, const float *v, int n)
{
	/* "%.9g" of a float is at most 15 characters ("-1.17549435e-38"), 16 with its comma */
	size_t cap = (size_t)n * 20 + 1;
	char *s = ar(x, cap);
	if (!s)
		return NULL;
	size_t o = 0;
	for (int i = 0; i < n && o < cap; i++)
		o += (size_t)snprintf(s + o, cap - o, "%s%.9g", i ? "," : "", (double)v[i]);
	return s;
}

/* ---------------------------------------------------------------- the emitter (onnx_emit.h) */
static dnn_onnx_node *em_node(void *impl, const char *op_type, const char *name, int nin, const char *const *in,
			      int nout, const char *const *out)
{
	return (dnn_onnx_node *)node(impl, op_type, name, nin, in, nout, out);
}

static void em_attr_int(void *impl, dnn_onnx_node *nd, const char *key, int64_t v)
{
	attr_int(impl, (Onnx__NodeProto *)nd, key, v);
}

static void em_attr_float(void *impl, dnn_onnx_node *nd, const char *key, float v)
{
	attr_float(impl, (Onnx__NodeProto *)nd, key, v);
}

static void em_attr_ints(void *impl, dnn_onnx_node *nd, const char *key, int n, const int64_t *v)
{
	attr_ints(impl, (Onnx__NodeProto *)nd, key, n, v);
}

static size_t numel(int ndims, const int64_t *dims)
{
	size_t n = 1;
	for (int k = 0; k < ndims; k++)
		n *= (size_t)dims[k];
	return n;
}

static const char *em_init_float(void *impl, const char *name, int ndims, const int64_t *dims, const float *v)
{
	return tensor(impl, name, dims, ndims, v, NULL, numel(ndims, dims));
}

static const char *em_init_int64(void *impl, const char *name, int ndims, const int64_t *dims, const int64_t *v)
{
	return tensor(impl, name, dims, ndims, NULL, v, numel(ndims, dims));
}

static const char *em_name(void *impl, const char *s) { return s ? str(impl, "%s", s) : NULL; }

/* ---------------------------------------------------------------- the model and the file */
/* The ModelProto around x's nodes and initializers: input, output, opset, metadata. NULL when
 * out of memory. */
static Onnx__ModelProto *model_proto(ox *x, const dnn_model *m, char *const *class_names)
{
	const dnn_graph *g = m->g;
	const dnn_node *in = &g->nodes[0];
	int64_t idims[4] = {-1, in->C, in->H, in->W}, odims[3] = {-1, g->classes, 0};
	int irank = 4, orank = 2;
	if (in->seq) { /* a language model: ids N x T (floats holding integers) or floats N x T x C; per-token output */
		idims[1] = in->H, idims[2] = in->C, irank = in->tokens ? 2 : 3;
		odims[1] = g->label_len, odims[2] = g->classes, orank = 3;
	}
	Onnx__ValueInfoProto *vin = value_info(x, DNN_ONNX_INPUT, irank, idims);
	Onnx__ValueInfoProto *vout = value_info(x, DNN_ONNX_OUTPUT, orank, odims);
	Onnx__ValueInfoProto **vins = ar(x, sizeof(*vins)), **vouts = ar(x, sizeof(*vouts));
	Onnx__GraphProto *gp = ar(x, sizeof(*gp));
	Onnx__ModelProto *mp = ar(x, sizeof(*mp));
	Onnx__OperatorSetIdProto *ops = ar(x, sizeof(*ops)), **opsl = ar(x, sizeof(*opsl));
	char *net_text = dnn_graph_to_text(g, NULL);
	char *net_copy = net_text ? str(x, "%s", net_text) : NULL;
	free(net_text);
	Onnx__StringStringEntryProto *props[6] = {
		prop(x, "class_names", json_names(x, class_names, g->classes)),
		prop(x, "input_mean", float_list(x, m->in_mean, in->C)),
		prop(x, "input_std", float_list(x, m->in_std, in->C)),
		prop(x, "short_side", str(x, "%d", dnn_image_short_side(in->H, in->W))),
		in->tokens ? prop(x, "input", str(x, "token ids: float32 N x %d (integers in [0, %d)); the output is each "
						      "position's next-token probabilities, N x %d x %d",
						  in->H, g->classes, in->H, g->classes))
		: in->seq ? prop(x, "input", str(x, "a sequence: float32 N x %d x %d", in->H, in->C))
			  : prop(x, "input", str(x, "pixels: float32 N x %d x %d x %d, %s values 0-255: resize the short side "
						   "to %d, crop the centre %dx%d; the normalisation is in the model",
						   in->C, in->H, in->W, in->C == 3 ? "RGB" : "grey",
						   dnn_image_short_side(in->H, in->W), in->H, in->W)),
		prop(x, "net", net_copy)};
	Onnx__StringStringEntryProto **propl = ar(x, sizeof(props));
	if (x->oom || !vin || !vout || !vins || !vouts || !gp || !mp || !ops || !opsl || !propl)
		return NULL;
	for (int k = 0; k < 6; k++)
		if (!props[k])
			return NULL;
	memcpy(propl, props, sizeof(props));
	vins[0] = vin, vouts[0] = vout;
	onnx__graph_proto__init(gp);
	gp->name = str(x, "%s", g->source);
	gp->n_node = x->nnodes, gp->node = x->nodes;
	gp->n_initializer = x->ninits, gp->initializer = x->inits;
	gp->n_input = 1, gp->input = vins;
	gp->n_output = 1, gp->output = vouts;
	onnx__operator_set_id_proto__init(ops);
	ops->domain = "", ops->has_version = 1, ops->version = OPSET;
	opsl[0] = ops;
	onnx__model_proto__init(mp);
	mp->has_ir_version = 1, mp->ir_version = IR_VERSION;
	mp->n_opset_import = 1, mp->opset_import = opsl;
	mp->producer_name = "starpu_anp";
	mp->producer_version = "0.1.0";
	mp->doc_string = "Eval-mode net exported from a starpu_anp checkpoint (starpu_anp export)";
	mp->graph = gp;
	mp->n_metadata_props = 6, mp->metadata_props = propl;
	return x->oom || !gp->name ? NULL : mp;
}

/* Atomically, as checkpoints: PATH.tmp.<pid>, fsync, rename. 0, or -1 with err. */
static int write_atomic(const char *path, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot create %s: %s", path, tmp, strerror(errno));
		return -1;
	}
	size_t done = 0;
	while (done < len) {
		ssize_t w = write(fd, buf + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	int bad = done != len || fsync(fd) != 0;
	int e = errno;
	bad |= close(fd) != 0;
	if (bad || rename(tmp, path) != 0) {
		snprintf(err, errlen, "%s: write failed: %s", path, strerror(bad ? e : errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

int dnn_onnx_export(const dnn_model *m, const char *path, char *const *class_names, char *err, size_t errlen,
		    dnn_onnx_stats *stats)
{
	ox x = {0};
	const dnn_onnx_emitter e = {.impl = &x, .node = em_node, .attr_int = em_attr_int, .attr_float = em_attr_float,
				    .attr_ints = em_attr_ints, .init_float = em_init_float, .init_int64 = em_init_int64,
				    .name = em_name};
	int rc = -1;
	uint8_t *buf = NULL;
	char detail[1024];
	Onnx__ModelProto *mp = NULL;
	if (dnn_onnx_emit_net(m, &e, detail, sizeof(detail)) != 0) {
		snprintf(err, errlen, "%s: cannot export: %s", path, detail);
		goto out;
	}
	if (!(mp = model_proto(&x, m, class_names))) {
		snprintf(err, errlen, "%s: out of memory building the ONNX model", path);
		goto out;
	}
	size_t len = onnx__model_proto__get_packed_size(mp);
	buf = malloc(len ? len : 1);
	if (!buf) {
		snprintf(err, errlen, "%s: out of memory for %zu bytes of ONNX model", path, len);
		goto out;
	}
	onnx__model_proto__pack(mp, buf);
	if (write_atomic(path, buf, len, err, errlen) != 0)
		goto out;
	if (stats) {
		stats->nodes = (int)x.nnodes;
		stats->initializers = (int)x.ninits;
		stats->bytes = len;
		stats->opset = OPSET;
	}
	rc = 0;
out:
	free(buf);
	ar_free(&x);
	return rc;
}

/* ---------------------------------------------------------------- the command */
int dnn_cmd_export(const dnn_train_opts *o, const char *onnx_path)
{
	char err[2048];
	double t0 = dnn_now();
	dnn_graph g;
	dnn_ckpt_meta meta;
	int rc = dnn_ckpt_open_graph_classes(&g, o, &meta);
	if (rc != 0)
		return rc;
	dnn_model m;
	if (dnn_model_create(&m, &g, o->seed, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		dnn_ckpt_free_names(&meta), dnn_graph_free(&g);
		return 1;
	}
	m.class_names = meta.class_names;
	dnn_onnx_stats st = {0};
	rc = 1;
	if (dnn_model_load(&m, o->checkpoint_in, NULL, NULL, NULL, err, sizeof(err)) != 0 ||
	    dnn_model_sync_to_host(&m, err, sizeof(err)) != 0)
		fprintf(stderr, "error: %s\n", err);
	else if (dnn_onnx_export(&m, onnx_path, meta.class_names, err, sizeof(err), &st) != 0)
		fprintf(stderr, "error: %s\n", err);
	else
		rc = 0;
	if (rc == 0) {
		printf("result: cmd=export net=%s checkpoint=%s onnx=%s opset=%d onnx_nodes=%d initializers=%d "
		       "params=%lld classes=%d bytes=%zu wall_s=%.2f\n",
		       o->net, o->checkpoint_in, onnx_path, st.opset, st.nodes, st.initializers, dnn_graph_params(&g),
		       g.classes, st.bytes, dnn_now() - t0);
		fflush(stdout);
	}
	dnn_model_destroy(&m);
	dnn_ckpt_free_names(&meta);
	dnn_graph_free(&g);
	return rc;
}
