/* add.c — the residual add op: `add NAME IN1,IN2[,...]` (same shapes).
 * Kernels and codelets: codelets/add.{c,h}; inputs beyond the second are accumulated with the
 * gradient codelets. Backward gives each input its gradient, unless the plan's fusion (fuse.h)
 * made that input's gradient handle the add's own (then no task at all). */
#include "add.h"
#include "fuse.h"
#include "onnx_emit.h"
#include "op.h"
#include "vec.h"

static int infer(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	const dnn_node *in = &g->nodes[nd->inputs[0]];
	for (int k = 1; k < nd->ninputs; k++) {
		const dnn_node *o = &g->nodes[nd->inputs[k]];
		if (o->C != in->C || o->H != in->H || o->W != in->W || o->seq != in->seq)
			return dnn_op_fail(err, errlen, g->source, nd->line,
					   "%s: inputs have different shapes: %s is %dx%dx%d%s but %s is %dx%dx%d%s", nd->name,
					   in->name, in->C, in->H, in->W, in->seq ? " (a sequence)" : "", o->name, o->C, o->H,
					   o->W, o->seq ? " (a sequence)" : "");
	}
	dnn_op_infer_same_shape(g, nd, err, errlen);
	nd->flops = (double)nd->C * nd->H * nd->W * (nd->ninputs - 1);
	return 0;
}

static int forward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	starpu_data_handle_t y = dnn_op_out(ctx, i);
	dnn_add_args a = {.n = (long)ctx->n * nd->C * nd->H * nd->W,
			  .x_bf16 = dnn_op_out_bf16(ctx, nd->inputs[0]) | dnn_op_out_bf16(ctx, nd->inputs[1]) << 1};
	DNN_OP_SUBMIT(ctx, dnn_insert_add_fwd(ctx->opts, &a, dnn_op_out(ctx, nd->inputs[0]), dnn_op_out(ctx, nd->inputs[1]), y));
	for (int k = 2; k < nd->ninputs; k++)
		DNN_OP_SUBMIT(ctx, dnn_insert_vec_add(ctx->opts, y, STARPU_RW, dnn_op_out(ctx, nd->inputs[k])));
	return 0;
}

static int backward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	for (int k = 0; k < nd->ninputs; k++) {
		const int ik = nd->inputs[k];
		if (ik == 0)
			continue;
		if (dnn_fuse_shares_grad(ctx->p, ik, i)) {
			/* Its gradient is this add's, in the same handle: no task. */
			ctx->written[ik] = 1;
			continue;
		}
		dnn_add_args a = {.n = (long)ctx->n * nd->C * nd->H * nd->W, .accumulate_dx = dnn_op_take_dx(ctx, ik)};
		DNN_OP_SUBMIT(ctx, dnn_insert_add_bwd(ctx->opts, &a, dnn_op_dy(ctx, i), dnn_op_dy(ctx, ik)));
	}
	return 0;
}

/* bf16 activation storage (model.h y_bf16): the forward of two image tensors reads either in bf16 (a ResNet's
 * block input, a relu's output that its convs read in bf16 too; inputs beyond the second are added by vec.h's
 * fp32 codelet); the backward reads no input. Not on sequences: a transformer's residual adds would sum the
 * rounded outputs of its dense layers, which its plan keeps fp32 (docs/studies/2026-12-07-act-bf16-gpt.md). */
static int bf16_in(const dnn_plan *p, int i, int j)
{
	(void)j;
	const dnn_node *nd = &p->m->g->nodes[i];
	return nd->ninputs == 2 && !nd->seq;
}

/* Add (two inputs) or Sum, in 4-D when any input is. */
static int export_onnx(dnn_onnx_ctx *x, int i)
{
	const dnn_node *nd = &x->g->nodes[i];
	int any4 = 0;
	for (int j = 0; j < nd->ninputs; j++)
		any4 |= x->v[nd->inputs[j]].rank == 4;
	const char *ins[DNN_MAX_INPUTS];
	for (int j = 0; j < nd->ninputs; j++)
		ins[j] = any4 ? dnn_onnx_as4d(x, nd->inputs[j]) : x->v[nd->inputs[j]].val;
	dnn_onnx_node1(x, nd->ninputs == 2 ? "Add" : "Sum", nd->name, nd->ninputs, ins, nd->name);
	x->v[i].rank = any4 ? 4 : 2;
	return 0;
}

const dnn_op_desc dnn_op_add = {
	.name = "add", .min_inputs = 2, .max_inputs = DNN_MAX_INPUTS, .infer = infer, .forward = forward,
	.backward = backward, .routes_grads = 1, .bf16_in = bf16_in,
	.export_onnx = export_onnx,
};
