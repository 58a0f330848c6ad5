/* op.c — the op table (built from ops/ops.def) and the helpers the op files share (op.h). */
#include "op.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "chunksum.h"
#include "dnn_rng.h"
#include "errline.h"

#define DNN_OP(name, ENUM) extern const dnn_op_desc dnn_op_##name;
#include "ops/ops.def"
#undef DNN_OP

static const dnn_op_desc *const op_table[DNN_OP_COUNT] = {
#define DNN_OP(name, ENUM) [DNN_OP_##ENUM] = &dnn_op_##name,
#include "ops/ops.def"
#undef DNN_OP
};

const dnn_op_desc *dnn_op_get(dnn_op op) { return (unsigned)op < DNN_OP_COUNT ? op_table[op] : NULL; }

const char *dnn_op_name(dnn_op op) { return (unsigned)op < DNN_OP_COUNT ? op_table[op]->name : "?"; }

int dnn_op_fail(char *err, size_t errlen, const char *src, int line, const char *fmt, ...)
{
	char where[4352]; /* a path (PATH_MAX) and a line number */
	if (line > 0)
		snprintf(where, sizeof(where), "%s:%d", src, line);
	else
		snprintf(where, sizeof(where), "%s", src);
	va_list ap;
	va_start(ap, fmt);
	dnn_vset_err(err, errlen, where, fmt, ap);
	va_end(ap);
	return -1;
}

int dnn_op_check_int_elems(const dnn_graph *g, const dnn_node *nd, const char *what, const dnn_node *t, int n,
			   char *err, size_t errlen)
{
	const long long elems = (long long)n * t->C * t->H * t->W;
	if (elems <= INT_MAX)
		return 0;
	return dnn_op_fail(err, errlen, g->source, nd->line,
			   "%s: its %s for a chunk of %d samples, %dx%dx%dx%d = %lld floats, is more than the %d "
			   "elements a cuDNN tensor takes: use more --chunks or a smaller --batch",
			   nd->name, what, n, n, t->C, t->H, t->W, elems, INT_MAX);
}

int dnn_op_infer_same_shape(dnn_graph *g, dnn_node *nd, char *err, size_t errlen)
{
	(void)err, (void)errlen;
	const dnn_node *in = &g->nodes[nd->inputs[0]];
	nd->C = in->C, nd->H = in->H, nd->W = in->W, nd->seq = in->seq;
	nd->params = 0;
	nd->flops = (double)in->C * in->H * in->W;
	return 0;
}

const dnn_op_param_slot dnn_op_linear_slots[2] = {[DNN_SLOT_WEIGHT] = {"weight", 0}, [DNN_SLOT_BIAS] = {"bias", 1}};

dnn_param *dnn_op_param(const dnn_model *m, int i, int slot)
{
	const int p = m->param_of[i] + slot;
	if (m->param_of[i] < 0 || slot < 0 || p >= m->nparams || m->params[p].node != i || m->params[p].slot != slot)
		return NULL;
	return &m->params[p];
}

starpu_data_handle_t dnn_op_grad(const dnn_op_ctx *ctx, const dnn_param *pr, int *mode)
{
	return dnn_chunksum_grad(ctx->p, (int)(pr - ctx->m->params), ctx->c, mode);
}

int dnn_op_params_linear(dnn_model *m, int i, long fan_in, long nweights, uint64_t *rng, char *err, size_t errlen)
{
	const dnn_node *nd = &m->g->nodes[i];
	int pw = dnn_model_add_param(m, i, DNN_SLOT_WEIGHT, nweights, err, errlen);
	if (pw < 0)
		return -1;
	/* PyTorch's default for Conv2d/Linear (kaiming_uniform with a=sqrt(5)): weights and biases
	 * uniform in +-1/sqrt(fan_in). Same init as the side-by-side PyTorch nets. */
	float bound = 1.0f / sqrtf((float)fan_in);
#ifdef DNN_SIMGRID
	if (nweights >= DNN_SIM_SHARED_PARAM_MIN) /* simulation: shared, unread storage (model.c); no init */
		nweights = 0;
#endif
	for (long j = 0; j < nweights; j++)
		m->params[pw].w[j] = bound * (float)(2.0 * dnn_uniform01(rng) - 1.0);
	if (nd->bias) {
		int pb = dnn_model_add_param(m, i, DNN_SLOT_BIAS, nd->out, err, errlen);
		if (pb < 0)
			return -1;
		for (long j = 0; j < nd->out; j++)
			m->params[pb].w[j] = bound * (float)(2.0 * dnn_uniform01(rng) - 1.0);
	}
	return 0;
}

starpu_data_handle_t dnn_op_out(const dnn_op_ctx *ctx, int j)
{
	const dnn_plan *p = ctx->p;
	return j == 0 ? p->x[ctx->slot * p->nchunks + ctx->c] : p->y[j * p->nchunks + ctx->c];
}

starpu_data_handle_t dnn_op_dy(const dnn_op_ctx *ctx, int j)
{
	const dnn_plan *p = ctx->p;
	return j == 0 ? NULL : p->dy[p->grad_of[j] * p->nchunks + ctx->c];
}

starpu_data_handle_t dnn_op_saved(const dnn_op_ctx *ctx, int j) { return ctx->p->saved[j * ctx->p->nchunks + ctx->c]; }

int dnn_op_out_bf16(const dnn_op_ctx *ctx, int j) { return j > 0 && ctx->p->y_bf16 && ctx->p->y_bf16[j]; }

int dnn_op_take_dx(dnn_op_ctx *ctx, int j)
{
	const int acc = ctx->written[j];
	ctx->written[j] = 1;
	return acc;
}

int dnn_op_count(dnn_op_ctx *ctx, int rc)
{
	if (rc == 0)
		ctx->p->tasks_per_step++;
	return rc;
}
