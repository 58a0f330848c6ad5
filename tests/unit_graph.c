/* unit_graph — built-in nets parse, and their parameter and FLOP counts match the standard
 * definitions (torchvision for ResNet-18/50; LeNet-5's classic count); the canonical text round
 * trips; "the same net" (dnn_graph_compare, dnn_graph_fingerprint) sees every key of every op. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "op.h"
#include "test_util.h"

static void check_net(const char *name, long long want_params, double want_gmacs, double tol_rel)
{
	dnn_graph g;
	char err[512];
	if (dnn_graph_load(&g, name, err, sizeof(err)) != 0) {
		TEST_CHECK(0, "%s: %s", name, err);
		return;
	}
	long long p = dnn_graph_params(&g);
	/* MACs of conv + dense layers: the "FLOPs" figure papers quote for ResNets. */
	double macs = 0;
	for (int i = 0; i < g.nnodes; i++)
		if (g.nodes[i].op == DNN_OP_CONV || g.nodes[i].op == DNN_OP_DENSE)
			macs += (g.nodes[i].flops - (g.nodes[i].bias ? g.nodes[i].C * g.nodes[i].H * g.nodes[i].W : 0)) / 2;
	printf("%-9s params %10lld  conv+dense MACs %.4g G  fwd FLOPs %.4g G  classes %d\n", name, p, macs / 1e9,
	       dnn_graph_flops_fwd(&g) / 1e9, g.classes);
	TEST_CHECK(p == want_params, "%s: %lld parameters, want %lld", name, p, want_params);
	if (want_gmacs > 0)
		TEST_CHECK(fabs(macs / 1e9 - want_gmacs) <= tol_rel * want_gmacs, "%s: %.4f GMACs, want %.4f", name,
			   macs / 1e9, want_gmacs);
	dnn_graph_free(&g);
}

/* dnn_graph_to_text: every built-in net, rewritten (--input, classes) and not, parses back to a
 * net with the same fingerprint and the same text (what checkpoints carry); so does a net with
 * dropout, dilation, padded pooling and a 3-way add. */
static void check_text_round_trip(dnn_graph *g, const char *what)
{
	char err[512];
	char *t = dnn_graph_to_text(g, "net test, round trip");
	TEST_CHECK(t != NULL, "%s: to_text", what);
	if (!t)
		return;
	dnn_graph h;
	TEST_CHECK(dnn_graph_parse(&h, t, "text", err, sizeof(err)) == 0, "%s: reparse: %s", what, err);
	if (h.nodes) {
		TEST_CHECK(dnn_graph_fingerprint(&h) == dnn_graph_fingerprint(g), "%s: fingerprint differs", what);
		TEST_CHECK(h.classes == g->classes && h.nodes[0].H == g->nodes[0].H, "%s: shape differs", what);
		char *t2 = dnn_graph_to_text(&h, "net test, round trip");
		TEST_CHECK(t2 && strcmp(t, t2) == 0, "%s: text differs after a round trip", what);
		for (int i = 0; i < h.nnodes && i < g->nnodes; i++)
			TEST_CHECK(h.nodes[i].eps == g->nodes[i].eps && h.nodes[i].fattr[0] == g->nodes[i].fattr[0],
				   "%s: float keys of %s differ", what, h.nodes[i].name);
		free(t2);
		dnn_graph_free(&h);
	}
	free(t);
}

static void test_text(void)
{
	char err[512];
	dnn_graph g;
	for (int i = 0; i < dnn_builtin_net_count(); i++) {
		const char *name = dnn_builtin_net_name(i);
		TEST_CHECK(dnn_graph_load(&g, name, err, sizeof(err)) == 0, "%s", err);
		check_text_round_trip(&g, name);
		if (g.nodes[0].H >= 32 && dnn_graph_set_input_hw(&g, 40, 40, err, sizeof(err)) == 0 &&
		    dnn_graph_set_classes(&g, 7, err, sizeof(err)) == 0)
			check_text_round_trip(&g, name);
		dnn_graph_free(&g);
	}
	const char *odd = "input x 3 16 16\nconv c x out=4 k=3 pad=2 dilation=2 bias=1\nbatchnorm b c eps=3e-4 momentum=0.3\n"
			  "relu r b\nmaxpool p r k=3 stride=2 pad=1\nconv d p out=4 k=1\nadd s p,d,p2\nconv p2 p out=4 k=1\n"
			  "dropout q s p=0.37\navgpool a q\ndense f a out=5\nsoftmax_xent l f\n";
	TEST_CHECK(dnn_graph_parse(&g, odd, "odd.net", err, sizeof(err)) == 0, "%s", err);
	if (g.nodes) {
		check_text_round_trip(&g, "odd.net");
		char line[1100];
		TEST_CHECK(dnn_graph_node_line(&g, 1, line, sizeof(line)) > 0 &&
				   strcmp(line, "conv c x out=4 k=3 stride=1 pad=2 dilation=2 bias=1") == 0,
			   "node line '%s'", line);
		TEST_CHECK(dnn_graph_node_line(&g, 1, line, 10) == -1, "a short buffer is refused");
		dnn_graph_free(&g);
	}
}

/* Every key of every node of g (from its op's descriptor), changed alone in a copy: compare
 * names that node and key, the fingerprint changes; the structure hash of versions 1 and 2
 * changes for the int keys only (what they missed). Then a name, the wiring and a node count. */
static void check_every_key(const dnn_graph *g, const char *what, int *seen)
{
	dnn_graph c = *g;
	dnn_graph_diff d;
	c.nodes = malloc(sizeof(dnn_node) * (size_t)g->nnodes);
	memcpy(c.nodes, g->nodes, sizeof(dnn_node) * (size_t)g->nnodes);
	TEST_CHECK(dnn_graph_compare(g, &c, &d) == 0 && d.node == 0, "%s: differs from its copy", what);
	for (int i = 0; i < g->nnodes; i++) {
		const dnn_op_desc *desc = dnn_op_get(g->nodes[i].op);
		seen[g->nodes[i].op] = 1;
		for (int k = 0; k < desc->nkeys; k++) {
			const dnn_op_key *ky = &desc->keys[k];
			void *field = (char *)&c.nodes[i] + ky->offset;
			if (ky->type == 'i')
				*(int *)field += 1;
			else
				*(float *)field += *(float *)field + 0.0625f <= ky->hi ? 0.0625f : -0.0625f;
			int rc = dnn_graph_compare(&c, g, &d);
			TEST_CHECK(rc == 1 && d.node == i + 1 && !strcmp(d.key, ky->key) && !strcmp(d.name, g->nodes[i].name),
				   "%s: %s's %s changed: compare says %d, node %d key '%s'", what, g->nodes[i].name, ky->key,
				   rc, d.node, d.key);
			TEST_CHECK(dnn_graph_fingerprint(&c) != dnn_graph_fingerprint(g), "%s: %s's %s: same fingerprint",
				   what, g->nodes[i].name, ky->key);
			TEST_CHECK((dnn_graph_structure_hash(&c) != dnn_graph_structure_hash(g)) == (ky->type == 'i'),
				   "%s: %s's %s: structure hash", what, g->nodes[i].name, ky->key);
			memcpy(&c.nodes[i], &g->nodes[i], sizeof(dnn_node));
		}
	}
	c.nodes[1].name[0] ^= 1;
	TEST_CHECK(dnn_graph_compare(&c, g, &d) == 1 && d.node == 2 && !strcmp(d.key, "name"), "%s: a name", what);
	memcpy(&c.nodes[1], &g->nodes[1], sizeof(dnn_node));
	const int last = g->nnodes - 1;
	c.nodes[last].inputs[0] = 0;
	TEST_CHECK(dnn_graph_compare(&c, g, &d) == 1 && d.node == last + 1 && !strcmp(d.key, "inputs") &&
			   dnn_graph_fingerprint(&c) != dnn_graph_fingerprint(g),
		   "%s: the wiring", what);
	c.nodes[last].inputs[0] = g->nodes[last].inputs[0];
	c.nnodes--;
	char line[5000];
	TEST_CHECK(dnn_graph_compare(&c, g, &d) == 1 && d.node == last + 1 && !strcmp(d.key, "node") &&
			   !strcmp(d.a, "(none)"),
		   "%s: a node less", what);
	dnn_graph_diff_line(&d, "A", "B", line, sizeof(line));
	TEST_CHECK(strstr(line, "is '(none)' in A, 'softmax_xent ") != NULL, "%s: diff line '%s'", what, line);
	free(c.nodes);
}

static void test_same_net(void)
{
	char err[512], line[5000];
	int seen[DNN_OP_COUNT] = {0};
	dnn_graph g;
	for (int i = 0; i < dnn_builtin_net_count(); i++) {
		TEST_CHECK(dnn_graph_load(&g, dnn_builtin_net_name(i), err, sizeof(err)) == 0, "%s", err);
		check_every_key(&g, dnn_builtin_net_name(i), seen);
		dnn_graph_free(&g);
	}
	const char *data = getenv("DNN_TEST_DATA");
	char path[4096];
	snprintf(path, sizeof(path), "%s/every_op.net", data ? data : "tests/data");
	TEST_CHECK(dnn_graph_load(&g, path, err, sizeof(err)) == 0, "%s", err);
	if (g.nodes) {
		check_every_key(&g, "every_op.net", seen);
		dnn_graph_free(&g);
	}
	/* the ops that take only sequences cannot join that image net: every_seq_op.net holds them */
	snprintf(path, sizeof(path), "%s/every_seq_op.net", data ? data : "tests/data");
	TEST_CHECK(dnn_graph_load(&g, path, err, sizeof(err)) == 0, "%s", err);
	if (g.nodes) {
		check_every_key(&g, "every_seq_op.net", seen);
		dnn_graph_free(&g);
	}
	for (int o = 0; o < DNN_OP_COUNT; o++)
		TEST_CHECK(seen[o], "op %s is in no net checked (add it to tests/data/every_op.net, or every_seq_op.net)",
			   dnn_op_name((dnn_op)o));
	/* Float keys at their range's ends: the canonical text (%.9g of the float) reads back, p=0.99
	 * included (written 0.99000001, above 0.99 as a double, not as a float). */
	const char *ends = "input x 1 4 4\nconv c x out=2 k=1\nbatchnorm b c eps=1e-12 momentum=1\ndropout d b p=0.99\n"
			   "batchnorm b2 d eps=1 momentum=0\ndense o b2 out=2\nsoftmax_xent l o\n";
	TEST_CHECK(dnn_graph_parse(&g, ends, "ends.net", err, sizeof(err)) == 0, "%s", err);
	if (g.nodes) {
		check_text_round_trip(&g, "ends.net");
		dnn_graph_free(&g);
	}
	TEST_CHECK(dnn_graph_parse(&g, "input x 1 4 4\ndropout d x p=0.991\ndense o d out=2\nsoftmax_xent l o\n", "p.net",
				   err, sizeof(err)) != 0 && strstr(err, "p=0.991"), "p=0.991 accepted: %s", err);
	/* The message: node, key, both values. */
	dnn_graph a, b;
	TEST_CHECK(dnn_graph_parse(&a, "input x 1 4 4\ndropout d x p=0.25\ndense o d out=2\nsoftmax_xent l o\n", "a.net",
				   err, sizeof(err)) == 0, "%s", err);
	TEST_CHECK(dnn_graph_parse(&b, "input x 1 4 4\ndropout d x p=0.9\ndense o d out=2\nsoftmax_xent l o\n", "b.net",
				   err, sizeof(err)) == 0, "%s", err);
	dnn_graph_diff d;
	TEST_CHECK(dnn_graph_compare(&b, &a, &d) == 1, "p differs");
	dnn_graph_diff_line(&d, "--net", "the checkpoint", line, sizeof(line));
	TEST_CHECK(!strcmp(line, "node 2 (d): p=0.899999976 in --net, p=0.25 in the checkpoint"), "diff line '%s'", line);
	dnn_graph_free(&a), dnn_graph_free(&b);
}

int main(void)
{
	test_text();
	test_same_net();
	check_net("lenet5", 61706, 0.000416520, 0.01);
	/* ResNet-8/20 with projection shortcuts: 77,754 / 272,474 parameters
	 * (the paper's zero-padding "option A" ResNet-20 has 269,722; ours adds 1x1 conv + BN). */
	check_net("resnet8", 77754, 0, 0);
	check_net("resnet20", 272474, 0.04081, 0.01);
	check_net("resnet18", 11689512, 1.814, 0.01); /* torchvision: 11,689,512 params, 1.81 GMACs */
	check_net("resnet50", 25557032, 4.089, 0.01); /* torchvision: 25,557,032 params, 4.09 GMACs */
	/* The Horovod paper's nets (docs/studies/2026-12-07-horovod-cluster.md): torchvision's resnet101,
	 * 44,549,160 params, 7.80 GMACs; vgg16, 138,357,544 params, 15.47 GMACs. */
	check_net("resnet101", 44549160, 7.80, 0.01);
	check_net("vgg16", 138357544, 15.47, 0.01);
	/* The Caffe seed's nets (graph/nets/gen_nets.py), counted by hand from Caffe's prototxts:
	 * LeNet 520 + 25,050 + 400,500 + 5,010 parameters, 0.288 + 1.6 + 0.4 + 0.005 M MACs;
	 * cifar10_quick 2,432 + 25,632 + 51,264 + 65,600 + 650 parameters, 2.458 + 6.554 + 3.277 +
	 * 0.066 + 0.001 M MACs (its ceil-mode pools give 32 -> 16 -> 8 -> 4, which pad=1 matches). */
	check_net("caffe_lenet", 431080, 0.002293, 0.001);
	check_net("cifar10_quick", 145578, 0.012354, 0.001);

	/* Input-size rewrite (ANP app): ResNet-18 at 112x112 keeps its parameters, quarter MACs. */
	dnn_graph g;
	char err[512];
	TEST_CHECK(dnn_graph_load(&g, "resnet18", err, sizeof(err)) == 0, "%s", err);
	double f224 = dnn_graph_flops_fwd(&g);
	TEST_CHECK(dnn_graph_set_input_hw(&g, 112, 112, err, sizeof(err)) == 0, "%s", err);
	/* 112 -> stem 56 -> pool 28 -> stages 28, 14, 7, 4: the last stage is 4x4 instead of 7x7, so
	 * the FLOPs are a bit more than a quarter. */
	const dnn_node *last = &g.nodes[g.nodes[g.nnodes - 3].inputs[0]];
	TEST_CHECK(last->C == 512 && last->H == 4 && last->W == 4, "last stage %dx%dx%d, want 512x4x4", last->C,
		   last->H, last->W);
	double ratio = dnn_graph_flops_fwd(&g) / f224;
	TEST_CHECK(ratio > 0.25 && ratio < 0.28, "112px FLOPs ratio %.3f", ratio);
	TEST_CHECK(dnn_graph_params(&g) == 11689512, "params changed with input size");
	dnn_graph_free(&g);

	/* The example from the docs parses, topological order puts forward references right. */
	const char *text = "# comment line\n"
			   "input x 1 28 28\n"
			   "dense f1 p1 out=10   # forward reference to p1\n"
			   "conv c1 x out=6 k=5 pad=2\n"
			   "relu r1 c1\n"
			   "maxpool p1 r1 k=2 stride=2\n"
			   "softmax_xent loss f1\n";
	TEST_CHECK(dnn_graph_parse(&g, text, "t.net", err, sizeof(err)) == 0, "%s", err);
	if (g.nnodes == 6) {
		TEST_CHECK(strcmp(g.nodes[4].name, "f1") == 0, "topological order: node 4 is %s", g.nodes[4].name);
		TEST_CHECK(g.nodes[3].C == 6 && g.nodes[3].H == 14 && g.nodes[3].W == 14, "p1 shape %dx%dx%d",
			   g.nodes[3].C, g.nodes[3].H, g.nodes[3].W);
		TEST_CHECK(g.classes == 10, "classes %d", g.classes);
		dnn_graph_print_summary(&g, 1, stdout); /* DNN_FUSE's default */
		dnn_graph_free(&g);
	} else {
		TEST_CHECK(0, "nnodes %d", g.nnodes);
	}
	return test_report("unit_graph");
}
