/* unit_op_contracts — the op descriptors' contracts with the model (graph/op.h), written as fields
 * instead of being assumed:
 *  - parameter tensors are the op's named slots (param_slots): every tensor of a created model
 *    knows its node and slot, dnn_op_param finds it there (and nothing where a node has no such
 *    tensor: a conv without bias), its name is "<node>.<slot>" and weight decay follows the slot;
 *  - dnn_model_add_param refuses, with one line naming the node, a slot the op does not declare,
 *    a slot out of order or added twice, and a node's tensors interleaved with another node's;
 *  - running statistics are the op's running_blocks x C floats (m->running_n), and
 *    dnn_model_add_running refuses an op that declares none and a second call;
 *  - every op has an ONNX export (export_onnx), and its slots and running blocks have names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "model.h"
#include "op.h"
#include "test_util.h"

static const char *net_text = "input x 1 12 12\n"
			      "conv c1 x out=4 k=3 pad=1 bias=1\n"
			      "batchnorm b1 c1\n"
			      "relu r1 b1\n"
			      "dropout d1 r1 p=0.25\n"
			      "maxpool p1 d1 k=2\n"
			      "conv c2 p1 out=4 k=3 pad=1\n"
			      "add a1 c2,p1\n"
			      "avgpool gp a1\n"
			      "dense f1 gp out=3\n"
			      "softmax_xent loss f1\n";

static int node_of(const dnn_graph *g, const char *name)
{
	for (int i = 0; i < g->nnodes; i++)
		if (strcmp(g->nodes[i].name, name) == 0)
			return i;
	return -1;
}

/* A created model: every tensor where its slot says, and the running statistics' layout. */
static void check_created(dnn_graph *g)
{
	char err[512] = "";
	dnn_model m;
	if (dnn_model_create(&m, g, 1, err, sizeof(err)) != 0) {
		TEST_CHECK(0, "dnn_model_create: %s", err);
		return;
	}
	int seen = 0;
	for (int i = 0; i < g->nnodes; i++) {
		const dnn_op_desc *d = dnn_op_get(g->nodes[i].op);
		for (int s = 0; s < d->nparam_slots; s++) {
			const dnn_param *p = dnn_op_param(&m, i, s);
			if (!p)
				continue;
			seen++;
			char want[128];
			snprintf(want, sizeof(want), "%s.%s", g->nodes[i].name, d->param_slots[s].name);
			TEST_CHECK(p->node == i && p->slot == s && strcmp(p->name, want) == 0 &&
					   p->no_decay == d->param_slots[s].no_decay,
				   "node %s slot %d: tensor %s (node %d slot %d no_decay %d)", g->nodes[i].name, s, p->name,
				   p->node, p->slot, p->no_decay);
		}
		TEST_CHECK(dnn_op_param(&m, i, d->nparam_slots) == NULL && dnn_op_param(&m, i, -1) == NULL,
			   "node %s: a tensor beyond its slots", g->nodes[i].name);
		size_t want_running = (size_t)d->nrunning_blocks * (size_t)g->nodes[i].C;
		TEST_CHECK(m.running_n[i] == want_running && (m.running[i] != NULL) == (want_running > 0),
			   "node %s: %zu running floats, want %zu", g->nodes[i].name, m.running_n[i], want_running);
	}
	TEST_CHECK(seen == m.nparams, "%d tensors found by slot, the model has %d", seen, m.nparams);
	/* conv c1 has weight and bias, c2 (bias=0) only the weight; dense always both. */
	const int c1 = node_of(g, "c1"), c2 = node_of(g, "c2"), f1 = node_of(g, "f1"), b1 = node_of(g, "b1");
	TEST_CHECK(dnn_op_param(&m, c1, DNN_SLOT_BIAS) && !dnn_op_param(&m, c2, DNN_SLOT_BIAS) &&
			   dnn_op_param(&m, c2, DNN_SLOT_WEIGHT) && dnn_op_param(&m, f1, DNN_SLOT_BIAS),
		   "conv/dense slots");
	TEST_CHECK(dnn_op_param(&m, c1, DNN_SLOT_WEIGHT)->n == 4 * 1 * 3 * 3 && dnn_op_param(&m, f1, DNN_SLOT_WEIGHT)->n == 3 * 4,
		   "weight sizes");
	/* batch norm: running mean 0 then running var 1, C each */
	int ok = m.running[b1] != NULL;
	for (int c = 0; ok && c < 4; c++)
		ok = m.running[b1][c] == 0.0f && m.running[b1][4 + c] == 1.0f;
	TEST_CHECK(ok, "batchnorm running statistics: mean 0 then var 1");
	dnn_model_destroy(&m);
}

/* A model with nothing added yet and not registered with StarPU (what create_params sees). */
static void bare_model(dnn_model *m, dnn_graph *g)
{
	memset(m, 0, sizeof(*m));
	m->g = g;
	const size_t n = g->nnodes > 0 ? (size_t)g->nnodes : 1;
	for (int i = 0; i < g->nnodes; i++)
		m->params_cap += dnn_op_get(g->nodes[i].op)->nparam_slots;
	m->params = calloc((size_t)m->params_cap, sizeof(dnn_param));
	m->param_of = malloc(n * sizeof(int));
	m->running = calloc(n, sizeof(float *));
	m->running_n = calloc(n, sizeof(size_t));
	if (!m->params || !m->param_of || !m->running || !m->running_n) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	for (int i = 0; i < g->nnodes; i++)
		m->param_of[i] = -1;
}

/* rc (the call's own return: -1, or 0 for a NULL pointer) must be -1 with one line in err
 * naming node `name`; the caller clears err before the call, so the line is the call's. */
static void expect_refused(int rc, const char *err, const char *name, const char *what)
{
	TEST_CHECK(rc == -1, "%s: accepted", what);
	TEST_CHECK(strstr(err, name) != NULL && strchr(err, '\n') == NULL, "%s: error '%s' (want one line naming %s)",
		   what, err, name);
	printf("refused, %s: %s\n", what, err);
}

static void check_refusals(dnn_graph *g)
{
	char err[512];
	dnn_model m;
	const int c1 = node_of(g, "c1"), c2 = node_of(g, "c2"), f1 = node_of(g, "f1"), b1 = node_of(g, "b1");
	const int r1 = node_of(g, "r1");
	bare_model(&m, g);
	err[0] = '\0';
	expect_refused(dnn_model_add_param(&m, c1, DNN_SLOT_BIAS, 4, err, sizeof(err)), err, "c1", "bias before weight");
	TEST_CHECK(m.nparams == 0, "a refused tensor was added");
	TEST_CHECK(dnn_model_add_param(&m, c1, DNN_SLOT_WEIGHT, 36, err, sizeof(err)) == 0, "c1 weight: %s", err);
	err[0] = '\0';
	expect_refused(dnn_model_add_param(&m, c1, DNN_SLOT_WEIGHT, 36, err, sizeof(err)), err, "c1", "weight twice");
	TEST_CHECK(dnn_model_add_param(&m, c1, DNN_SLOT_BIAS, 4, err, sizeof(err)) == 1, "c1 bias: %s", err);
	err[0] = '\0';
	expect_refused(dnn_model_add_param(&m, c1, 2, 4, err, sizeof(err)), err, "c1", "a third tensor on a conv");
	err[0] = '\0';
	expect_refused(dnn_model_add_param(&m, r1, 0, 4, err, sizeof(err)), err, "r1", "a tensor on a relu");
	TEST_CHECK(dnn_model_add_param(&m, c2, DNN_SLOT_WEIGHT, 144, err, sizeof(err)) == 2, "c2 weight: %s", err);
	TEST_CHECK(dnn_model_add_param(&m, f1, DNN_SLOT_WEIGHT, 12, err, sizeof(err)) == 3, "f1 weight: %s", err);
	err[0] = '\0';
	expect_refused(dnn_model_add_param(&m, c2, DNN_SLOT_BIAS, 4, err, sizeof(err)), err, "c2",
		       "a node's tensors interleaved with another's");
	TEST_CHECK(m.nparams == 4, "%d tensors after the refusals, want 4", m.nparams);
	TEST_CHECK(dnn_op_param(&m, c1, DNN_SLOT_BIAS) == &m.params[1] && dnn_op_param(&m, f1, DNN_SLOT_BIAS) == NULL,
		   "dnn_op_param after the refusals");
	err[0] = '\0';
	expect_refused(dnn_model_add_running(&m, c1, err, sizeof(err)) ? 0 : -1, err, "c1", "running statistics on a conv");
	float *r = dnn_model_add_running(&m, b1, err, sizeof(err));
	TEST_CHECK(r != NULL && m.running_n[b1] == 2 * 4, "batchnorm running: %s (%zu floats)", r ? "" : err,
		   m.running_n[b1]);
	err[0] = '\0';
	expect_refused(dnn_model_add_running(&m, b1, err, sizeof(err)) ? 0 : -1, err, "b1", "running statistics twice");
	dnn_model_destroy(&m);
}

int main(int argc, char **argv)
{
	/* Every op says what it becomes in ONNX, and its slots have names. */
	for (int op = 0; op < DNN_OP_COUNT; op++) {
		const dnn_op_desc *d = dnn_op_get((dnn_op)op);
		TEST_CHECK(d && d->export_onnx, "op %d (%s) has no export_onnx", op, d ? d->name : "?");
		for (int s = 0; d && s < d->nparam_slots; s++)
			TEST_CHECK(d->param_slots[s].name && d->param_slots[s].name[0], "op %s: slot %d has no name", d->name, s);
		for (int k = 0; d && k < d->nrunning_blocks; k++)
			TEST_CHECK(d->running_blocks[k] && d->running_blocks[k][0], "op %s: running block %d has no name",
				   d->name, k);
	}
	dnn_graph g;
	char err[512];
	if (dnn_graph_parse(&g, net_text, "contracts.net", err, sizeof(err)) != 0) {
		TEST_CHECK(0, "%s", err);
		return test_report("unit_op_contracts");
	}
	check_refusals(&g);
	test_starpu_init(&argc, &argv);
	check_created(&g);
	test_starpu_shutdown();
	dnn_graph_free(&g);
	return test_report("unit_op_contracts");
}
