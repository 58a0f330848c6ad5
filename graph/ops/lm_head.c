/* lm_head.c — the lm_head op: `lm_head NAME X,EMB`, a language model's output layer tied to its
 * token embedding (GPT-2): X is a sequence [T][C], EMB an embed node of dim=C, and the output is
 * the sequence of logits [T][V], logits = x wte^T, wte = EMB's table [V x C].
 *
 * It owns no parameter: it reads EMB's slot 0 (dnn_op_param(m, EMB, 0)) and adds its part of the
 * gradient, dwte += dlogits^T x, into the same per-chunk gradient handle (dnn_op_grad) that EMB's
 * backward adds its scatter to later in the same chunk (backward runs in reverse topological
 * order, and EMB comes before this node): the two parts of the tied gradient are summed in one
 * handle in submission order, under the fixed-order sums (STARPU_RW partials) and under
 * --deterministic off (STARPU_REDUX) alike. It writes only X's gradient (routes_grads), never
 * EMB's output gradient. Kernels: dense's GEMMs without a bias (codelets/dense.{c,h}); ONNX:
 * MatMul with the transposed table (the embed's initializer, shared). */
#include "dense.h"
#include "onnx_emit.h"
#include "op.h"

enum { X, EMB };

static int infer(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	const dnn_node *x = &g->nodes[nd->inputs[X]], *e = &g->nodes[nd->inputs[EMB]];
	if (!x->seq)
		return dnn_op_fail(err, errlen, g->source, nd->line,
				   "%s: lm_head needs a sequence [T][C] as its first input, but %s is %dx%dx%d", nd->name,
				   x->name, x->C, x->H, x->W);
	if (e->op != DNN_OP_EMBED)
		return dnn_op_fail(err, errlen, g->source, nd->line,
				   "%s: lm_head's second input must be an embed node (its table is the output layer's "
				   "weight), but %s is %s",
				   nd->name, e->name, dnn_op_name(e->op));
	const int V = e->k; /* the embed's vocab= (graph/ops/embed.c keeps it in k) */
	if (e->C != x->C)
		return dnn_op_fail(err, errlen, g->source, nd->line, "%s: %s has %d channels, but the embed %s has dim=%d",
				   nd->name, x->name, x->C, e->name, e->C);
	nd->C = V, nd->H = x->H, nd->W = 1, nd->seq = 1;
	nd->params = 0; /* the table is the embed's: counted once, there */
	nd->flops = 2.0 * V * x->C * x->H;
	return 0;
}

static dnn_dense_args head_args(const dnn_op_ctx *ctx, const dnn_node *nd)
{
	const dnn_node *x = &ctx->g->nodes[nd->inputs[X]];
	return (dnn_dense_args){.N = ctx->n * x->H, .IN = x->C, .OUT = nd->C, .bf16 = ctx->p->cfg.bf16,
				 .x_bf16 = dnn_op_out_bf16(ctx, nd->inputs[X])};
}

/* bf16 activation storage (model.h y_bf16): X read in bf16 in place by the forward and weight-gradient
 * GEMMs, as dense's; EMB's output is never read (only its table), so it is not asked for. */
static int bf16_in(const dnn_plan *p, int i, int j)
{
	return p->cfg.bf16 && j == p->m->g->nodes[i].inputs[X];
}

/* The chunk's insert options under lm_head's own task name (traces tell it from a dense layer). */
static const dnn_task_opts *named(const dnn_op_ctx *ctx, dnn_task_opts *buf, const char *name)
{
	*buf = ctx->opts ? *ctx->opts : (dnn_task_opts){0};
	buf->name = name;
	return buf;
}

static int forward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const dnn_param *wte = dnn_op_param(ctx->m, nd->inputs[EMB], 0);
	dnn_dense_args a = head_args(ctx, nd);
	dnn_task_opts o;
	DNN_OP_SUBMIT(ctx, dnn_insert_dense_fwd(named(ctx, &o, "lm_head_fwd"), &a, dnn_op_out(ctx, nd->inputs[X]), wte->hw,
						NULL, dnn_op_out(ctx, i)));
	return 0;
}

static int backward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const int ix = nd->inputs[X];
	const dnn_param *wte = dnn_op_param(ctx->m, nd->inputs[EMB], 0);
	starpu_data_handle_t dy = dnn_op_dy(ctx, i);
	dnn_dense_args a = head_args(ctx, nd);
	a.accumulate_dx = dnn_op_take_dx(ctx, ix);
	int mode; /* the chunk's partial of wte's gradient (RW), or its REDUX handle: the embed's own */
	starpu_data_handle_t dwte = dnn_op_grad(ctx, wte, &mode);
	dnn_task_opts o;
	DNN_OP_SUBMIT(ctx, dnn_insert_dense_bwd_weight(named(ctx, &o, "lm_head_bwd_weight"), &a, dnn_op_out(ctx, ix), dy,
						       dwte, NULL, mode));
	if (ix != 0)
		DNN_OP_SUBMIT(ctx, dnn_insert_dense_bwd_data(named(ctx, &o, "lm_head_bwd_data"), &a, dy, wte->hw,
							     dnn_op_dy(ctx, ix)));
	return 0;
}

/* MatMul(x [N, T, C], Transpose(wte) [C, V]); wte is the embed's initializer, written once there. */
static int export_onnx(dnn_onnx_ctx *x, int i)
{
	const dnn_node *nd = &x->g->nodes[i];
	const dnn_param *wte = dnn_op_param(x->m, nd->inputs[EMB], 0);
	if (!wte || wte->n != (long)nd->C * x->g->nodes[nd->inputs[X]].C)
		return dnn_onnx_fail(x, i, "the embed %s has no table of %d x %d", x->g->nodes[nd->inputs[EMB]].name, nd->C,
				     x->g->nodes[nd->inputs[X]].C);
	const char *wt = dnn_onnx_name(x, i, ".wteT"), *te = wte->name;
	dnn_onnx_node1(x, "Transpose", wt, 1, &te, wt);
	const char *m_in[2] = {x->v[nd->inputs[X]].val, wt};
	dnn_onnx_node1(x, "MatMul", nd->name, 2, m_in, nd->name);
	x->v[i].rank = 3;
	return 0;
}

const dnn_op_desc dnn_op_lm_head = {
	.name = "lm_head", .min_inputs = 2, .max_inputs = 2, .infer = infer, .forward = forward, .backward = backward,
	.export_onnx = export_onnx, .routes_grads = 1, .bf16_in = bf16_in,
};
