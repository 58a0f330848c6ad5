/* attention.c — the attention op: `attention NAME QKV heads=H`, GPT-2's causal multi-head
 * self-attention without its projections (dense layers around it in the net). QKV is a sequence
 * [T][3C] laid out as nanoGPT's c_attn output (q = channels [0, C), k = [C, 2C), v = [2C, 3C); head
 * h uses [h D, (h+1) D) of each, D = C/H); the output is the sequence [T][C], the heads' outputs
 * concatenated, softmax(q k^T / sqrt(D)) v with each token seeing itself and the tokens before it.
 * Training keeps the softmax's log-sum-exp per (sample, head, token) for the backward (the saved
 * buffer, H T floats per sample). Kernels and codelets: codelets/attention.{c,h}; ONNX: Split,
 * Reshape/Transpose per head, MatMul, Mul by the scale, Add of a causal mask, Softmax, MatMul,
 * Transpose/Reshape back. */
#include <math.h>
#include <stdlib.h>

#include "attention.h"
#include "onnx_emit.h"
#include "op.h"

#define HEADS(nd) ((nd)->k) /* key heads */

static const dnn_op_key keys[] = {DNN_KEY_INT("heads", 1, DNN_MAX_CHANNELS, k)};

static int check(const dnn_node *nd, const char *src, char *err, size_t errlen)
{
	if (HEADS(nd) == 0)
		return dnn_op_fail(err, errlen, src, nd->line, "%s: attention needs heads=H", nd->name);
	return 0;
}

static int infer(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	const dnn_node *in = &g->nodes[nd->inputs[0]];
	if (!in->seq)
		return dnn_op_fail(err, errlen, g->source, nd->line,
				   "%s: attention takes a sequence [T][3C] (q, k, v per token), but %s is not one", nd->name,
				   in->name);
	if (in->C % 3 != 0)
		return dnn_op_fail(err, errlen, g->source, nd->line,
				   "%s: its input %s has %d channels per token, not 3C (q, k and v of C each)", nd->name,
				   in->name, in->C);
	const int C = in->C / 3;
	if (C % HEADS(nd) != 0)
		return dnn_op_fail(err, errlen, g->source, nd->line, "%s: heads=%d does not divide C=%d (%s's %d channels / 3)",
				   nd->name, HEADS(nd), C, in->name, in->C);
	nd->C = C, nd->H = in->H, nd->W = 1, nd->seq = 1;
	nd->params = 0;
	/* q k^T and P v, 2 T^2 D FLOPs each per head if every token saw all T: 4 T C per token;
	 * causal, a token sees (t+1) of them: half of that, 2 T C per token (the softmax not counted) */
	nd->flops = 2.0 * (double)in->H * in->H * C;
	return 0;
}

/* The log-sum-exp per head and token, per sample. */
static size_t saved_per_sample(const dnn_node *nd) { return (size_t)HEADS(nd) * nd->H; }

static dnn_attention_args attention_args(const dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	return (dnn_attention_args){.N = ctx->n, .T = nd->H, .C = nd->C, .H = HEADS(nd), .save_lse = ctx->p->train,
				     .bf16 = ctx->p->cfg.bf16, .y_bf16 = dnn_op_out_bf16(ctx, i),
				     .x_bf16 = dnn_op_out_bf16(ctx, nd->inputs[0])};
}

/* bf16 activation storage (model.h y_bf16): the forward can write y in bf16, and the backward reads
 * it so (D_t = dy.y); both read qkv in bf16 (they round each head's q, k, v to bf16 anyway). */
static int bf16_out(const dnn_plan *p, int i)
{
	(void)i;
	return p->cfg.bf16;
}

static int bf16_in(const dnn_plan *p, int i, int j)
{
	(void)i, (void)j;
	return p->cfg.bf16;
}

static int forward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	dnn_attention_args a = attention_args(ctx, i);
	DNN_OP_SUBMIT(ctx, dnn_insert_attention_fwd(ctx->opts, &a, dnn_op_out(ctx, nd->inputs[0]), dnn_op_out(ctx, i),
						    a.save_lse ? dnn_op_saved(ctx, i) : NULL));
	return 0;
}

static int backward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const int i0 = nd->inputs[0];
	dnn_attention_args a = attention_args(ctx, i);
	a.accumulate_dx = dnn_op_take_dx(ctx, i0);
	if (i0 == 0)
		return 0; /* attention on the net's input: no gradient to give */
	DNN_OP_SUBMIT(ctx, dnn_insert_attention_bwd(ctx->opts, &a, dnn_op_out(ctx, i0), dnn_op_out(ctx, i), dnn_op_dy(ctx, i),
						    dnn_op_saved(ctx, i), dnn_op_dy(ctx, i0)));
	return 0;
}

/* An int64 1-D initializer of n values, named after node i. */
static const char *ints(dnn_onnx_ctx *x, int i, const char *suffix, int n, const int64_t *v)
{
	const int64_t dims[1] = {n};
	return x->e->init_int64(x->e->impl, dnn_onnx_name(x, i, suffix), 1, dims, v);
}

/* op_type(in) -> a fresh value "<node><suffix>"; returns its name. */
static const char *node1(dnn_onnx_ctx *x, int i, const char *op_type, const char *suffix, int nin, const char *const *in)
{
	const char *out = dnn_onnx_name(x, i, suffix);
	dnn_onnx_node1(x, op_type, out, nin, in, out);
	return out;
}

static const char *transpose(dnn_onnx_ctx *x, int i, const char *suffix, const char *in, const int64_t perm[4])
{
	const char *out = dnn_onnx_name(x, i, suffix);
	x->e->attr_ints(x->e->impl, dnn_onnx_node1(x, "Transpose", out, 1, &in, out), "perm", 4, perm);
	return out;
}

/* [N, T, 3C] -> Split (axis 2) -> q, k, v [N, T, C] -> Reshape [N, T, H, D] -> Transpose: q, v
 * [N, H, T, D], k [N, H, D, T]; S = MatMul(q, k) * 1/sqrt(D) + mask (0 where key <= query, -inf
 * after: a T x T constant); P = Softmax(S, axis -1); MatMul(P, v) [N, H, T, D] -> Transpose
 * [N, T, H, D] -> Reshape [N, T, C]. */
static int export_onnx(dnn_onnx_ctx *x, int i)
{
	const dnn_node *nd = &x->g->nodes[i];
	const int T = nd->H, C = nd->C, H = HEADS(nd), D = C / H;
	const int64_t split[3] = {C, C, C}, shape4[4] = {0, 0, H, D}, shape3[3] = {0, 0, C};
	const int64_t perm_qv[4] = {0, 2, 1, 3}, perm_k[4] = {0, 2, 3, 1}, perm_out[4] = {0, 2, 1, 3};
	const int64_t dims_mask[2] = {T, T}, dims_scale[1] = {1};
	float *mask = malloc(sizeof(float) * (size_t)T * T);
	const float scale = 1.0f / sqrtf((float)D);
	const char *tmask = NULL;
	if (mask) {
		for (int t = 0; t < T; t++)
			for (int s = 0; s < T; s++)
				mask[(size_t)t * T + s] = s <= t ? 0.0f : -INFINITY;
		tmask = dnn_onnx_init(x, dnn_onnx_name(x, i, ".mask"), 2, dims_mask, mask);
		free(mask);
	}
	if (!tmask)
		return dnn_onnx_fail(x, i, "out of memory for the %dx%d causal mask", T, T);
	const char *tscale = dnn_onnx_init(x, dnn_onnx_name(x, i, ".scale"), 1, dims_scale, &scale);
	const char *tsplit = ints(x, i, ".split", 3, split), *tshape4 = ints(x, i, ".shape4", 4, shape4);
	const char *tshape3 = ints(x, i, ".shape3", 3, shape3);
	const char *qkv[3] = {dnn_onnx_name(x, i, ".q"), dnn_onnx_name(x, i, ".k"), dnn_onnx_name(x, i, ".v")};
	const char *sin[2] = {x->v[nd->inputs[0]].val, tsplit};
	dnn_onnx_attr_int(x, x->e->node(x->e->impl, "Split", dnn_onnx_name(x, i, ".qkv"), 2, sin, 3, qkv), "axis", 2);
	static const char *const rs_suffix[3] = {".q4", ".k4", ".v4"}, *const tr_suffix[3] = {".qh", ".kt", ".vh"};
	const char *heads[3];
	for (int j = 0; j < 3; j++) {
		const char *rin[2] = {qkv[j], tshape4};
		heads[j] = transpose(x, i, tr_suffix[j], node1(x, i, "Reshape", rs_suffix[j], 2, rin), j == 1 ? perm_k : perm_qv);
	}
	const char *mm_in[2] = {heads[0], heads[1]};
	const char *s = node1(x, i, "MatMul", ".scores", 2, mm_in);
	const char *mul_in[2] = {s, tscale};
	const char *ss = node1(x, i, "Mul", ".scaled", 2, mul_in);
	const char *add_in[2] = {ss, tmask};
	const char *sm = node1(x, i, "Add", ".masked", 2, add_in);
	const char *p = dnn_onnx_name(x, i, ".probs");
	dnn_onnx_attr_int(x, dnn_onnx_node1(x, "Softmax", p, 1, &sm, p), "axis", -1);
	const char *pv_in[2] = {p, heads[2]};
	const char *o = transpose(x, i, ".oh", node1(x, i, "MatMul", ".heads", 2, pv_in), perm_out);
	const char *r_in[2] = {o, tshape3};
	dnn_onnx_node1(x, "Reshape", nd->name, 2, r_in, nd->name);
	x->v[i].rank = 3;
	return 0;
}

const dnn_op_desc dnn_op_attention = {
	.name = "attention", .min_inputs = 1, .max_inputs = 1, .keys = keys, .nkeys = 1, .check = check, .infer = infer,
	.saved_floats_per_sample = saved_per_sample, .bf16_out = bf16_out, .bf16_in = bf16_in, .forward = forward,
	.backward = backward,
	.export_onnx = export_onnx,
};
