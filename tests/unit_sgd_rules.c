/* unit_sgd_rules — the one place that turns the SGD configuration into a parameter's update
 * arguments (graph/model.c dnn_param_optim_args): biases and batch-norm parameters get no weight
 * decay, weights do (divided by async's per-rank share), and the summed gradient is scaled by
 * 1/global batch. Checked on every parameter of resnet8 (conv weights, dense weight and bias,
 * batch-norm gamma and beta). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph.h"
#include "model.h"
#include "test_util.h"

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	char err[512];
	dnn_graph g;
	dnn_model m;
	if (dnn_graph_load(&g, "resnet8", err, sizeof(err)) != 0 || dnn_model_create(&m, &g, 1, err, sizeof(err)) != 0) {
		fprintf(stderr, "FAIL: %s\n", err);
		return 1;
	}
	const dnn_optim_config optim = {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f};
	int kinds[3] = {0}; /* weights, biases, BN parameters seen */
	for (int i = 0; i < m.nparams; i++) {
		const dnn_param *pr = &m.params[i];
		const int weight = ends_with(pr->name, ".weight");
		const int bias = ends_with(pr->name, ".bias");
		const int bn = ends_with(pr->name, ".gamma") || ends_with(pr->name, ".beta");
		TEST_CHECK(weight + bias + bn == 1, "%s: unexpected parameter name", pr->name);
		kinds[weight ? 0 : bias ? 1 : 2]++;
		for (int share = 1; share <= 4; share *= 4) {
			dnn_optim_args a = dnn_param_optim_args(pr, &optim, 256, share);
			const float want_decay = weight ? optim.weight_decay / (float)share : 0.0f;
			TEST_CHECK(a.weight_decay == want_decay, "%s (share %d): weight_decay %g, want %g", pr->name, share,
				   a.weight_decay, want_decay);
			TEST_CHECK(a.scale == 1.0f / 256.0f, "%s: scale %g, want 1/256", pr->name, a.scale);
			TEST_CHECK(a.n == pr->n && a.lr == optim.lr && a.momentum == optim.momentum, "%s: n/lr/momentum not passed",
				   pr->name);
			TEST_CHECK(!a.keep_grad && !a.write_delta, "%s: keep_grad/write_delta set by default", pr->name);
		}
	}
	printf("resnet8: %d weights, %d biases, %d batch-norm parameters checked\n", kinds[0], kinds[1], kinds[2]);
	TEST_CHECK(kinds[0] > 0 && kinds[1] > 0 && kinds[2] > 0, "resnet8 should have all three kinds");
	dnn_model_destroy(&m);
	dnn_graph_free(&g);
	test_starpu_shutdown();
	return test_report("unit_sgd_rules");
}
