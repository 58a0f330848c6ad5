/* softmax_xent.c — the loss: `softmax_xent NAME LOGITS`, softmax + cross-entropy over the
 * classes; its forward task also writes dlogits and the chunk's loss sum and correct count.
 * Kernels and codelets: codelets/softmax_xent.{c,h}. */
#include "onnx_emit.h"
#include "op.h"
#include "softmax_xent.h"

static int infer(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	const dnn_node *in = &g->nodes[nd->inputs[0]];
	if (in->H != 1 || in->W != 1)
		return dnn_op_fail(err, errlen, g->source, nd->line,
				   "%s: the loss needs a flat input (C x 1 x 1, e.g. a dense layer), but %s is %dx%dx%d",
				   nd->name, in->name, in->C, in->H, in->W);
	if (in->C < 2)
		return dnn_op_fail(err, errlen, g->source, nd->line, "%s: the loss needs at least 2 classes, got %d",
				   nd->name, in->C);
	nd->C = 1, nd->H = 1, nd->W = 1;
	nd->params = 0;
	nd->flops = 5.0 * in->C;
	g->classes = in->C;
	return 0;
}

static int forward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	dnn_softmax_xent_args a = {.N = ctx->n, .CLS = ctx->g->classes};
	size_t k = (size_t)ctx->slot * ctx->p->nchunks + ctx->c;
	DNN_OP_SUBMIT(ctx, dnn_insert_softmax_xent(ctx->opts, &a, dnn_op_out(ctx, nd->inputs[0]), ctx->p->labels[k],
						   dnn_op_dy(ctx, nd->inputs[0]), ctx->p->stats[k]));
	return 0;
}

/* Eval mode: the class probabilities, the model's output. */
static int export_onnx(dnn_onnx_ctx *x, int i)
{
	const dnn_node *nd = &x->g->nodes[i];
	const char *in = dnn_onnx_as2d(x, nd->inputs[0]);
	dnn_onnx_attr_int(x, dnn_onnx_node1(x, "Softmax", nd->name, 1, &in, DNN_ONNX_OUTPUT), "axis", 1);
	x->v[i].val = DNN_ONNX_OUTPUT;
	x->v[i].rank = 2;
	return 0;
}

const dnn_op_desc dnn_op_softmax_xent = {
	.name = "softmax_xent", .min_inputs = 1, .max_inputs = 1, .infer = infer,
	.forward = forward, /* backward: dlogits was written by the forward task */
	.export_onnx = export_onnx,
};
