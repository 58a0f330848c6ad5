/* onnx_emit.h — the ONNX export as the op descriptors see it (op.h export_onnx).
 *
 * Each op writes its own ONNX node(s) in graph/ops/<op>.c, next to its shape inference and its
 * tasks. graph/ knows nothing of protobuf: it writes through an abstract emitter, which
 * runtime/onnx_export.c implements with protobuf-c (and then wraps the nodes and initializers in
 * a model and writes the file). dnn_onnx_emit_net walks the net in topological order and calls
 * every node's export_onnx.
 *
 * The exported graph is the net in eval mode: input DNN_ONNX_INPUT (float32 N x C x H x W pixel
 * values 0-255) normalised by the input node, one or more ONNX nodes per net node, named after
 * it, and DNN_ONNX_OUTPUT (the class probabilities) written by the loss node. Values are 4-D
 * (N x C x H x W) or 2-D (N x C, after a dense layer); dnn_onnx_as4d / dnn_onnx_as2d reshape
 * where an op needs the other rank.
 *
 * Out of memory inside the emitter is recorded by the emitter (the runtime checks it once at
 * the end): its functions then return NULL and accept NULL arguments, so an export function
 * need not check each call. An export function returns -1 only for a model it cannot express
 * (err written: dnn_onnx_fail).
 */
#ifndef DNN_ONNX_EMIT_H
#define DNN_ONNX_EMIT_H
#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "model.h"

#define DNN_ONNX_INPUT "pixels"
#define DNN_ONNX_OUTPUT "probabilities"

typedef struct dnn_onnx_node dnn_onnx_node; /* the emitter's node (opaque here) */

/* What runtime/onnx_export.c implements. Strings passed in must outlive the export (names made
 * by `name`, or literals); the emitter keeps pointers to them. */
typedef struct {
	void *impl;
	/* A node: op type (ONNX operator), node name, inputs and outputs (value names). */
	dnn_onnx_node *(*node)(void *impl, const char *op_type, const char *name, int nin, const char *const *in,
			       int nout, const char *const *out);
	void (*attr_int)(void *impl, dnn_onnx_node *nd, const char *key, int64_t v);
	void (*attr_float)(void *impl, dnn_onnx_node *nd, const char *key, float v);
	void (*attr_ints)(void *impl, dnn_onnx_node *nd, const char *key, int n, const int64_t *v);
	/* An initializer (a constant tensor: float32, or int64 for shapes) of dims[0..ndims)
	 * elements copied from v; returns its name (`name`), NULL when out of memory. */
	const char *(*init_float)(void *impl, const char *name, int ndims, const int64_t *dims, const float *v);
	const char *(*init_int64)(void *impl, const char *name, int ndims, const int64_t *dims, const int64_t *v);
	/* A fresh string (a value or node name) that lives as long as the export; NULL when out of
	 * memory. */
	const char *(*name)(void *impl, const char *s);
} dnn_onnx_emitter;

/* The ONNX value holding a node's output. */
typedef struct {
	const char *val; // its name
	const char *v4;  // for a 2-D value: the same as N x C x 1 x 1, once made
	int rank;        // 2 (N x C) or 4 (N x C x H x W)
} dnn_onnx_value;

/* What an op's export_onnx is given: the model (eval-mode state on the host) and every node's
 * value so far. export_onnx(x, i) writes node i's ONNX nodes and sets x->v[i]; the walk presets
 * it to {node name, rank 4}. */
typedef struct dnn_onnx_ctx {
	const dnn_onnx_emitter *e;
	const dnn_model *m;
	const dnn_graph *g;
	dnn_onnx_value *v; // per node
	char *err;
	size_t errlen;
} dnn_onnx_ctx;

/* Export every node of m's net through e, in topological order. 0, or -1 with one line in err:
 * "node 'NAME' ...: why" (an op without export_onnx, a parameter of the wrong size). */
int dnn_onnx_emit_net(const dnn_model *m, const dnn_onnx_emitter *e, char *err, size_t errlen);

/* ---------------------------------------------------------------- helpers for export_onnx */
/* A node with one output (most ops); returns it for attributes, NULL when out of memory. */
dnn_onnx_node *dnn_onnx_node1(dnn_onnx_ctx *x, const char *op_type, const char *name, int nin,
			      const char *const *in, const char *out);
void dnn_onnx_attr_int(dnn_onnx_ctx *x, dnn_onnx_node *nd, const char *key, int64_t v);
void dnn_onnx_attr_float(dnn_onnx_ctx *x, dnn_onnx_node *nd, const char *key, float v);
/* An ints attribute of n values alternating a, b (a, b, a, b...: kernel_shape, strides, pads). */
void dnn_onnx_attr_ints2(dnn_onnx_ctx *x, dnn_onnx_node *nd, const char *key, int n, int64_t a, int64_t b);
/* A fresh name "<node i's name><suffix>" (e.g. ".scaled"). */
const char *dnn_onnx_name(dnn_onnx_ctx *x, int i, const char *suffix);
/* A float32 initializer named `name`; returns its name. */
const char *dnn_onnx_init(dnn_onnx_ctx *x, const char *name, int ndims, const int64_t *dims, const float *v);
/* Parameter `slot` of node i (op.h param_slots) as an initializer of the given dims, named as the
 * parameter; NULL with err set ("node 'NAME': parameter 'SLOT' ...") when the node has no such
 * tensor or its size is not the product of dims. */
const char *dnn_onnx_param(dnn_onnx_ctx *x, int i, int slot, int ndims, const int64_t *dims);
/* Block k of node i's running statistics (op.h running_blocks: C floats each, C = the node's
 * channels) as a 1-D initializer named "<node>.running_<block name>"; NULL with err set when the
 * model holds no such statistics (m->running_n[i] is not running_blocks x C). */
const char *dnn_onnx_running(dnn_onnx_ctx *x, int i, int k);
/* Node j's output as a 4-D value (a Reshape of a 2-D one to N x C x 1 x 1, made once) or a 2-D
 * one (a Flatten of a 4-D one). */
const char *dnn_onnx_as4d(dnn_onnx_ctx *x, int j);
const char *dnn_onnx_as2d(dnn_onnx_ctx *x, int j);
/* Export of an op applied element-wise to its one input: op_type(input 0) of the same rank. */
int dnn_onnx_unary(dnn_onnx_ctx *x, int i, const char *op_type);
/* "node 'NAME': message" into x->err; returns -1. */
int dnn_onnx_fail(dnn_onnx_ctx *x, int i, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#endif
