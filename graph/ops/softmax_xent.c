/* softmax_xent.c — the loss: `softmax_xent NAME LOGITS`, softmax + cross-entropy over the
 * classes; its forward task also writes dlogits and the chunk's loss sum and correct count.
 * On a sequence of logits ([T][V], a language model) it is the per-token loss: T labels per
 * sample (g->label_len), each sample's loss the mean over its tokens.
 * Kernels and codelets: codelets/softmax_xent.{c,h}. */
#include "onnx_emit.h"
#include "op.h"
#include "softmax_xent.h"

static int infer(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	const dnn_node *in = &g->nodes[nd->inputs[0]];
	g->label_len = 1;
	if (in->seq) { /* per token: the logits of each of the T tokens */
		if (in->C < 2)
			return dnn_op_fail(err, errlen, g->source, nd->line,
					   "%s: the loss needs at least 2 classes (a vocabulary), got %d", nd->name, in->C);
		nd->C = 1, nd->H = 1, nd->W = 1;
		nd->params = 0;
		nd->flops = 5.0 * in->C * in->H;
		g->classes = in->C;
		g->label_len = in->H;
		return 0;
	}
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
	dnn_softmax_xent_args a = {.N = ctx->n, .CLS = ctx->g->classes, .T = ctx->g->label_len};
	size_t k = (size_t)ctx->slot * ctx->p->nchunks + ctx->c;
	DNN_OP_SUBMIT(ctx, dnn_insert_softmax_xent(ctx->opts, &a, dnn_op_out(ctx, nd->inputs[0]), ctx->p->labels[k],
						   dnn_op_dy(ctx, nd->inputs[0]), ctx->p->stats[k]));
	return 0;
}

/* Eval mode: the class probabilities, the model's output ([N, T, V] per token on a sequence). */
static int export_onnx(dnn_onnx_ctx *x, int i)
{
	const dnn_node *nd = &x->g->nodes[i];
	const int seq = x->g->nodes[nd->inputs[0]].seq;
	const char *in = seq ? x->v[nd->inputs[0]].val : dnn_onnx_as2d(x, nd->inputs[0]);
	dnn_onnx_attr_int(x, dnn_onnx_node1(x, "Softmax", nd->name, 1, &in, DNN_ONNX_OUTPUT), "axis", seq ? 2 : 1);
	x->v[i].val = DNN_ONNX_OUTPUT;
	x->v[i].rank = seq ? 3 : 2;
	return 0;
}

const dnn_op_desc dnn_op_softmax_xent = {
	.name = "softmax_xent", .min_inputs = 1, .max_inputs = 1, .infer = infer,
	.forward = forward, /* backward: dlogits was written by the forward task */
	.export_onnx = export_onnx,
};
