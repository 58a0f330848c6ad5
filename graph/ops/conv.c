/* conv.c — the conv op: `conv NAME IN out=K k=R [stride=1] [pad=0] [dilation=1] [bias=0]`.
 * Kernels and codelets: codelets/conv2d.{c,h}; a bias is a separate bias task, or part of the
 * conv's own tasks when fusion level 2 says so (fuse.h); at level 3 a conv may also compute the statistics of
 * the batchnorm after it, or apply the batchnorm (and relu) before it to its input (codelets/conv2d_bnfuse.h). */
#include <errno.h>
#include <stdio.h>

#include "bias.h"
#include "conv2d.h"
#include "conv2d_bnfuse.h"
#include "fuse.h"
#include "onnx_emit.h"
#include "op.h"

static const dnn_op_key keys[] = {
	DNN_KEY_INT("out", 1, DNN_MAX_CHANNELS, out),  DNN_KEY_INT("k", 1, DNN_MAX_KERNEL, k),
	DNN_KEY_INT("stride", 1, DNN_MAX_STRIDE, stride), DNN_KEY_INT("pad", 0, DNN_MAX_KERNEL, pad),
	DNN_KEY_INT("dilation", 1, DNN_MAX_KERNEL, dilation), DNN_KEY_INT("bias", 0, 1, bias),
};

static int check(const dnn_node *nd, const char *src, char *err, size_t errlen)
{
	if (nd->out == 0)
		return dnn_op_fail(err, errlen, src, nd->line, "%s: conv needs out=N", nd->name);
	if (nd->k == 0)
		return dnn_op_fail(err, errlen, src, nd->line, "%s: conv needs k=N", nd->name);
	return 0;
}

static int infer(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	const dnn_node *in = &g->nodes[nd->inputs[0]];
	long long C = in->C, H = in->H, W = in->W;
	long long eff = (long long)nd->dilation * (nd->k - 1) + 1;
	long long P = (H + 2LL * nd->pad - eff) / nd->stride + 1;
	long long Q = (W + 2LL * nd->pad - eff) / nd->stride + 1;
	if (H + 2LL * nd->pad < eff || W + 2LL * nd->pad < eff || P < 1 || Q < 1)
		return dnn_op_fail(err, errlen, g->source, nd->line,
				   "%s: kernel %d (dilation %d) does not fit its %lldx%lld input with pad %d", nd->name,
				   nd->k, nd->dilation, H, W, nd->pad);
	if (nd->pad >= eff)
		return dnn_op_fail(err, errlen, g->source, nd->line, "%s: pad=%d must be smaller than the kernel extent %lld",
				   nd->name, nd->pad, eff);
	nd->C = nd->out, nd->H = (int)P, nd->W = (int)Q;
	double macs = (double)nd->out * P * Q * C * nd->k * nd->k;
	nd->params = (long long)nd->out * C * nd->k * nd->k + (nd->bias ? nd->out : 0);
	nd->flops = 2 * macs + (nd->bias ? (double)nd->out * P * Q : 0);
	return 0;
}

static int create_params(dnn_model *m, int i, uint64_t *rng, char *err, size_t errlen)
{
	const dnn_node *nd = &m->g->nodes[i], *in = &m->g->nodes[nd->inputs[0]];
	long fan_in = (long)in->C * nd->k * nd->k;
	return dnn_op_params_linear(m, i, fan_in, (long)nd->out * fan_in, rng, err, errlen);
}

/* cuDNN describes x and y with int sizes (codelets/conv2d.h): one chunk's input and output must
 * each hold at most INT_MAX elements. Checked at plan time for the largest chunk. */
static int check_chunk(const dnn_graph *g, const dnn_node *nd, int n, char *err, size_t errlen)
{
	if (dnn_op_check_int_elems(g, nd, "input", &g->nodes[nd->inputs[0]], n, err, errlen) != 0 ||
	    dnn_op_check_int_elems(g, nd, "output", nd, n, err, errlen) != 0)
		return -1;
	return 0;
}

/* The chunk's conv arguments; -EINVAL when dnn_conv2d_args_finish refuses them (not after
 * infer() and check_chunk() passed: an empty output or a tensor over INT_MAX). */
static int conv_args(const dnn_op_ctx *ctx, const dnn_node *nd, dnn_conv2d_args *a)
{
	const dnn_node *in = &ctx->g->nodes[nd->inputs[0]];
	*a = (dnn_conv2d_args){.N = ctx->n, .C = in->C, .H = in->H, .W = in->W, .K = nd->out, .R = nd->k, .S = nd->k,
			       .stride = nd->stride, .pad = nd->pad, .dilation = nd->dilation,
			       .algo = (int)ctx->p->cfg.conv_algo, .bf16 = ctx->p->cfg.bf16,
			       .x_bf16 = dnn_op_out_bf16(ctx, nd->inputs[0])};
	return dnn_conv2d_args_finish(a) == 0 ? 0 : -EINVAL;
}

/* conv2d.cu's bf16 copies (--precision bf16) for a chunk of n samples: its largest pass's. */
static size_t cuda_scratch_bytes(const dnn_plan *p, int i, int n)
{
	const dnn_op_ctx ctx = {.p = (dnn_plan *)p, .g = p->m->g, .n = n}; /* conv_args only reads it */
	dnn_conv2d_args a;
	if (conv_args(&ctx, &p->m->g->nodes[i], &a) != 0)
		return 0;
	size_t b = 0;
	for (int phase = 0; phase < 3; phase++) {
		const size_t s = dnn_conv2d_bf16_scratch_bytes(&a, phase);
		b = s > b ? s : b;
	}
	return b;
}

enum { BN_GAMMA, BN_BETA }; /* graph/ops/batchnorm.c's parameter slots */

/* Level 3: the args of conv i's task with the batchnorm sb after it (statistics, -1: none) and the batchnorm ab
 * before it (applied to its input, -1: none), and the handles of ab's input (the conv's x), saved statistics,
 * gamma and beta. */
static dnn_conv2d_bn_args bn_conv_args(dnn_op_ctx *ctx, int i, int sb, int ab, const dnn_conv2d_args *a,
				       starpu_data_handle_t *x, starpu_data_handle_t h[3])
{
	const dnn_node *nd = &ctx->g->nodes[i];
	dnn_conv2d_bn_args f = {.conv = *a, .apply = ab >= 0, .stats = sb >= 0};
	f.conv.bias = 0; /* a bias is its own task here (a batchnorm's conv A has none: fuse.c) */
	if (ab >= 0) {
		const dnn_node *bn = &ctx->g->nodes[ab];
		f.in_bn = (dnn_batchnorm_args){.N = ctx->n, .C = bn->C, .HW = bn->H * bn->W, .eps = bn->eps,
					       .momentum = bn->momentum, .relu = 1};
		*x = dnn_op_out(ctx, bn->inputs[0]);
		h[0] = dnn_op_saved(ctx, ab);
		h[1] = dnn_op_param(ctx->m, ab, BN_GAMMA)->hw;
		h[2] = dnn_op_param(ctx->m, ab, BN_BETA)->hw;
	}
	if (sb >= 0)
		f.out_bn = (dnn_batchnorm_args){.N = ctx->n, .C = nd->out, .HW = nd->H * nd->W,
						.eps = ctx->g->nodes[sb].eps, .momentum = ctx->g->nodes[sb].momentum,
						.relu = 1};
	return f;
}

/* Level 3's forward: one task, then the bias as its own task. */
static int forward_bn(dnn_op_ctx *ctx, int i, int sb, int ab, const dnn_conv2d_args *a)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const dnn_param *w = dnn_op_param(ctx->m, i, DNN_SLOT_WEIGHT), *b = dnn_op_param(ctx->m, i, DNN_SLOT_BIAS);
	starpu_data_handle_t x = dnn_op_out(ctx, nd->inputs[0]), h[3] = {NULL, NULL, NULL};
	dnn_conv2d_bn_args f = bn_conv_args(ctx, i, sb, ab, a, &x, h);
	DNN_OP_SUBMIT(ctx, dnn_insert_conv2d_bn_fwd(ctx->opts, &f, x, w->hw, dnn_op_out(ctx, i), h[0], h[1], h[2],
						    sb >= 0 ? dnn_op_saved(ctx, sb) : NULL));
	if (b) {
		dnn_bias_args ba = {.N = ctx->n, .C = nd->out, .HW = nd->H * nd->W};
		DNN_OP_SUBMIT(ctx, dnn_insert_bias_fwd(ctx->opts, &ba, dnn_op_out(ctx, i), b->hw));
	}
	return 0;
}

static int forward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const dnn_param *w = dnn_op_param(ctx->m, i, DNN_SLOT_WEIGHT), *b = dnn_op_param(ctx->m, i, DNN_SLOT_BIAS);
	starpu_data_handle_t x = dnn_op_out(ctx, nd->inputs[0]), y = dnn_op_out(ctx, i);
	dnn_conv2d_args a;
	if (conv_args(ctx, nd, &a) != 0)
		return -EINVAL;
	const int sb = dnn_fuse_bn_stats_conv(ctx->p, i), ab = dnn_fuse_bn_apply_conv(ctx->p, i);
	if (sb >= 0 || ab >= 0)
		return forward_bn(ctx, i, sb, ab, &a);
	a.y_bf16 = dnn_op_out_bf16(ctx, i);
	/* conv + bias in one task; always with a bf16 y, whose kernel adds the bias before it rounds */
	if (dnn_fuse_conv_bias(ctx->p, i) || (a.y_bf16 && b)) {
		a.bias = 1;
		DNN_OP_SUBMIT(ctx, dnn_insert_conv2d_bias_fwd(ctx->opts, &a, x, w->hw, b->hw, y));
		return 0;
	}
	DNN_OP_SUBMIT(ctx, dnn_insert_conv2d_fwd(ctx->opts, &a, x, w->hw, y));
	if (b) {
		dnn_bias_args ba = {.N = ctx->n, .C = nd->out, .HW = nd->H * nd->W};
		DNN_OP_SUBMIT(ctx, dnn_insert_bias_fwd(ctx->opts, &ba, y, b->hw));
	}
	return 0;
}

static int backward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const int i0 = nd->inputs[0];
	const dnn_param *w = dnn_op_param(ctx->m, i, DNN_SLOT_WEIGHT), *b = dnn_op_param(ctx->m, i, DNN_SLOT_BIAS);
	starpu_data_handle_t x = dnn_op_out(ctx, i0), dy = dnn_op_dy(ctx, i);
	dnn_conv2d_args a;
	if (conv_args(ctx, nd, &a) != 0)
		return -EINVAL;
	a.accumulate_dx = dnn_op_take_dx(ctx, i0);
	int mode; /* the chunk's partial gradients (RW), or the REDUX handles (chunksum.h) */
	starpu_data_handle_t dw = dnn_op_grad(ctx, w, &mode), db = b ? dnn_op_grad(ctx, b, &mode) : NULL;
	const int ab = dnn_fuse_bn_apply_conv(ctx->p, i);
	if (ab >= 0) { /* level 3: the weight gradient on the input the task normalises itself */
		starpu_data_handle_t xa = x, h[3];
		dnn_conv2d_bn_args f = bn_conv_args(ctx, i, -1, ab, &a, &xa, h);
		if (b) {
			dnn_bias_args ba = {.N = ctx->n, .C = nd->out, .HW = nd->H * nd->W};
			DNN_OP_SUBMIT(ctx, dnn_insert_bias_bwd(ctx->opts, &ba, dy, db, mode));
		}
		DNN_OP_SUBMIT(ctx, dnn_insert_conv2d_bn_bwd_filter(ctx->opts, &f, xa, dy, dw, mode, h[0], h[1], h[2]));
	} else if (dnn_fuse_conv_bias(ctx->p, i)) { /* the bias gradient in the filter gradient's task */
		dnn_conv2d_args ab = a;
		ab.bias = 1;
		DNN_OP_SUBMIT(ctx, dnn_insert_conv2d_bias_bwd_filter(ctx->opts, &ab, x, dy, dw, db, mode));
	} else {
		if (b) {
			dnn_bias_args ba = {.N = ctx->n, .C = nd->out, .HW = nd->H * nd->W};
			DNN_OP_SUBMIT(ctx, dnn_insert_bias_bwd(ctx->opts, &ba, dy, db, mode));
		}
		DNN_OP_SUBMIT(ctx, dnn_insert_conv2d_bwd_filter(ctx->opts, &a, x, dy, dw, mode));
	}
	a.x_bf16 = 0; /* the data gradient reads no x */
	if (i0 != 0) /* the net's input has no gradient */
		DNN_OP_SUBMIT(ctx, dnn_insert_conv2d_bwd_data(ctx->opts, &a, dy, w->hw, dnn_op_dy(ctx, i0)));
	return 0;
}

/* bf16 activation storage (model.h y_bf16): a bf16 conv's forward task writes y in bf16 on every CPU path (each
 * path rounds its own output blocks, the bias added first: codelets/conv2d.h y_bf16); its backward never reads y.
 * Not at fusion level 3 (conv2d_bnfuse.h): a conv A computes its batchnorm's statistics from its fp32 output in the
 * same task (a bf16 y would have the batchnorm normalise other values than it took statistics of), and a conv B's
 * task applies the batchnorm to its input in F(2x2)'s copy and writes y fp32; their y stays fp32. */
static int bf16_out(const dnn_plan *p, int i)
{
	return p->cfg.bf16 && dnn_fuse_bn_stats_conv(p, i) < 0 && dnn_fuse_bn_apply_conv(p, i) < 0;
}

/* bf16 activation storage (model.h y_bf16): the forward and weight-gradient tasks of a bf16 conv read x in bf16
 * on every CPU path (codelets/conv2d.c widens it at the task's entry), a level-3 conv A's too (its statistics are
 * of its fp32 output); a level-3 conv B's input, the relu, is never stored (graph/ops/relu.c bf16_out). */
static int bf16_in(const dnn_plan *p, int i, int j)
{
	(void)i, (void)j;
	return p->cfg.bf16;
}

static int export_onnx(dnn_onnx_ctx *x, int i)
{
	const dnn_node *nd = &x->g->nodes[i], *in = &x->g->nodes[nd->inputs[0]];
	int64_t wd[4] = {nd->out, in->C, nd->k, nd->k}, bd[1] = {nd->out};
	const char *ins[3] = {dnn_onnx_as4d(x, nd->inputs[0])};
	if (!(ins[1] = dnn_onnx_param(x, i, DNN_SLOT_WEIGHT, 4, wd)) ||
	    (nd->bias && !(ins[2] = dnn_onnx_param(x, i, DNN_SLOT_BIAS, 1, bd))))
		return -1;
	dnn_onnx_node *n = dnn_onnx_node1(x, "Conv", nd->name, nd->bias ? 3 : 2, ins, nd->name);
	dnn_onnx_attr_ints2(x, n, "kernel_shape", 2, nd->k, nd->k);
	dnn_onnx_attr_ints2(x, n, "strides", 2, nd->stride, nd->stride);
	dnn_onnx_attr_ints2(x, n, "pads", 4, nd->pad, nd->pad);
	dnn_onnx_attr_ints2(x, n, "dilations", 2, nd->dilation, nd->dilation);
	dnn_onnx_attr_int(x, n, "group", 1);
	return 0;
}

const dnn_op_desc dnn_op_conv = {
	.name = "conv", .min_inputs = 1, .max_inputs = 1, .keys = keys, .nkeys = sizeof(keys) / sizeof(keys[0]),
	.check = check, .infer = infer, .param_slots = dnn_op_linear_slots, .nparam_slots = 2,
	.check_chunk = check_chunk, .create_params = create_params, .forward = forward, .backward = backward,
	.export_onnx = export_onnx, .cuda_scratch_bytes = cuda_scratch_bytes, .bf16_out = bf16_out, .bf16_in = bf16_in,
	.image_only = 1,
};
