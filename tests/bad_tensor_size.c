/* bad_tensor_size — a chunk whose tensor exceeds what cuDNN takes (INT_MAX elements: its tensor
 * descriptors have int sizes) is refused when the plan is made, in every build and before any
 * handle is registered or buffer allocated, with one line "file:line: layer: ..." naming the
 * layer; a chunk just under the limit, or the same batch in more chunks, is accepted. Runs on
 * CPU: nothing is allocated for the activations (the accepted plans' handles are lazy). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "graph.h"
#include "knobs.h"
#include "model.h"
#include "test_util.h"

typedef struct {
	const char *what;
	const char *net;
	int batch, chunks, train;
	const char *want; /* substring of the error; NULL: the plan must be accepted */
} size_case;

/* c's output: 4096 x 64 x 64 = 2^24 floats per sample, so 128 samples make 2^31 = INT_MAX + 1. */
#define BIG_OUT "input x 1 64 64\nconv c x out=4096 k=3 pad=1\navgpool p c\ndense f p out=10\nsoftmax_xent l f\n"
/* The net's input: 256 x 256 x 256 = 2^24 floats per sample, read by the conv / the maxpool. */
#define BIG_IN_CONV "input x 256 256 256\nconv c x out=1 k=1\ndense f c out=10\nsoftmax_xent l f\n"
#define BIG_IN_POOL "input x 256 256 256\nmaxpool m x k=2\navgpool a m\ndense f a out=10\nsoftmax_xent l f\n"

static const size_case cases[] = {
	{"conv output over INT_MAX", BIG_OUT, 128, 1, 1,
	 "t.net:2: c: its output for a chunk of 128 samples, 128x4096x64x64 = 2147483648 floats"},
	{"conv output over INT_MAX, eval plan", BIG_OUT, 128, 1, 0, "t.net:2: c: its output"},
	{"conv output: the largest chunk counts (257 in 2 = 129 + 128)", BIG_OUT, 257, 2, 1,
	 "t.net:2: c: its output for a chunk of 129 samples"},
	{"conv output just under INT_MAX", BIG_OUT, 127, 1, 1, NULL},
	{"conv output: the same batch in 2 chunks", BIG_OUT, 128, 2, 1, NULL},
	{"conv input over INT_MAX", BIG_IN_CONV, 128, 1, 1,
	 "t.net:2: c: its input for a chunk of 128 samples, 128x256x256x256"},
	{"conv input in 2 chunks", BIG_IN_CONV, 128, 2, 1, NULL},
	{"maxpool input over INT_MAX", BIG_IN_POOL, 128, 1, 1, "t.net:2: m: its input for a chunk of 128 samples"},
	{"maxpool input in 4 chunks", BIG_IN_POOL, 128, 4, 1, NULL},
};

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv); /* the model registers its parameters */
	char err[1024];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const size_case *c = &cases[i];
		dnn_graph g;
		dnn_model m;
		dnn_plan p;
		memset(err, 0, sizeof(err));
		if (dnn_graph_parse(&g, c->net, "t.net", err, sizeof(err)) != 0) {
			TEST_CHECK(0, "%s: the net does not parse: %s", c->what, err);
			continue;
		}
		if (dnn_model_create(&m, &g, 1, err, sizeof(err)) != 0) {
			TEST_CHECK(0, "%s: model: %s", c->what, err);
			dnn_graph_free(&g);
			continue;
		}
		int rc = dnn_plan_create(&p, &m, c->batch, c->chunks, 1, c->train, dnn_knobs_get(), err, sizeof(err));
		if (c->want) {
			printf("%-60s -> %s\n", c->what, rc == 0 ? "(accepted)" : err);
			TEST_CHECK(rc != 0, "%s: the plan was accepted", c->what);
			TEST_CHECK(rc != 0 && strstr(err, c->want) != NULL, "%s: error '%s' lacks '%s'", c->what, err, c->want);
			TEST_CHECK(strchr(err, '\n') == NULL, "%s: the error is not one line: '%s'", c->what, err);
			TEST_CHECK(rc != 0 && strstr(err, "2147483647") != NULL && strstr(err, "--chunks") != NULL,
				   "%s: the error should state the limit and the remedy: '%s'", c->what, err);
			dnn_plan_destroy(&p); /* accepted by mistake, or refused: then it holds nothing (a no-op) */
		} else {
			printf("%-60s -> %s\n", c->what, rc == 0 ? "accepted" : err);
			TEST_CHECK(rc == 0, "%s: refused: %s", c->what, err);
			if (rc == 0)
				dnn_plan_destroy(&p);
		}
		dnn_model_destroy(&m);
		dnn_graph_free(&g);
	}
	test_starpu_shutdown();
	return test_report("bad_tensor_size");
}
