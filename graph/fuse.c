/* fuse.c — fusion decisions (fuse.h). */
#include "fuse.h"

#include <stdlib.h>

#include <starpu.h>

#include "errline.h"

/* A fusion level in 0..3. */
static int fuse_level(int level) { return level < 0 ? 0 : level > 3 ? 3 : level; }

/* The index of the first node after i that reads i (its only reader when i has one); -1 if none. */
static int first_consumer(const dnn_graph *g, int i)
{
	for (int j = i + 1; j < g->nnodes; j++)
		for (int k = 0; k < g->nodes[j].ninputs; k++)
			if (g->nodes[j].inputs[k] == i)
				return j;
	return -1;
}

int dnn_graph_bn_relu(const dnn_graph *g, int i)
{
	if (i <= 0 || i >= g->nnodes || g->nodes[i].op != DNN_OP_BATCHNORM || g->nodes[i].nconsumers != 1)
		return -1;
	const int j = first_consumer(g, i);
	return j >= 0 && g->nodes[j].op == DNN_OP_RELU ? j : -1;
}

int dnn_fuse_bn_relu_partner(const dnn_plan *p, int i) { return p->bn_relu[i]; }

int dnn_graph_relu_pool(const dnn_graph *g, int i)
{
	if (i <= 0 || i >= g->nnodes || g->nodes[i].op != DNN_OP_RELU || g->nodes[i].nconsumers != 1 ||
	    dnn_graph_bn_relu(g, g->nodes[i].inputs[0]) >= 0)
		return -1;
	/* The relu's input has no other reader: the pool's backward is then the only writer of its
	 * gradient, at the relu's turn (no accumulation order changes). */
	const int i0 = g->nodes[i].inputs[0];
	if (i0 == 0 || g->nodes[i0].nconsumers != 1)
		return -1;
	const int j = first_consumer(g, i);
	return j >= 0 && g->nodes[j].op == DNN_OP_MAXPOOL && g->nodes[j].ninputs == 1 ? j : -1;
}

int dnn_fuse_relu_pool_partner(const dnn_plan *p, int i) { return p->relu_pool[i]; }

int dnn_fuse_conv_bias(const dnn_plan *p, int i)
{
	const dnn_node *nd = &p->m->g->nodes[i];
	return p->fuse >= 2 && nd->op == DNN_OP_CONV && nd->bias;
}

int dnn_graph_bn_conv(const dnn_graph *g, int i, int *conv_a, int *conv_b)
{
	const int r = dnn_graph_bn_relu(g, i);
	if (r < 0 || g->nodes[r].nconsumers != 1)
		return -1;
	const int a = g->nodes[i].inputs[0], b = first_consumer(g, r);
	/* A's output is the batchnorm's alone (its statistics are A's task's), without a bias (added after the
	 * conv, it would miss the statistics); B reads the relu as its only input. */
	if (g->nodes[a].op != DNN_OP_CONV || g->nodes[a].nconsumers != 1 || g->nodes[a].bias || b < 0 ||
	    g->nodes[b].op != DNN_OP_CONV || g->nodes[b].ninputs != 1)
		return -1;
	*conv_a = a, *conv_b = b;
	return 0;
}

/* Level 3 holds in a plan with local statistics: --batchnorm global sums over chunks between the two
 * (dnn_plan_set_batchnorm comes after dnn_fuse_plan, so this is asked at submission). */
int dnn_fuse_bn_stats_conv(const dnn_plan *p, int i) { return p->bn_global ? -1 : p->bn_stats_conv[i]; }
int dnn_fuse_bn_apply_conv(const dnn_plan *p, int i) { return p->bn_global ? -1 : p->bn_apply_conv[i]; }

int dnn_fuse_shares_grad(const dnn_plan *p, int ik, int a) { return p->grad_of[ik] == p->grad_of[a]; }

/* Residual-add gradients. The add's backward gives each input's gradient its own dy. An input
 * ik joins the add's gradient handle (its "class": the handle of the add at the root of a chain
 * of single-consumer adds) instead, with no task, when that is exact under StarPU's sequential
 * consistency (backward tasks are submitted in decreasing node index):
 *   - ik has only this add as consumer: its backward reads the handle, which nobody writes
 *     between the add's consumers and the last reader, provided no accumulating writer (below)
 *     of the class comes before it: ik > maxw;
 *   - or ik has other consumers W (at most one such input per class): they accumulate their part
 *     into the shared handle (ik's gradient = the add's + theirs). This is exact only when every
 *     other reader of the handle is submitted before them (max W < every other member's index,
 *     the adds' included), and ik reads it after them (automatic: W > ik).
 * A relu fused with its batchnorm joins only as the input with other consumers: the fused
 * backward (at the batchnorm's index, below the relu's) masks its dy in place (CUDA), after
 * every other reader of the handle then (they all come after W). Inputs listed twice by one
 * add, and the net's input (no gradient), keep the copy task. */
static void fuse_residual_grads(dnn_plan *p, int *minr, int *maxw, char *multi)
{
	const dnn_graph *g = p->m->g;
	const int nn = g->nnodes;
	for (int a = nn - 2; a >= 1; a--) {
		const dnn_node *nd = &g->nodes[a];
		if (nd->op != DNN_OP_ADD)
			continue;
		const int r = p->grad_of[a];
		if (a < minr[r])
			minr[r] = a; /* the add's own copy tasks, if any, read the handle here */
		for (int pass = 0; pass < 2; pass++) /* single-consumer inputs first: they bound W */
			for (int k = 0; k < nd->ninputs; k++) {
				const int ik = nd->inputs[k];
				int twice = 0;
				for (int l = 0; l < nd->ninputs; l++)
					twice |= l != k && nd->inputs[l] == ik;
				if (ik == 0 || twice)
					continue;
				const int single = g->nodes[ik].nconsumers == 1;
				const int fused_relu = g->nodes[ik].op == DNN_OP_RELU && p->bn_relu[ik] >= 0;
				if (pass == 0 && single && !fused_relu && ik > maxw[r]) {
					p->grad_of[ik] = r;
					if (ik < minr[r])
						minr[r] = ik;
				} else if (pass == 1 && !single && !multi[r]) {
					int w_max = 0;
					for (int w = ik + 1; w < nn; w++)
						for (int l = 0; w != a && l < g->nodes[w].ninputs; l++)
							if (g->nodes[w].inputs[l] == ik && w > w_max)
								w_max = w;
					if (w_max < minr[r] && w_max < a) {
						p->grad_of[ik] = r;
						multi[r] = 1;
						maxw[r] = w_max;
					}
				}
			}
	}
}

int dnn_fuse_plan(dnn_plan *p, char *err, size_t errlen)
{
	const dnn_graph *g = p->m->g;
	const int nn = g->nnodes;
	p->bn_relu = malloc((size_t)nn * sizeof(int));
	p->relu_pool = malloc((size_t)nn * sizeof(int));
	p->grad_of = malloc((size_t)nn * sizeof(int));
	p->bn_stats_conv = malloc((size_t)nn * sizeof(int));
	p->bn_apply_conv = malloc((size_t)nn * sizeof(int));
	int *minr = malloc((size_t)nn * sizeof(int)), *maxw = calloc((size_t)nn, sizeof(int));
	char *multi = calloc((size_t)nn, 1);
	int rc = 0;
	if (!p->bn_relu || !p->relu_pool || !p->grad_of || !p->bn_stats_conv || !p->bn_apply_conv || !minr || !maxw ||
	    !multi) {
		dnn_set_err(err, errlen, g->source, "out of memory creating the activation plan");
		rc = -1;
		goto out;
	}
	for (int i = 0; i < nn; i++)
		p->bn_relu[i] = -1, p->relu_pool[i] = -1, p->grad_of[i] = i, minr[i] = nn, p->bn_stats_conv[i] = -1,
		p->bn_apply_conv[i] = -1;
	p->fuse = fuse_level(p->cfg.fuse); /* DNN_FUSE=0: off, for comparisons */
	for (int i = 1; p->fuse && i < nn; i++) {
		const int j = dnn_graph_bn_relu(g, i);
		if (j >= 0)
			p->bn_relu[i] = j, p->bn_relu[j] = i;
		const int m = dnn_graph_relu_pool(g, i);
		if (m >= 0)
			p->relu_pool[i] = m, p->relu_pool[m] = i;
	}
	if (p->fuse && p->train)
		fuse_residual_grads(p, minr, maxw, multi);
	/* Level 3's tasks have CPU kernels only (codelets/conv2d_bnfuse.h): with a CUDA worker the plan stays at
	 * level 2. Training only: evaluation normalises with the running statistics in one task already. */
	const int bn_conv = p->fuse >= 3 && p->train && starpu_worker_get_count_by_type(STARPU_CUDA_WORKER) == 0;
	for (int i = 1; bn_conv && i < nn; i++) {
		int a, b;
		if (dnn_graph_bn_conv(g, i, &a, &b) == 0)
			p->bn_stats_conv[i] = a, p->bn_stats_conv[a] = i, p->bn_apply_conv[i] = b, p->bn_apply_conv[b] = i;
	}
out:
	free(minr), free(maxw), free(multi);
	return rc;
}

void dnn_fuse_print_summary(const dnn_graph *g, int fuse, FILE *out)
{
	/* Execution, not shape: the layers of the summary are all computed, some in a shared task. */
	const int level = fuse_level(fuse);
	int bn_relu = 0, relu_pool = 0, conv_bias = 0, bn_conv = 0, a, b;
	for (int i = 0; level >= 1 && i < g->nnodes; i++) {
		bn_relu += dnn_graph_bn_relu(g, i) >= 0;
		relu_pool += dnn_graph_relu_pool(g, i) >= 0;
	}
	for (int i = 0; level >= 2 && i < g->nnodes; i++)
		conv_bias += g->nodes[i].op == DNN_OP_CONV && g->nodes[i].bias;
	for (int i = 1; level >= 3 && i < g->nnodes; i++)
		bn_conv += dnn_graph_bn_conv(g, i, &a, &b) == 0;
	fprintf(out,
		"fused tasks (DNN_FUSE=%d): %d batchnorm+relu (the batchnorm's output is not stored), %d relu+maxpool "
		"(the relu's output is not stored), %d conv+bias, %d batchnorm+relu into its convs (training, local "
		"statistics, CPU workers only)\n",
		level, bn_relu, relu_pool, conv_bias, bn_conv);
}
