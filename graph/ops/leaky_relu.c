/* leaky_relu.c — the leaky_relu op: `leaky_relu NAME IN [alpha=0.01]`, y = x for x > 0 and
 * alpha * x otherwise (alpha in [0, 1]). Kernels and codelets: codelets/leaky_relu.{c,h};
 * ONNX: LeakyRelu. */
#include "leaky_relu.h"
#include "onnx_emit.h"
#include "op.h"

#define ALPHA(nd) ((nd)->fattr[0]) /* key alpha */

static const dnn_op_key keys[] = {DNN_KEY_FLOAT("alpha", 0.0, 1.0, fattr[0])};

static void defaults(dnn_node *nd) { ALPHA(nd) = 0.01f; /* PyTorch's default negative_slope */ }

static int infer(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	dnn_op_infer_same_shape(g, nd, err, errlen);
	nd->flops = 2.0 * nd->C * nd->H * nd->W; /* a compare and a multiply */
	return 0;
}

static int forward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	dnn_leaky_relu_args a = {.n = (long)ctx->n * nd->C * nd->H * nd->W, .alpha = ALPHA(nd)};
	DNN_OP_SUBMIT(ctx, dnn_insert_leaky_relu_fwd(ctx->opts, &a, dnn_op_out(ctx, nd->inputs[0]), dnn_op_out(ctx, i)));
	return 0;
}

static int backward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const int i0 = nd->inputs[0];
	const int acc = dnn_op_take_dx(ctx, i0);
	if (i0 == 0)
		return 0; /* the net's input has no gradient */
	dnn_leaky_relu_args a = {.n = (long)ctx->n * nd->C * nd->H * nd->W, .alpha = ALPHA(nd), .accumulate_dx = acc};
	DNN_OP_SUBMIT(ctx, dnn_insert_leaky_relu_bwd(ctx->opts, &a, dnn_op_out(ctx, i), dnn_op_dy(ctx, i), dnn_op_dy(ctx, i0)));
	return 0;
}

static int export_onnx(dnn_onnx_ctx *x, int i)
{
	const dnn_node *nd = &x->g->nodes[i];
	const int i0 = nd->inputs[0];
	dnn_onnx_attr_float(x, dnn_onnx_node1(x, "LeakyRelu", nd->name, 1, &x->v[i0].val, nd->name), "alpha", ALPHA(nd));
	x->v[i].rank = x->v[i0].rank;
	return 0;
}

const dnn_op_desc dnn_op_leaky_relu = {
	.name = "leaky_relu", .min_inputs = 1, .max_inputs = 1, .keys = keys, .nkeys = 1, .defaults = defaults,
	.infer = infer, .forward = forward, .backward = backward, .export_onnx = export_onnx,
};
