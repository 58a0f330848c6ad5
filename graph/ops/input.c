/* input.c — the input line: `input NAME C H W`, the sample shape. It is parsed by graph.c (its
 * operands are a shape, not keys) and its "forward" is the data source's load task (model.c). */
#include <stdlib.h>

#include "onnx_emit.h"
#include "op.h"

static int infer(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	(void)g, (void)err, (void)errlen;
	nd->params = 0;
	nd->flops = 0;
	return 0;
}

/* A sequence's input is its values (N x T token ids, or N x T x C). An image model's input is
 * DNN_ONNX_INPUT, pixel values 0-255; the normalisation of load_images.c is
 * in the model: x = pixel * (1 / (255 std)) - mean / std, a Mul and a Sub per channel. */
static int export_onnx(dnn_onnx_ctx *x, int i)
{
	const dnn_node *nd = &x->g->nodes[i];
	const dnn_model *m = x->m;
	if (nd->seq) { /* token ids or a float sequence: taken as they are */
		const char *in = DNN_ONNX_INPUT;
		dnn_onnx_node1(x, "Identity", nd->name, 1, &in, nd->name);
		x->v[i].rank = nd->tokens ? 2 : 3;
		return 0;
	}
	float *scale = malloc(sizeof(float) * (size_t)nd->C), *shift = malloc(sizeof(float) * (size_t)nd->C);
	const char *ts = NULL, *tsh = NULL;
	if (scale && shift) {
		for (int c = 0; c < nd->C; c++)
			scale[c] = 1.0f / (255.0f * m->in_std[c]), shift[c] = m->in_mean[c] / m->in_std[c];
		int64_t dims[4] = {1, nd->C, 1, 1};
		ts = dnn_onnx_init(x, "input.scale", 4, dims, scale);
		tsh = dnn_onnx_init(x, "input.shift", 4, dims, shift);
	}
	free(scale), free(shift);
	if (!ts || !tsh)
		return dnn_onnx_fail(x, i, "out of memory for the input normalisation");
	const char *a[2] = {DNN_ONNX_INPUT, ts}, *scaled = dnn_onnx_name(x, i, ".scaled");
	dnn_onnx_node1(x, "Mul", dnn_onnx_name(x, i, ".scale"), 2, a, scaled);
	const char *b[2] = {scaled, tsh};
	dnn_onnx_node1(x, "Sub", dnn_onnx_name(x, i, ".normalise"), 2, b, nd->name);
	return 0;
}

const dnn_op_desc dnn_op_input = {
	.name = "input", .min_inputs = 0, .max_inputs = 0, .infer = infer, .export_onnx = export_onnx,
};
