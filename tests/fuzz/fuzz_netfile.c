/* fuzz_netfile — libFuzzer harness for the net-file parser (graph/graph.c).
 *
 * Any text must either parse into a graph that keeps the parser's promises (checked below, an
 * abort() when broken) or fail with one line "source[:line]: message". On success it also runs
 * what the app runs on a parsed graph: the fingerprint, the summary, and --input H W
 * re-inference with sizes taken from the input's last bytes. */
#include "fuzz_common.h"

#include "graph.h"

#define CHECK(c)                                                                         \
	do {                                                                             \
		if (!(c)) {                                                              \
			fprintf(stderr, "fuzz_netfile: invariant broken: %s (line %d)\n", #c, \
				__LINE__);                                               \
			abort();                                                         \
		}                                                                        \
	} while (0)

static void check_graph(const dnn_graph *g)
{
	CHECK(g->nnodes >= 2 && g->nodes);
	CHECK(g->nodes[0].op == DNN_OP_INPUT);
	CHECK(g->nodes[g->nnodes - 1].op == DNN_OP_SOFTMAX_XENT);
	CHECK(g->classes >= 2);
	for (int i = 0; i < g->nnodes; i++) {
		const dnn_node *n = &g->nodes[i];
		CHECK(n->op < DNN_OP_COUNT);
		CHECK(n->ninputs >= 0 && n->ninputs <= DNN_MAX_INPUTS);
		CHECK((i == 0) == (n->ninputs == 0));
		for (int j = 0; j < n->ninputs; j++)
			CHECK(n->inputs[j] >= 0 && n->inputs[j] < i); // topological
		CHECK(n->C >= 1 && n->H >= 1 && n->W >= 1);
		CHECK(n->params >= 0 && n->flops >= 0);
		CHECK(memchr(n->name, '\0', sizeof(n->name)) != NULL && n->name[0]);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *devnull;
	if (!devnull)
		devnull = fopen("/dev/null", "w");
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	dnn_graph g;
	char err[512];
	err[0] = '\0';
	int prc = dnn_graph_parse(&g, text, "fuzz.net", err, sizeof(err));
	fuzz_note("netfile", prc, err);
	if (prc != 0) {
		CHECK(strncmp(err, "fuzz.net", 8) == 0);
		CHECK(strchr(err, '\n') == NULL);
		CHECK(g.nodes == NULL);
		free(text);
		return 0;
	}
	check_graph(&g);
	uint64_t fp = dnn_graph_fingerprint(&g);
	(void)dnn_graph_params(&g);
	(void)dnn_graph_flops_train(&g);
	if (devnull)
		dnn_graph_print_summary(&g, 1, devnull); /* DNN_FUSE's default */
	// The same text parses to the same graph; so does its canonical text (the same net).
	dnn_graph g2;
	dnn_graph_diff d;
	CHECK(dnn_graph_parse(&g2, text, "fuzz.net", err, sizeof(err)) == 0);
	CHECK(dnn_graph_fingerprint(&g2) == fp);
	CHECK(dnn_graph_compare(&g, &g2, &d) == 0 && d.node == 0);
	dnn_graph_free(&g2);
	char *canon = dnn_graph_to_text(&g, NULL);
	CHECK(canon != NULL);
	CHECK(dnn_graph_parse(&g2, canon, "canonical.net", err, sizeof(err)) == 0);
	CHECK(dnn_graph_fingerprint(&g2) == fp && dnn_graph_compare(&g, &g2, &d) == 0);
	dnn_graph_free(&g2);
	free(canon);
	// --input H W on the parsed graph: any sizes, absurd ones included.
	if (size >= 4) {
		int H = (int)(int16_t)fuzz_le16(data + size - 4), W = (int)(int16_t)fuzz_le16(data + size - 2);
		if (dnn_graph_set_input_hw(&g, H, W, err, sizeof(err)) == 0)
			check_graph(&g);
		else
			CHECK(strncmp(err, "fuzz.net", 8) == 0 && strchr(err, '\n') == NULL);
	}
	dnn_graph_free(&g);
	free(text);
	return 0;
}
