/* train_layernorm_gelu — layernorm and gelu in a real training run (an MLP on Fashion-MNIST,
 * dense 64 -> layernorm -> gelu, twice, then dense 10; 12 steps of batch 64):
 *  - it learns: the loss falls;
 *  - both ops are active: replacing the layernorms by nothing, or gelu by relu, changes the losses;
 *  - chunk invariance: K = 3 and 4 chunks give the K = 1 losses (1e-5 relative) and parameters
 *    (1e-5 of the largest |w|): a layernorm normalises each sample on its own, so only the order of
 *    the gradient sums over chunks differs. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "test_util.h"

#define STEPS 12
#define BATCH 64

enum { FULL, NO_LN, RELU };
static const char *const nets[] = {
	[FULL] = "input x 1 28 28\ndense f1 x out=64\nlayernorm n1 f1\ngelu g1 n1\ndense f2 g1 out=64\n"
		 "layernorm n2 f2 eps=1e-3\ngelu g2 n2\ndense f3 g2 out=10\nsoftmax_xent loss f3\n",
	[NO_LN] = "input x 1 28 28\ndense f1 x out=64\ngelu g1 f1\ndense f2 g1 out=64\ngelu g2 f2\n"
		  "dense f3 g2 out=10\nsoftmax_xent loss f3\n",
	[RELU] = "input x 1 28 28\ndense f1 x out=64\nlayernorm n1 f1\nrelu g1 n1\ndense f2 g1 out=64\n"
		 "layernorm n2 f2 eps=1e-3\nrelu g2 n2\ndense f3 g2 out=10\nsoftmax_xent loss f3\n",
};

static double max_diff(const double *a, const double *b)
{
	double d = 0;
	for (int s = 0; s < STEPS; s++)
		d = fmax(d, fabs(a[s] - b[s]));
	return d;
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	dnn_dataset ds;
	char err[512];
	if (dnn_dataset_load_fashion(&ds, "/usr/share/datasets/fashion-mnist", 1, 4096, err, sizeof(err)) != 0) {
		fprintf(stderr, "SKIP: Fashion-MNIST not installed (%s)\n", err);
		test_starpu_shutdown();
		return TEST_SKIP;
	}
	double l1[STEPS], lk[STEPS], lo[STEPS];
	long n1, nk, no;
	float *p1 = test_train_net(&ds, nets[FULL], "mlp_ln_gelu.net", 1, 1, STEPS, BATCH, l1, &n1);
	printf("layernorm + gelu, K=1: losses %.4f -> %.4f\n", l1[0], l1[STEPS - 1]);
	TEST_CHECK(l1[STEPS - 1] < l1[0] - 0.3, "the loss did not fall: %.4f -> %.4f", l1[0], l1[STEPS - 1]);

	const char *other[] = {[NO_LN] = "without the layernorms", [RELU] = "relu for gelu"};
	for (int v = NO_LN; v <= RELU; v++) {
		float *po = test_train_net(&ds, nets[v], "mlp_other.net", 1, 1, STEPS, BATCH, lo, &no);
		const double d = max_diff(lo, l1);
		printf("%s: losses %.4f -> %.4f (max difference %.4f)\n", other[v], lo[0], lo[STEPS - 1], d);
		TEST_CHECK(d > 1e-3, "%s changed no loss (max difference %.2g): is the op active?", other[v], d);
		free(po);
	}

	const int Ks[] = {3, 4};
	for (int v = 0; v < 2; v++) {
		float *pk = test_train_net(&ds, nets[FULL], "mlp_ln_gelu.net", Ks[v], 1, STEPS, BATCH, lk, &nk);
		TEST_CHECK(nk == n1, "parameter counts differ");
		for (int s = 0; s < STEPS; s++)
			TEST_CHECK(fabs(lk[s] - l1[s]) <= 1e-5 * fabs(l1[s]), "K=%d step %d: loss %.8f vs K=1 %.8f", Ks[v], s,
				   lk[s], l1[s]);
		double worst = 0, scale = 0;
		for (long i = 0; i < n1 && nk == n1; i++)
			worst = fmax(worst, fabs(pk[i] - p1[i])), scale = fmax(scale, fabs(p1[i]));
		printf("K=%d: final loss %.8f (K=1 %.8f), max loss difference %.3g, max parameter difference %.3g of "
		       "max |w| %.3g\n",
		       Ks[v], lk[STEPS - 1], l1[STEPS - 1], max_diff(lk, l1), worst, scale);
		TEST_CHECK(worst <= 1e-5 * scale, "K=%d: parameters differ by %.3g (max |w| %.3g)", Ks[v], worst, scale);
		free(pk);
	}
	free(p1);
	dnn_dataset_free(&ds);
	test_starpu_shutdown();
	return test_report("train_layernorm_gelu");
}
