/* embed.c — the embed op: `embed NAME IDX vocab=V dim=C`, token + position embeddings (GPT-2's
 * wte and wpe). IDX is the net's `tokens` input (T ids); the output is the sequence [T][C]
 * y[t] = wte[id[t]] + wpe[t]. Parameters: slot 0 "wte" [V x C] (which lm_head also reads: weight
 * tying), slot 1 "wpe" [T x C], both weight-decayed, drawn from normal(0, 0.02) (GPT-2's init).
 * Backward: the scatter-add into their gradients, in token order; the ids have no gradient.
 * An id that is not an integer in [0, V) is a worker error (the run's error line), not a crash.
 * Kernels and codelets: codelets/embed.{c,h,cu}; ONNX: Cast (the ids to int64), Gather, Add. */
#include <math.h>
#include <stdint.h>

#include "dnn_rng.h"
#include "embed.h"
#include "onnx_emit.h"
#include "op.h"

/* Its keys live in int fields of dnn_node that other ops use for their own keys. */
#define VOCAB(nd) ((nd)->k) /* key vocab */
#define DIM(nd) ((nd)->out) /* key dim: the output's channels */
#define EMBED_MAX_VOCAB (1 << 24) /* ids are floats: every integer up to 2^24 is exact */

static const dnn_op_key keys[] = {DNN_KEY_INT("vocab", 1, EMBED_MAX_VOCAB, k),
				  DNN_KEY_INT("dim", 1, DNN_MAX_CHANNELS, out)};

enum { WTE, WPE };
static const dnn_op_param_slot slots[] = {[WTE] = {"wte", 0}, [WPE] = {"wpe", 0}};

static int check(const dnn_node *nd, const char *src, char *err, size_t errlen)
{
	if (VOCAB(nd) == 0 || DIM(nd) == 0)
		return dnn_op_fail(err, errlen, src, nd->line, "%s: embed needs vocab=V and dim=C", nd->name);
	return 0;
}

static int infer(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	const dnn_node *in = &g->nodes[nd->inputs[0]];
	if (in->op != DNN_OP_INPUT || !in->tokens)
		return dnn_op_fail(err, errlen, g->source, nd->line,
				   "%s: embed reads token ids: its input must be the net's `input NAME tokens T` line, but %s is %s",
				   nd->name, in->name, in->op == DNN_OP_INPUT ? "an input of floats" : dnn_op_name(in->op));
	const long long table = (long long)VOCAB(nd) * DIM(nd);
	if (table > INT32_MAX) /* one StarPU vector, int sizes in the kernels' arguments */
		return dnn_op_fail(err, errlen, g->source, nd->line,
				   "%s: its table wte of vocab %d x dim %d = %lld floats is more than %d", nd->name,
				   VOCAB(nd), DIM(nd), table, INT32_MAX);
	nd->C = DIM(nd), nd->H = in->H, nd->W = 1, nd->seq = 1;
	nd->params = table + (long long)in->H * DIM(nd);
	nd->flops = (double)in->H * DIM(nd); /* one add per output */
	return 0;
}

/* normal(0, std) by Box-Muller from two uniforms in (0, 1) of the model's generator. */
static float normal(uint64_t *rng, double std)
{
	const double u1 = dnn_uniform01(rng), u2 = dnn_uniform01(rng);
	return (float)(std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static int create_params(dnn_model *m, int i, uint64_t *rng, char *err, size_t errlen)
{
	const dnn_node *nd = &m->g->nodes[i];
	const long n[2] = {[WTE] = (long)VOCAB(nd) * DIM(nd), [WPE] = (long)nd->H * DIM(nd)};
	for (int s = WTE; s <= WPE; s++) {
		int p = dnn_model_add_param(m, i, s, n[s], err, errlen);
		if (p < 0)
			return -1;
#ifdef DNN_SIMGRID
		if (n[s] >= DNN_SIM_SHARED_PARAM_MIN) /* simulation: shared, unread storage (model.c); no init */
			continue;
#endif
		for (long j = 0; j < n[s]; j++) /* GPT-2 (and nanoGPT): nn.init.normal_(std=0.02) */
			m->params[p].w[j] = normal(rng, 0.02);
	}
	return 0;
}

static dnn_embed_args embed_args(const dnn_op_ctx *ctx, const dnn_node *nd)
{
	return (dnn_embed_args){.N = ctx->n, .T = nd->H, .V = VOCAB(nd), .C = DIM(nd)};
}

static int forward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const dnn_param *wte = dnn_op_param(ctx->m, i, WTE), *wpe = dnn_op_param(ctx->m, i, WPE);
	dnn_embed_args a = embed_args(ctx, nd);
	DNN_OP_SUBMIT(ctx, dnn_insert_embed_fwd(ctx->opts, &a, dnn_op_out(ctx, nd->inputs[0]), wte->hw, wpe->hw,
						dnn_op_out(ctx, i)));
	return 0;
}

static int backward(dnn_op_ctx *ctx, int i)
{
	/* No consumer wrote this node's gradient: its output is only an lm_head's table (that lm_head
	 * adds its part of wte's gradient itself), so y's gradient is zero and so are its parts. */
	if (!ctx->written[i])
		return 0;
	const dnn_node *nd = &ctx->g->nodes[i];
	const dnn_param *wte = dnn_op_param(ctx->m, i, WTE), *wpe = dnn_op_param(ctx->m, i, WPE);
	dnn_embed_args a = embed_args(ctx, nd);
	int mode; /* the chunk's partial gradients (RW), or the REDUX handles (chunksum.h) */
	starpu_data_handle_t dwte = dnn_op_grad(ctx, wte, &mode), dwpe = dnn_op_grad(ctx, wpe, &mode);
	DNN_OP_SUBMIT(ctx, dnn_insert_embed_bwd(ctx->opts, &a, dnn_op_out(ctx, nd->inputs[0]), dnn_op_dy(ctx, i), dwte,
						dwpe, mode));
	return 0;
}

/* Gather(wte, Cast(ids, int64)) [N, T, C] + wpe [T, C] (broadcast over N). */
static int export_onnx(dnn_onnx_ctx *x, int i)
{
	const dnn_node *nd = &x->g->nodes[i];
	int64_t ted[2] = {VOCAB(nd), DIM(nd)}, ped[2] = {nd->H, DIM(nd)};
	const char *te = dnn_onnx_param(x, i, WTE, 2, ted), *pe = dnn_onnx_param(x, i, WPE, 2, ped);
	if (!te || !pe)
		return -1;
	const char *ids = dnn_onnx_name(x, i, ".ids"), *tok = dnn_onnx_name(x, i, ".tok");
	dnn_onnx_attr_int(x, dnn_onnx_node1(x, "Cast", ids, 1, &x->v[nd->inputs[0]].val, ids), "to", 7 /* INT64 */);
	const char *g_in[2] = {te, ids}, *a_in[2] = {tok, pe};
	dnn_onnx_node1(x, "Gather", tok, 2, g_in, tok);
	dnn_onnx_node1(x, "Add", nd->name, 2, a_in, nd->name);
	x->v[i].rank = 3;
	return 0;
}

const dnn_op_desc dnn_op_embed = {
	.name = "embed", .min_inputs = 1, .max_inputs = 1, .keys = keys, .nkeys = 2, .check = check, .infer = infer,
	.param_slots = slots, .nparam_slots = 2, .create_params = create_params, .forward = forward,
	.backward = backward, .export_onnx = export_onnx,
};
