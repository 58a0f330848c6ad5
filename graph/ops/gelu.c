/* gelu.c — the gelu op: `gelu NAME IN`, the GELU of GPT-2 (tanh form, PyTorch's
 * gelu(approximate='tanh')), element-wise, same shape (a sequence stays one). Kernels and
 * codelets: codelets/gelu.{c,h}; ONNX (opset 17 has no Gelu): the tanh formula as nodes. */
#include "gelu.h"
#include "onnx_emit.h"
#include "op.h"

static int infer(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	dnn_op_infer_same_shape(g, nd, err, errlen);
	nd->flops = 8.0 * nd->C * nd->H * nd->W; /* 6 multiplies and adds, a tanh */
	return 0;
}

static int forward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	dnn_gelu_args a = {.n = (long)ctx->n * nd->C * nd->H * nd->W, .y_bf16 = dnn_op_out_bf16(ctx, i)};
	DNN_OP_SUBMIT(ctx, dnn_insert_gelu_fwd(ctx->opts, &a, dnn_op_out(ctx, nd->inputs[0]), dnn_op_out(ctx, i)));
	return 0;
}

static int backward(dnn_op_ctx *ctx, int i)
{
	const dnn_node *nd = &ctx->g->nodes[i];
	const int i0 = nd->inputs[0];
	const int acc = dnn_op_take_dx(ctx, i0);
	if (i0 == 0)
		return 0; /* the net's input has no gradient */
	dnn_gelu_args a = {.n = (long)ctx->n * nd->C * nd->H * nd->W, .accumulate_dx = acc};
	DNN_OP_SUBMIT(ctx, dnn_insert_gelu_bwd(ctx->opts, &a, dnn_op_out(ctx, i0), dnn_op_dy(ctx, i), dnn_op_dy(ctx, i0)));
	return 0;
}

/* bf16 activation storage (model.h y_bf16): the forward can write y in bf16; the backward reads
 * x, not y. */
static int bf16_out(const dnn_plan *p, int i)
{
	(void)i;
	return p->cfg.bf16;
}

/* y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) as Mul, Add and Tanh nodes with scalar
 * constants (Gelu with approximate="tanh" needs opset 20). */
static int export_onnx(dnn_onnx_ctx *x, int i)
{
	const dnn_node *nd = &x->g->nodes[i];
	const char *v = x->v[nd->inputs[0]].val;
	static const float k[4] = {0.044715f, 0.7978845608028654f, 1.0f, 0.5f};
	static const char *const kname[4] = {".kappa", ".beta", ".one", ".half"};
	static const int64_t scalar[1] = {1}; /* dims of a rank-0 tensor: none are read */
	const char *c[4];
	for (int j = 0; j < 4; j++)
		c[j] = dnn_onnx_init(x, dnn_onnx_name(x, i, kname[j]), 0, scalar, &k[j]);
	/* the intermediate values, each a node of the same name */
	const char *x2 = dnn_onnx_name(x, i, ".x2"), *x3 = dnn_onnx_name(x, i, ".x3"), *kx3 = dnn_onnx_name(x, i, ".kx3"),
		   *s = dnn_onnx_name(x, i, ".sum"), *u = dnn_onnx_name(x, i, ".inner"), *t = dnn_onnx_name(x, i, ".tanh"),
		   *t1 = dnn_onnx_name(x, i, ".onept"), *hx = dnn_onnx_name(x, i, ".halfx");
	const char *in[2];
	in[0] = v, in[1] = v;
	dnn_onnx_node1(x, "Mul", x2, 2, in, x2);
	in[0] = x2, in[1] = v;
	dnn_onnx_node1(x, "Mul", x3, 2, in, x3);
	in[0] = c[0], in[1] = x3;
	dnn_onnx_node1(x, "Mul", kx3, 2, in, kx3);
	in[0] = v, in[1] = kx3;
	dnn_onnx_node1(x, "Add", s, 2, in, s);
	in[0] = c[1], in[1] = s;
	dnn_onnx_node1(x, "Mul", u, 2, in, u);
	dnn_onnx_node1(x, "Tanh", t, 1, &u, t);
	in[0] = c[2], in[1] = t;
	dnn_onnx_node1(x, "Add", t1, 2, in, t1);
	in[0] = c[3], in[1] = v;
	dnn_onnx_node1(x, "Mul", hx, 2, in, hx);
	in[0] = hx, in[1] = t1;
	dnn_onnx_node1(x, "Mul", nd->name, 2, in, nd->name);
	x->v[i].rank = x->v[nd->inputs[0]].rank;
	return 0;
}

const dnn_op_desc dnn_op_gelu = {
	.name = "gelu", .min_inputs = 1, .max_inputs = 1, .infer = infer, .bf16_out = bf16_out, .forward = forward,
	.backward = backward,
	.export_onnx = export_onnx,
};
