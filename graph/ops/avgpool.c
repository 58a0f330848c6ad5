/* avgpool.c — the global average pool op: `avgpool NAME IN` (C x H x W -> C x 1 x 1).
 * Kernels and codelets: codelets/avgpool.{c,h}. */
#include "avgpool.h"
#include "onnx_emit.h"
#include "op.h"

static int infer(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	(void)err, (void)errlen;
	const dnn_node *in = &g->nodes[nd->inputs[0]];
	nd->C = in->C, nd->H = 1, nd->W = 1;
	nd->params = 0;
	nd->flops = (double)in->C * in->H * in->W;
	return 0;
}

static int forward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i], *in = &ctx->g->nodes[nd->inputs[0]];
	dnn_avgpool_args a = {.N = ctx->n, .C = in->C, .HW = in->H * in->W};
	DNN_OP_SUBMIT(ctx, dnn_insert_avgpool_fwd(ctx->opts, &a, dnn_op_out(ctx, nd->inputs[0]), dnn_op_out(ctx, i)));
	return 0;
}

static int backward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i], *in = &ctx->g->nodes[nd->inputs[0]];
	const int i0 = nd->inputs[0];
	dnn_avgpool_args a = {.N = ctx->n, .C = in->C, .HW = in->H * in->W, .accumulate_dx = dnn_op_take_dx(ctx, i0)};
	if (i0 == 0)
		return 0;
	DNN_OP_SUBMIT(ctx, dnn_insert_avgpool_bwd(ctx->opts, &a, dnn_op_dy(ctx, i), dnn_op_dy(ctx, i0)));
	return 0;
}

static int export_onnx(dnn_onnx_ctx *x, int i)
{
	const dnn_node *nd = &x->g->nodes[i];
	const char *in = dnn_onnx_as4d(x, nd->inputs[0]);
	dnn_onnx_node1(x, "GlobalAveragePool", nd->name, 1, &in, nd->name);
	return 0;
}

const dnn_op_desc dnn_op_avgpool = {
	.name = "avgpool", .min_inputs = 1, .max_inputs = 1, .infer = infer, .forward = forward, .backward = backward,
	.export_onnx = export_onnx,
	.image_only = 1,
};
