/* maxpool.c — the maxpool op: `maxpool NAME IN k=K [stride=K] [pad=0]`.
 * Kernels and codelets: codelets/maxpool.{c,h}. A maxpool whose input is a relu fused into it
 * (fuse.h dnn_fuse_relu_pool_partner) reads the relu's input and applies the relu itself (a->relu). */
#include <errno.h>

#include "fuse.h"
#include "maxpool.h"
#include "onnx_emit.h"
#include "op.h"

static const dnn_op_key keys[] = {DNN_KEY_INT("k", 1, DNN_MAX_KERNEL, k),
				  DNN_KEY_INT("stride", 1, DNN_MAX_STRIDE, stride),
				  DNN_KEY_INT("pad", 0, DNN_MAX_KERNEL, pad)};

static void defaults(dnn_node *nd) { nd->stride = 0; /* = k, set by infer */ }

static int check(const dnn_node *nd, const char *src, char *err, size_t errlen)
{
	if (nd->k == 0)
		return dnn_op_fail(err, errlen, src, nd->line, "%s: maxpool needs k=N", nd->name);
	return 0;
}

static int infer(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	const dnn_node *in = &g->nodes[nd->inputs[0]];
	long long C = in->C, H = in->H, W = in->W;
	if (nd->stride == 0)
		nd->stride = nd->k;
	if (nd->pad * 2 > nd->k)
		return dnn_op_fail(err, errlen, g->source, nd->line, "%s: pad=%d must be at most half of k=%d", nd->name,
				   nd->pad, nd->k);
	long long P = (H + 2LL * nd->pad - nd->k) / nd->stride + 1;
	long long Q = (W + 2LL * nd->pad - nd->k) / nd->stride + 1;
	if (H + 2LL * nd->pad < nd->k || W + 2LL * nd->pad < nd->k || P < 1 || Q < 1)
		return dnn_op_fail(err, errlen, g->source, nd->line, "%s: window %d does not fit its %lldx%lld input",
				   nd->name, nd->k, H, W);
	nd->C = (int)C, nd->H = (int)P, nd->W = (int)Q;
	nd->params = 0;
	nd->flops = (double)C * P * Q * nd->k * nd->k;
	return 0;
}

/* cuDNN describes x and y with int sizes: one chunk's input (the larger) must hold at most
 * INT_MAX elements (dnn_maxpool_args_finish refuses more). Checked at plan time. */
static int check_chunk(const dnn_graph *g, const dnn_node *nd, int n, char *err, size_t errlen)
{
	return dnn_op_check_int_elems(g, nd, "input", &g->nodes[nd->inputs[0]], n, err, errlen);
}

/* The chunk's pooling arguments; -EINVAL when dnn_maxpool_args_finish refuses them (not after
 * infer() and check_chunk() passed). */
static int pool_args(const dnn_op_ctx *ctx, const dnn_node *nd, dnn_maxpool_args *a)
{
	const dnn_node *in = &ctx->g->nodes[nd->inputs[0]];
	*a = (dnn_maxpool_args){.N = ctx->n, .C = in->C, .H = in->H, .W = in->W, .k = nd->k, .stride = nd->stride,
				.pad = nd->pad};
	return dnn_maxpool_args_finish(a) == 0 ? 0 : -EINVAL;
}

/* The node whose output the pool reads: its input, or a fused relu's input. */
static int pool_source(const dnn_op_ctx *ctx, const dnn_node *nd, int i, dnn_maxpool_args *a)
{
	const int relu = dnn_fuse_relu_pool_partner(ctx->p, i);
	a->relu = relu >= 0;
	return relu >= 0 ? ctx->g->nodes[relu].inputs[0] : nd->inputs[0];
}

static int forward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	dnn_maxpool_args a;
	if (pool_args(ctx, nd, &a) != 0)
		return -EINVAL;
	const int i0 = pool_source(ctx, nd, i, &a);
	DNN_OP_SUBMIT(ctx, dnn_insert_maxpool_fwd(ctx->opts, &a, dnn_op_out(ctx, i0), dnn_op_out(ctx, i)));
	return 0;
}

static int backward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	dnn_maxpool_args a;
	if (pool_args(ctx, nd, &a) != 0)
		return -EINVAL;
	const int i0 = pool_source(ctx, nd, i, &a);
	a.accumulate_dx = dnn_op_take_dx(ctx, i0);
	if (i0 == 0)
		return 0;
	DNN_OP_SUBMIT(ctx, dnn_insert_maxpool_bwd(ctx->opts, &a, dnn_op_out(ctx, i0), dnn_op_out(ctx, i), dnn_op_dy(ctx, i),
						  dnn_op_dy(ctx, i0)));
	return 0;
}

static int export_onnx(dnn_onnx_ctx *x, int i)
{
	const dnn_node *nd = &x->g->nodes[i];
	const char *in = dnn_onnx_as4d(x, nd->inputs[0]);
	dnn_onnx_node *n = dnn_onnx_node1(x, "MaxPool", nd->name, 1, &in, nd->name);
	dnn_onnx_attr_ints2(x, n, "kernel_shape", 2, nd->k, nd->k);
	dnn_onnx_attr_ints2(x, n, "strides", 2, nd->stride, nd->stride);
	dnn_onnx_attr_ints2(x, n, "pads", 4, nd->pad, nd->pad);
	return 0;
}

const dnn_op_desc dnn_op_maxpool = {
	.name = "maxpool", .min_inputs = 1, .max_inputs = 1, .keys = keys, .nkeys = 3, .defaults = defaults,
	.check = check, .infer = infer, .check_chunk = check_chunk, .forward = forward, .backward = backward,
	.export_onnx = export_onnx,
	.image_only = 1,
};
