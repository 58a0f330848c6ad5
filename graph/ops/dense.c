/* dense.c — the dense (fully connected) op: `dense NAME IN out=N`, always with a bias.
 * Kernels and codelets: codelets/dense.{c,h}. */
#include "dense.h"
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
	long long chw = (long long)in->C * in->H * in->W;
	nd->C = nd->out, nd->H = 1, nd->W = 1;
	nd->params = (long long)nd->out * chw + nd->out;
	nd->flops = 2.0 * nd->out * chw + nd->out;
	return 0;
}

static int create_params(dnn_model *m, int i, uint64_t *rng, char *err, size_t errlen)
{
	const dnn_node *nd = &m->g->nodes[i], *in = &m->g->nodes[nd->inputs[0]];
	long fan_in = (long)in->C * in->H * in->W;
	return dnn_op_params_linear(m, i, fan_in, (long)nd->out * fan_in, rng, err, errlen);
}

static dnn_dense_args dense_args(const dnn_op_ctx *ctx, const dnn_node *nd)
{
	const dnn_node *in = &ctx->g->nodes[nd->inputs[0]];
	return (dnn_dense_args){.N = ctx->n, .IN = in->C * in->H * in->W, .OUT = nd->out};
}

static int forward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const dnn_param *w = &ctx->m->params[ctx->m->param_of[i]];
	dnn_dense_args a = dense_args(ctx, nd);
	DNN_OP_SUBMIT(ctx, dnn_insert_dense_fwd(ctx->opts, &a, dnn_op_out(ctx, nd->inputs[0]), w[0].hw, w[1].hw,
						dnn_op_out(ctx, i)));
	return 0;
}

static int backward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const int i0 = nd->inputs[0];
	const dnn_param *w = &ctx->m->params[ctx->m->param_of[i]];
	starpu_data_handle_t dy = dnn_op_dy(ctx, i);
	dnn_dense_args a = dense_args(ctx, nd);
	a.accumulate_dx = dnn_op_take_dx(ctx, i0);
	DNN_OP_SUBMIT(ctx, dnn_insert_dense_bwd_weight(ctx->opts, &a, dnn_op_out(ctx, i0), dy, w[0].hg, w[1].hg, STARPU_REDUX));
	if (i0 != 0)
		DNN_OP_SUBMIT(ctx, dnn_insert_dense_bwd_data(ctx->opts, &a, dy, w[0].hw, dnn_op_dy(ctx, i0)));
	return 0;
}

const dnn_op_desc dnn_op_dense = {
	.name = "dense", .min_inputs = 1, .max_inputs = 1, .keys = keys, .nkeys = 1, .defaults = defaults,
	.check = check, .infer = infer, .create_params = create_params, .forward = forward, .backward = backward,
};
