/* input.c — the input line: `input NAME C H W`, the sample shape. It is parsed by graph.c (its
 * operands are a shape, not keys) and its "forward" is the data source's load task (model.c). */
#include "op.h"

static int infer(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	(void)g, (void)err, (void)errlen;
	nd->params = 0;
	nd->flops = 0;
	return 0;
}

const dnn_op_desc dnn_op_input = {.name = "input", .min_inputs = 0, .max_inputs = 0, .infer = infer};
