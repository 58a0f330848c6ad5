/* relu.c — the relu op: `relu NAME IN`. Kernels and codelets: codelets/relu.{c,h}. A relu that
 * is a batchnorm's only consumer runs inside the batchnorm's tasks, and one whose only consumer is
 * a maxpool inside the maxpool's (fuse.h): no task of its own. Under --precision bf16 its output
 * may be stored in bf16 (bf16_out below). */
#include "fuse.h"
#include "onnx_emit.h"
#include "op.h"
#include "relu.h"

static int forward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	if (dnn_fuse_bn_relu_partner(ctx->p, i) >= 0 || dnn_fuse_relu_pool_partner(ctx->p, i) >= 0)
		return 0; /* done by its batchnorm's or its maxpool's fused task */
	dnn_relu_args a = {.n = (long)ctx->n * nd->C * nd->H * nd->W, .y_bf16 = dnn_op_out_bf16(ctx, i)};
	DNN_OP_SUBMIT(ctx, dnn_insert_relu_fwd(ctx->opts, &a, dnn_op_out(ctx, nd->inputs[0]), dnn_op_out(ctx, i)));
	return 0;
}

static int backward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const int i0 = nd->inputs[0];
	if (dnn_fuse_relu_pool_partner(ctx->p, i) >= 0)
		return 0; /* in its maxpool's backward, which wrote i0's gradient */
	const int acc = dnn_op_take_dx(ctx, i0);
	if (i0 == 0 || dnn_fuse_bn_relu_partner(ctx->p, i) >= 0)
		return 0; /* no gradient for the net's input; or in its batchnorm's fused backward */
	dnn_relu_args a = {.n = (long)ctx->n * nd->C * nd->H * nd->W, .accumulate_dx = acc,
			   .y_bf16 = dnn_op_out_bf16(ctx, i)};
	DNN_OP_SUBMIT(ctx, dnn_insert_relu_bwd(ctx->opts, &a, dnn_op_out(ctx, i), dnn_op_dy(ctx, i), dnn_op_dy(ctx, i0)));
	return 0;
}

/* bf16 activation storage (model.h y_bf16): the relu's own tasks write y in bf16 and read their mask from it;
 * so do its batchnorm's fused tasks (train, eval, --batchnorm global), except at fusion level 3 where the conv
 * after applies the batchnorm and relu itself (no y stored; with --batchnorm global, known only later, the plan
 * falls back to level 2 and y stays fp32). A relu inside its maxpool's task: fp32. */
static int bf16_out(const dnn_plan *p, int i)
{
	const int b = dnn_fuse_bn_relu_partner(p, i);
	if (b >= 0)
		return p->bn_apply_conv[b] < 0;
	return dnn_fuse_relu_pool_partner(p, i) < 0;
}

static int export_onnx(dnn_onnx_ctx *x, int i) { return dnn_onnx_unary(x, i, "Relu"); }

const dnn_op_desc dnn_op_relu = {
	.name = "relu", .min_inputs = 1, .max_inputs = 1, .infer = dnn_op_infer_same_shape,
	.forward = forward, .backward = backward, .export_onnx = export_onnx, .bf16_out = bf16_out,
};
