/* dropout.c — the dropout op: `dropout NAME IN [p=0.5]`, inverted dropout in training, the
 * identity in eval mode. Its mask is drawn from (the run's seed, the global step, the sample's
 * position in the global batch), so it is the same whatever the chunks, workers or ranks, and
 * backward draws it again instead of storing it. Kernels and codelets: codelets/dropout.{c,h}. */
#include "dropout.h"
#include "onnx_emit.h"
#include "op.h"

#define RATE(nd) ((nd)->fattr[0]) /* key p */

static const dnn_op_key keys[] = {DNN_KEY_FLOAT("p", 0.0, 0.99, fattr[0])};

static void defaults(dnn_node *nd) { RATE(nd) = 0.5f; }

static dnn_dropout_args dropout_args(const dnn_op_ctx *ctx, const dnn_node *nd)
{
	return (dnn_dropout_args){.per_sample = (long)nd->C * nd->H * nd->W, .N = ctx->n, .train = ctx->p->train,
				  .p = RATE(nd), .seed = ctx->m->seed, .step = ctx->step, .sample0 = ctx->sample0};
}

static int forward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	dnn_dropout_args a = dropout_args(ctx, nd);
	DNN_OP_SUBMIT(ctx, dnn_insert_dropout_fwd(ctx->opts, &a, dnn_op_out(ctx, nd->inputs[0]), dnn_op_out(ctx, i)));
	return 0;
}

static int backward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const int i0 = nd->inputs[0];
	dnn_dropout_args a = dropout_args(ctx, nd);
	a.accumulate_dx = dnn_op_take_dx(ctx, i0);
	if (i0 == 0)
		return 0; /* dropout on the net's input: no gradient to give */
	DNN_OP_SUBMIT(ctx, dnn_insert_dropout_bwd(ctx->opts, &a, dnn_op_dy(ctx, i), dnn_op_dy(ctx, i0)));
	return 0;
}

/* Eval mode: the identity. */
static int export_onnx(dnn_onnx_ctx *x, int i) { return dnn_onnx_unary(x, i, "Identity"); }

const dnn_op_desc dnn_op_dropout = {
	.name = "dropout", .min_inputs = 1, .max_inputs = 1, .keys = keys, .nkeys = 1, .defaults = defaults,
	.infer = dnn_op_infer_same_shape, .forward = forward, .backward = backward, .export_onnx = export_onnx,
};
