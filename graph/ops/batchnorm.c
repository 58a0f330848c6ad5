/* batchnorm.c — the batchnorm op: `batchnorm NAME IN [eps=1e-5] [momentum=0.1]`, per-chunk
 * statistics in training (as a DDP replica's) or, with --batchnorm global (bnstats.h), the
 * statistics of the whole global batch; running statistics in eval mode.
 * Kernels and codelets: codelets/batchnorm.{c,h}. When its only consumer is a relu (fuse.h),
 * one task per chunk does both: forward into the relu's output, backward from the relu's
 * gradient; the batchnorm's own output and gradient are never stored. At fusion level 3 the convs around it
 * do its forward (codelets/conv2d_bnfuse.h): only the running statistics' task and the backward remain. */
#include <stdlib.h>

#include "batchnorm.h"
#include "bnstats.h"
#include "conv2d_bnfuse.h"
#include "fuse.h"
#include "onnx_emit.h"
#include "op.h"

static const dnn_op_key keys[] = {DNN_KEY_FLOAT("eps", 1e-12, 1.0, eps), DNN_KEY_FLOAT("momentum", 0.0, 1.0, momentum)};

static int infer(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	if (nd->inputs[0] == 0) /* its backward writes dx too; the data has no gradient handle */
		return dnn_op_fail(err, errlen, g->source, nd->line,
				   "%s: batchnorm directly on the input is not supported (put a conv or dense layer first)",
				   nd->name);
	dnn_op_infer_same_shape(g, nd, err, errlen);
	nd->params = 2LL * nd->C;
	nd->flops = 4.0 * nd->C * nd->H * nd->W;
	return 0;
}

enum { GAMMA, BETA };
static const dnn_op_param_slot slots[] = {[GAMMA] = {"gamma", 1}, [BETA] = {"beta", 1}};
enum { MEAN, VAR };
static const char *const running_blocks[] = {[MEAN] = "mean", [VAR] = "var"};

static int create_params(dnn_model *m, int i, uint64_t *rng, char *err, size_t errlen)
{
	(void)rng;
	const dnn_node *nd = &m->g->nodes[i];
	int pg = dnn_model_add_param(m, i, GAMMA, nd->C, err, errlen);
	if (pg < 0 || dnn_model_add_param(m, i, BETA, nd->C, err, errlen) < 0)
		return -1;
	for (int c = 0; c < nd->C; c++)
		m->params[pg].w[c] = 1.0f;
	/* running mean 0, running var 1 */
	float *running = dnn_model_add_running(m, i, err, errlen);
	if (!running)
		return -1;
	for (int c = 0; c < nd->C; c++)
		running[VAR * nd->C + c] = 1.0f;
	return 0;
}

/* cuDNN describes x (N, C, HW, 1) with int sizes: one chunk's input must hold at most INT_MAX
 * elements. Checked at plan time. */
static int check_chunk(const dnn_graph *g, const dnn_node *nd, int n, char *err, size_t errlen)
{
	return dnn_op_check_int_elems(g, nd, "input", &g->nodes[nd->inputs[0]], n, err, errlen);
}

static size_t saved_floats(const dnn_node *nd) { return 3 * (size_t)nd->C; }

/* relu: the fused relu's node (its output, maybe stored in bf16), or -1. x_bf16: the input as the plan stores it
 * (bf16_in below). */
static dnn_batchnorm_args bn_args(const dnn_op_ctx *ctx, const dnn_node *nd, int relu)
{
	return (dnn_batchnorm_args){.N = ctx->n, .C = nd->C, .HW = nd->H * nd->W, .eps = nd->eps,
				    .momentum = nd->momentum, .relu = relu >= 0,
				    .y_bf16 = relu >= 0 && dnn_op_out_bf16(ctx, relu),
				    .x_bf16 = dnn_op_out_bf16(ctx, nd->inputs[0])};
}

/* bf16 activation storage (model.h y_bf16): every task of ours that reads x widens a bf16 x exactly as it loads it
 * (codelets/batchnorm.c), the statistics and sums staying fp32/double in their order: local statistics, eval,
 * --batchnorm global's sums and apply tasks, fused with the relu or not. Not at fusion level 3, where the conv
 * before computes our statistics from its fp32 output and the conv after applies us (codelets/conv2d_bnfuse.h,
 * which read x in fp32); with --batchnorm global level 3 never applies (fuse.h). */
static int bf16_in(const dnn_plan *p, int i, int j)
{
	(void)j;
	return dnn_fuse_bn_stats_conv(p, i) < 0 && dnn_fuse_bn_apply_conv(p, i) < 0;
}

/* --batchnorm global: what the forward and the backward pass each give global_walk. */
typedef struct {
	int phase; /* DNN_BN_FWD or DNN_BN_BWD: which local and reduced sums (bnstats.h) */
	/* chunk ctx->c's task adding its sums into S (and, backward, its share of dgamma, dbeta), with
	 * access mode `mode` (RW into the chunk's partials, or REDUX) */
	int (*sums)(dnn_op_ctx *ctx, int i, const dnn_batchnorm_args *a, starpu_data_handle_t S, int mode);
	/* chunk ctx->c's task reading the sums over the ranks, G */
	int (*apply)(dnn_op_ctx *ctx, int i, const dnn_batchnorm_args *a, starpu_data_handle_t G);
} global_pass;

/* --batchnorm global, one pass of chunk ctx->c (the plan submits layer by layer): its sums into
 * its local buffer (zeroed by chunk 0); after the last chunk's, the sum over the ranks, then every
 * chunk's apply task, ending on the last chunk, where it started. */
static int global_walk(dnn_op_ctx *ctx, int i, dnn_batchnorm_args a, const global_pass *pass)
{
	int mode; /* the chunk's partial sums (RW), or the one REDUX handle (bnstats.h) */
	starpu_data_handle_t S = dnn_bn_sums_chunk(ctx->p, i, ctx->slot, pass->phase, ctx->c, &mode), G;
	if (ctx->c == 0) /* chunk 0's partial is the local handle, which holds the last step's sums */
		DNN_OP_SUBMIT(ctx, dnn_insert_bn_dsum_zero(ctx->opts, dnn_bn_sums_local(ctx->p, i, ctx->slot, pass->phase)));
	int rc = pass->sums(ctx, i, &a, S, mode);
	if (rc != 0 || ctx->c < ctx->p->nchunks - 1)
		return rc;
	if ((rc = dnn_bn_sums_reduce(ctx->p, i, ctx->slot, pass->phase, &G)) != 0)
		return rc;
	/* The walk ends on the last chunk, where it started, with the caller's options again:
	 * ctx->opts must not keep pointing at this frame's buf after the return. */
	const dnn_task_opts *caller_opts = ctx->opts;
	dnn_task_opts buf;
	for (int c = 0; c < ctx->p->nchunks && rc == 0; c++) {
		dnn_op_ctx_chunk(ctx, c, &buf);
		a.N = ctx->n;
		rc = pass->apply(ctx, i, &a, G);
	}
	ctx->opts = caller_opts;
	return rc;
}

static int fwd_global_sums(dnn_op_ctx *ctx, int i, const dnn_batchnorm_args *a, starpu_data_handle_t S, int mode)
{
	DNN_OP_SUBMIT(ctx, dnn_insert_batchnorm_sums_fwd(ctx->opts, a, dnn_op_out(ctx, ctx->g->nodes[i].inputs[0]), S, mode));
	return 0;
}

/* Chunk ctx->c's normalisation with the global mean and variance; chunk 0's saved buffer gives
 * the running statistics. */
static int fwd_global_apply(dnn_op_ctx *ctx, int i, const dnn_batchnorm_args *a, starpu_data_handle_t G)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const dnn_param *gamma = dnn_op_param(ctx->m, i, GAMMA), *beta = dnn_op_param(ctx->m, i, BETA);
	const int relu = dnn_fuse_bn_relu_partner(ctx->p, i);
	starpu_data_handle_t saved = dnn_op_saved(ctx, i);
	DNN_OP_SUBMIT(ctx, dnn_insert_batchnorm_fwd_global(ctx->opts, a, dnn_op_out(ctx, nd->inputs[0]), gamma->hw, beta->hw,
							   G, dnn_op_out(ctx, relu >= 0 ? relu : i), saved));
	if (ctx->c == 0) {
		dnn_batchnorm_args r = *a;
		r.N = a->global_n; /* the unbiased variance's M / (M - 1) over the global batch */
		DNN_OP_SUBMIT(ctx, dnn_insert_batchnorm_running(ctx->opts, &r, saved, ctx->m->hrunning[i]));
	}
	return 0;
}

static const global_pass fwd_global = {DNN_BN_FWD, fwd_global_sums, fwd_global_apply};

static int forward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const dnn_param *gamma = dnn_op_param(ctx->m, i, GAMMA), *beta = dnn_op_param(ctx->m, i, BETA);
	const int relu = dnn_fuse_bn_relu_partner(ctx->p, i);
	starpu_data_handle_t x = dnn_op_out(ctx, nd->inputs[0]);
	starpu_data_handle_t y = dnn_op_out(ctx, relu >= 0 ? relu : i); /* fused: straight into the relu's output */
	dnn_batchnorm_args a = bn_args(ctx, nd, relu);
	if (!ctx->p->train) {
		DNN_OP_SUBMIT(ctx, dnn_insert_batchnorm_fwd_eval(ctx->opts, &a, x, gamma->hw, beta->hw, ctx->m->hrunning[i], y));
		return 0;
	}
	if (ctx->p->bn_global) {
		a.global_n = ctx->p->bn_global_n;
		return global_walk(ctx, i, a, &fwd_global);
	}
	starpu_data_handle_t saved = dnn_op_saved(ctx, i);
	if (dnn_fuse_bn_stats_conv(ctx->p, i) < 0) /* level 3: the conv before wrote saved, the one after applies it */
		DNN_OP_SUBMIT(ctx, dnn_insert_batchnorm_fwd_train(ctx->opts, &a, x, gamma->hw, beta->hw, y, saved));
	/* Running statistics follow chunk 0, as a DDP replica's follow its own shard. */
	if (ctx->c == 0)
		DNN_OP_SUBMIT(ctx, dnn_insert_batchnorm_running(ctx->opts, &a, saved, ctx->m->hrunning[i]));
	return 0;
}

/* --batchnorm global, backward: chunk ctx->c's two sums (and its share of dgamma, dbeta); then
 * every chunk's dx. Every chunk walks the same nodes, so the accumulate-or-overwrite choice of
 * this chunk's dx (a->accumulate_dx, backward) is every chunk's. */
static int bwd_global_sums(dnn_op_ctx *ctx, int i, const dnn_batchnorm_args *a, starpu_data_handle_t T, int mode)
{
	const int relu = dnn_fuse_bn_relu_partner(ctx->p, i);
	const dnn_param *gamma = dnn_op_param(ctx->m, i, GAMMA), *beta = dnn_op_param(ctx->m, i, BETA);
	int gmode; /* the same as mode: both follow the plan's sum_redux */
	starpu_data_handle_t dg = dnn_op_grad(ctx, gamma, &gmode), db = dnn_op_grad(ctx, beta, &gmode);
	DNN_OP_SUBMIT(ctx, dnn_insert_batchnorm_sums_bwd(ctx->opts, a, dnn_op_out(ctx, ctx->g->nodes[i].inputs[0]),
							 dnn_op_saved(ctx, i), dnn_op_dy(ctx, relu >= 0 ? relu : i),
							 relu >= 0 ? dnn_op_out(ctx, relu) : NULL, T, dg, db, mode));
	return 0;
}

static int bwd_global_apply(dnn_op_ctx *ctx, int i, const dnn_batchnorm_args *a, starpu_data_handle_t G)
{
	const int i0 = ctx->g->nodes[i].inputs[0], relu = dnn_fuse_bn_relu_partner(ctx->p, i);
	const dnn_param *gamma = dnn_op_param(ctx->m, i, GAMMA);
	DNN_OP_SUBMIT(ctx, dnn_insert_batchnorm_bwd_global(ctx->opts, a, dnn_op_out(ctx, i0), gamma->hw, dnn_op_saved(ctx, i),
							   dnn_op_dy(ctx, relu >= 0 ? relu : i),
							   relu >= 0 ? dnn_op_out(ctx, relu) : NULL, G, dnn_op_dy(ctx, i0)));
	return 0;
}

static const global_pass bwd_global = {DNN_BN_BWD, bwd_global_sums, bwd_global_apply};

static int backward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const int i0 = nd->inputs[0], relu = dnn_fuse_bn_relu_partner(ctx->p, i);
	const dnn_param *gamma = dnn_op_param(ctx->m, i, GAMMA), *beta = dnn_op_param(ctx->m, i, BETA);
	starpu_data_handle_t x = dnn_op_out(ctx, i0), saved = dnn_op_saved(ctx, i), dx = dnn_op_dy(ctx, i0);
	dnn_batchnorm_args a = bn_args(ctx, nd, relu);
	a.accumulate_dx = dnn_op_take_dx(ctx, i0); /* i0 is never the net's input (infer) */
	if (ctx->p->bn_global) {
		a.global_n = ctx->p->bn_global_n;
		return global_walk(ctx, i, a, &bwd_global);
	}
	int mode; /* the chunk's partial gradients (RW), or the REDUX handles (chunksum.h) */
	starpu_data_handle_t dg = dnn_op_grad(ctx, gamma, &mode), db = dnn_op_grad(ctx, beta, &mode);
	if (dnn_fuse_bn_apply_conv(ctx->p, i) >= 0) /* level 3: no stored relu output; the mask from x */
		DNN_OP_SUBMIT(ctx, dnn_insert_batchnorm_relu_bwd_recompute(ctx->opts, &a, x, gamma->hw, beta->hw, saved,
									   dnn_op_dy(ctx, relu), dx, dg, db, mode));
	else if (relu >= 0)
		DNN_OP_SUBMIT(ctx, dnn_insert_batchnorm_relu_bwd(ctx->opts, &a, x, gamma->hw, saved, dnn_op_dy(ctx, relu),
								 dnn_op_out(ctx, relu), dx, dg, db, mode));
	else
		DNN_OP_SUBMIT(ctx, dnn_insert_batchnorm_bwd(ctx->opts, &a, x, gamma->hw, saved, dnn_op_dy(ctx, i), dx, dg,
							    db, mode));
	return 0;
}

/* Eval mode: BatchNormalization with the running statistics. */
static int export_onnx(dnn_onnx_ctx *x, int i)
{
	const dnn_node *nd = &x->g->nodes[i];
	int64_t d[1] = {nd->C};
	const char *in[5] = {x->v[nd->inputs[0]].val};
	if (!(in[1] = dnn_onnx_param(x, i, GAMMA, 1, d)) || !(in[2] = dnn_onnx_param(x, i, BETA, 1, d)) ||
	    !(in[3] = dnn_onnx_running(x, i, MEAN)) || !(in[4] = dnn_onnx_running(x, i, VAR)))
		return -1;
	dnn_onnx_attr_float(x, dnn_onnx_node1(x, "BatchNormalization", nd->name, 5, in, nd->name), "epsilon", nd->eps);
	x->v[i].rank = x->v[nd->inputs[0]].rank;
	return 0;
}

const dnn_op_desc dnn_op_batchnorm = {
	.name = "batchnorm", .min_inputs = 1, .max_inputs = 1, .keys = keys, .nkeys = 2, .infer = infer,
	.param_slots = slots, .nparam_slots = 2, .running_blocks = running_blocks, .nrunning_blocks = 2,
	.check_chunk = check_chunk, .create_params = create_params, .saved_floats = saved_floats, .forward = forward,
	.backward = backward, .export_onnx = export_onnx, .bf16_in = bf16_in,
	.image_only = 1,
};
