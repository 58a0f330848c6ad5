/* layernorm.c — the layernorm op: `layernorm NAME IN [eps=1e-5]`, PyTorch's LayerNorm(C) over the
 * C channels of each token of a sequence (or of each sample of a flat C x 1 x 1 input), with a
 * weight (1) and a bias (0) per channel, neither weight-decayed. Training and eval normalise
 * alike (no running statistics). Kernels and codelets: codelets/layernorm.{c,h}; ONNX:
 * LayerNormalization, axis -1 (opset 17). */
#include "layernorm.h"
#include "onnx_emit.h"
#include "op.h"

static const dnn_op_key keys[] = {DNN_KEY_FLOAT("eps", 1e-12, 1.0, eps)};

static int infer(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	const dnn_node *in = &g->nodes[nd->inputs[0]];
	/* channels-last rows: a sequence's tokens, or flat samples; an image's C is not its last axis */
	if (!in->seq && (in->H != 1 || in->W != 1))
		return dnn_op_fail(err, errlen, g->source, nd->line,
				   "%s: layernorm needs a sequence or a flat C x 1 x 1 input, not %dx%dx%d (put a dense "
				   "layer first)",
				   nd->name, in->C, in->H, in->W);
	dnn_op_infer_same_shape(g, nd, err, errlen);
	nd->params = 2LL * nd->C;
	nd->flops = 8.0 * nd->C * nd->H * nd->W;
	return 0;
}

enum { WEIGHT, BIAS };
static const dnn_op_param_slot slots[] = {[WEIGHT] = {"weight", 1}, [BIAS] = {"bias", 1}};

static int create_params(dnn_model *m, int i, uint64_t *rng, char *err, size_t errlen)
{
	(void)rng;
	const dnn_node *nd = &m->g->nodes[i];
	const int pw = dnn_model_add_param(m, i, WEIGHT, nd->C, err, errlen);
	if (pw < 0 || dnn_model_add_param(m, i, BIAS, nd->C, err, errlen) < 0)
		return -1;
	for (int c = 0; c < nd->C; c++) /* the bias starts at 0, as every new tensor */
		m->params[pw].w[c] = 1.0f;
	return 0;
}

/* Per sample: [m | rstd | dm] of each of its rows (H x W = T tokens, or 1): layernorm.h. */
static size_t saved_per_sample(const dnn_node *nd) { return 3 * (size_t)nd->H * nd->W; }

static dnn_layernorm_args ln_args(const dnn_op_ctx *ctx, const dnn_node *nd)
{
	return (dnn_layernorm_args){.rows = (long)ctx->n * nd->H * nd->W, .C = nd->C, .eps = nd->eps};
}

static int forward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const dnn_param *w = dnn_op_param(ctx->m, i, WEIGHT), *b = dnn_op_param(ctx->m, i, BIAS);
	dnn_layernorm_args a = ln_args(ctx, nd);
	a.save = ctx->p->train; /* eval plans have no saved buffer */
	a.y_bf16 = dnn_op_out_bf16(ctx, i);
	DNN_OP_SUBMIT(ctx, dnn_insert_layernorm_fwd(ctx->opts, &a, dnn_op_out(ctx, nd->inputs[0]), w->hw, b->hw,
						    dnn_op_out(ctx, i), a.save ? dnn_op_saved(ctx, i) : NULL));
	return 0;
}

static int backward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const int i0 = nd->inputs[0];
	const dnn_param *w = dnn_op_param(ctx->m, i, WEIGHT), *b = dnn_op_param(ctx->m, i, BIAS);
	dnn_layernorm_args a = ln_args(ctx, nd);
	a.accumulate_dx = dnn_op_take_dx(ctx, i0);
	a.has_dx = i0 != 0; /* the net's input has no gradient: the parameters' only */
	int mode; /* the chunk's partial gradients (RW), or the REDUX handles (chunksum.h) */
	starpu_data_handle_t dw = dnn_op_grad(ctx, w, &mode), db = dnn_op_grad(ctx, b, &mode);
	DNN_OP_SUBMIT(ctx, dnn_insert_layernorm_bwd(ctx->opts, &a, dnn_op_out(ctx, i0), w->hw, dnn_op_saved(ctx, i),
						    dnn_op_dy(ctx, i), dw, db, mode, a.has_dx ? dnn_op_dy(ctx, i0) : NULL));
	return 0;
}

/* bf16 activation storage (model.h y_bf16): the forward can write y in bf16, and the backward
 * reads x and the saved statistics, not y. Its input, the residual stream, stays fp32 (add's). */
static int bf16_out(const dnn_plan *p, int i)
{
	(void)i;
	return p->cfg.bf16;
}

/* LayerNormalization over the last axis: a sequence's channels (N x T x C), or a flat input's
 * (made N x C). */
static int export_onnx(dnn_onnx_ctx *x, int i)
{
	const dnn_node *nd = &x->g->nodes[i];
	const int i0 = nd->inputs[0];
	int64_t d[1] = {nd->C};
	const char *in[3] = {NULL};
	if (!(in[1] = dnn_onnx_param(x, i, WEIGHT, 1, d)) || !(in[2] = dnn_onnx_param(x, i, BIAS, 1, d)))
		return -1;
	in[0] = nd->seq ? x->v[i0].val : dnn_onnx_as2d(x, i0);
	dnn_onnx_node *n = dnn_onnx_node1(x, "LayerNormalization", nd->name, 3, in, nd->name);
	dnn_onnx_attr_int(x, n, "axis", -1);
	dnn_onnx_attr_float(x, n, "epsilon", nd->eps);
	x->v[i].rank = nd->seq ? x->v[i0].rank : 2;
	return 0;
}

const dnn_op_desc dnn_op_layernorm = {
	.name = "layernorm", .min_inputs = 1, .max_inputs = 1, .keys = keys, .nkeys = 1, .infer = infer,
	.param_slots = slots, .nparam_slots = 2, .create_params = create_params,
	.saved_floats_per_sample = saved_per_sample, .bf16_out = bf16_out, .forward = forward, .backward = backward,
	.export_onnx = export_onnx,
};
