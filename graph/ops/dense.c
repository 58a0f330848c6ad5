/* dense.c — the dense (fully connected) op: `dense NAME IN out=N`, always with a bias.
 * On an image it flattens the input (C x H x W features); on a sequence ([T][C], graph.h) it
 * applies to each token: [T][C] -> [T][out], the kernels seeing n T rows of C features.
 * Kernels and codelets: codelets/dense.{c,h}. */
#include "dense.h"
#include "onnx_emit.h"
#include "op.h"

static const dnn_op_key keys[] = {DNN_KEY_INT("out", 1, 1 << 20, out)};

static void defaults(dnn_node *nd) { nd->bias = 1; }

static int check(const dnn_node *nd, const char *src, char *err, size_t errlen)
{
	if (nd->out == 0)
		return dnn_op_fail(err, errlen, src, nd->line, "%s: dense needs out=N", nd->name);
	return 0;
}

static int infer(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	(void)err, (void)errlen;
	const dnn_node *in = &g->nodes[nd->inputs[0]];
	if (in->seq) { /* per token */
		nd->C = nd->out, nd->H = in->H, nd->W = 1, nd->seq = 1;
		nd->params = (long long)nd->out * in->C + nd->out;
		nd->flops = (2.0 * nd->out * in->C + nd->out) * in->H;
		return 0;
	}
	long long chw = (long long)in->C * in->H * in->W;
	nd->C = nd->out, nd->H = 1, nd->W = 1;
	nd->params = (long long)nd->out * chw + nd->out;
	nd->flops = 2.0 * nd->out * chw + nd->out;
	return 0;
}

/* The features one row of the GEMM has: a token's channels, or a whole flattened sample. */
static long dense_fan_in(const dnn_node *in) { return in->seq ? in->C : (long)in->C * in->H * in->W; }

static int create_params(dnn_model *m, int i, uint64_t *rng, char *err, size_t errlen)
{
	const dnn_node *nd = &m->g->nodes[i], *in = &m->g->nodes[nd->inputs[0]];
	long fan_in = dense_fan_in(in);
	return dnn_op_params_linear(m, i, fan_in, (long)nd->out * fan_in, rng, err, errlen);
}

static dnn_dense_args dense_args(const dnn_op_ctx *ctx, const dnn_node *nd)
{
	const dnn_node *in = &ctx->g->nodes[nd->inputs[0]];
	return (dnn_dense_args){.N = in->seq ? ctx->n * in->H : ctx->n, .IN = (int)dense_fan_in(in), .OUT = nd->out,
				 .bf16 = ctx->p->cfg.bf16, .x_bf16 = dnn_op_out_bf16(ctx, nd->inputs[0])};
}

/* bf16 activation storage (model.h y_bf16): under --precision bf16 the forward and weight-gradient
 * GEMMs read x in bf16 in place (the values they rounded x to before); bwd_data does not read x. */
static int bf16_in(const dnn_plan *p, int i, int j)
{
	(void)i, (void)j;
	return p->cfg.bf16;
}

/* ... and can write y in bf16 (dnn_gemm_bf16_out), which its backward never reads: where every
 * reader takes it so (attention's qkv, which attention rounds to bf16 anyway). */
static int bf16_out(const dnn_plan *p, int i)
{
	(void)i;
	return p->cfg.bf16;
}

static int forward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const dnn_param *w = dnn_op_param(ctx->m, i, DNN_SLOT_WEIGHT), *b = dnn_op_param(ctx->m, i, DNN_SLOT_BIAS);
	dnn_dense_args a = dense_args(ctx, nd);
	a.y_bf16 = dnn_op_out_bf16(ctx, i);
	DNN_OP_SUBMIT(ctx, dnn_insert_dense_fwd(ctx->opts, &a, dnn_op_out(ctx, nd->inputs[0]), w->hw, b->hw,
						dnn_op_out(ctx, i)));
	return 0;
}

static int backward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const int i0 = nd->inputs[0];
	const dnn_param *w = dnn_op_param(ctx->m, i, DNN_SLOT_WEIGHT), *b = dnn_op_param(ctx->m, i, DNN_SLOT_BIAS);
	starpu_data_handle_t dy = dnn_op_dy(ctx, i);
	dnn_dense_args a = dense_args(ctx, nd);
	a.accumulate_dx = dnn_op_take_dx(ctx, i0);
	int mode; /* the chunk's partial gradients (RW), or the REDUX handles (chunksum.h) */
	starpu_data_handle_t dw = dnn_op_grad(ctx, w, &mode), db = dnn_op_grad(ctx, b, &mode);
	DNN_OP_SUBMIT(ctx, dnn_insert_dense_bwd_weight(ctx->opts, &a, dnn_op_out(ctx, i0), dy, dw, db, mode));
	if (i0 != 0)
		DNN_OP_SUBMIT(ctx, dnn_insert_dense_bwd_data(ctx->opts, &a, dy, w->hw, dnn_op_dy(ctx, i0)));
	return 0;
}

/* Gemm: y = x W^T + b, on the flattened input; on a sequence MatMul(x, W^T) + b over [N, T, C]. */
static int export_onnx(dnn_onnx_ctx *x, int i)
{
	const dnn_node *nd = &x->g->nodes[i], *in = &x->g->nodes[nd->inputs[0]];
	int64_t wd[2] = {nd->out, dense_fan_in(in)}, bd[1] = {nd->out};
	const char *ins[3] = {NULL};
	if (!(ins[1] = dnn_onnx_param(x, i, DNN_SLOT_WEIGHT, 2, wd)) || !(ins[2] = dnn_onnx_param(x, i, DNN_SLOT_BIAS, 1, bd)))
		return -1;
	if (in->seq) {
		const char *wt = dnn_onnx_name(x, i, ".wT"), *mm = dnn_onnx_name(x, i, ".mm");
		dnn_onnx_node1(x, "Transpose", wt, 1, &ins[1], wt);
		const char *m_in[2] = {x->v[nd->inputs[0]].val, wt}, *a_in[2] = {mm, ins[2]};
		dnn_onnx_node1(x, "MatMul", mm, 2, m_in, mm);
		dnn_onnx_node1(x, "Add", nd->name, 2, a_in, nd->name);
		x->v[i].rank = 3;
		return 0;
	}
	ins[0] = dnn_onnx_as2d(x, nd->inputs[0]);
	dnn_onnx_attr_int(x, dnn_onnx_node1(x, "Gemm", nd->name, 3, ins, nd->name), "transB", 1);
	x->v[i].rank = 2;
	return 0;
}

const dnn_op_desc dnn_op_dense = {
	.name = "dense", .min_inputs = 1, .max_inputs = 1, .keys = keys, .nkeys = 1, .defaults = defaults,
	.check = check, .infer = infer, .param_slots = dnn_op_linear_slots, .nparam_slots = 2,
	.create_params = create_params, .bf16_out = bf16_out, .bf16_in = bf16_in, .forward = forward,
	.backward = backward, .export_onnx = export_onnx,
};
