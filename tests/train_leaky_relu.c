/* train_leaky_relu — the leaky_relu op in a real training run (LeNet-5 with its four relus
 * replaced by leaky_relu, Fashion-MNIST, 12 steps of batch 64):
 *  - alpha = 0 is relu: in one chunk (one gradient contribution per tensor and step, so the run is
 *    deterministic), the same losses and parameters as the relu net bit for bit;
 *  - alpha = 0.2 is active: its losses differ from the relu net's, and it learns;
 *  - chunk invariance: K = 1, 3 and 4 chunks give the same losses (1e-3 relative, the
 *    train_chunks bound) and parameters (1e-3 of the largest |w|). */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "test_util.h"

#define STEPS 12
#define BATCH 64

/* LeNet-5 with `act` ("relu", "leaky_relu alpha=0" ...: the op and its keys) after each layer. */
static char *net_text(const char *act)
{
	char op[64], keys[64] = "";
	if (sscanf(act, "%63s %63[^\n]", op, keys) < 1)
		return NULL;
	char *t = malloc(2048);
	if (!t)
		return NULL;
	snprintf(t, 2048,
		 "input x 1 28 28\nconv c1 x out=6 k=5 pad=2 bias=1\n%s r1 c1 %s\nmaxpool p1 r1 k=2\n"
		 "conv c2 p1 out=16 k=5 bias=1\n%s r2 c2 %s\nmaxpool p2 r2 k=2\ndense f1 p2 out=120\n%s r3 f1 %s\n"
		 "dense f2 r3 out=84\n%s r4 f2 %s\ndense f3 r4 out=10\nsoftmax_xent loss f3\n",
		 op, keys, op, keys, op, keys, op, keys);
	return t;
}

/* Trains STEPS steps in `chunks` chunks; the losses per step, and the parameters (malloc'd). */
static float *run(const dnn_dataset *ds, const char *act, int chunks, double *losses, long *nparams)
{
	char *text = net_text(act);
	if (!text) {
		fprintf(stderr, "FAIL: net text: out of memory\n");
		exit(1);
	}
	float *out = test_train_net(ds, text, "lenet5_act.net", chunks, 1, STEPS, BATCH, losses, nparams);
	free(text);
	return out;
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
	double lr[STEPS], l0[STEPS], l1[STEPS], lk[STEPS];
	long nr, n0, n1, nk;
	float *pr = run(&ds, "relu", 1, lr, &nr);
	float *p0 = run(&ds, "leaky_relu alpha=0", 1, l0, &n0);
	TEST_CHECK(nr == n0 && memcmp(lr, l0, sizeof(lr)) == 0 && memcmp(pr, p0, sizeof(float) * (size_t)nr) == 0,
		   "alpha=0 does not train as relu bit for bit (final losses %.9f vs %.9f)", l0[STEPS - 1], lr[STEPS - 1]);
	printf("relu and leaky_relu alpha=0, K=1: losses %.6f -> %.6f, bit for bit the same: %s\n", lr[0],
	       lr[STEPS - 1], memcmp(lr, l0, sizeof(lr)) == 0 ? "yes" : "NO");

	float *p1 = run(&ds, "leaky_relu alpha=0.2", 1, l1, &n1);
	double diff = 0;
	for (int s = 1; s < STEPS; s++)
		diff = fmax(diff, fabs(l1[s] - lr[s]));
	printf("alpha=0.2, K=1: losses %.4f -> %.4f (max difference to relu %.4f)\n", l1[0], l1[STEPS - 1], diff);
	TEST_CHECK(diff > 1e-3, "alpha=0.2 changed no loss (max difference %.2g): is it active?", diff);
	TEST_CHECK(l1[STEPS - 1] < l1[0] - 0.03, "alpha=0.2: the loss did not fall: %.4f -> %.4f", l1[0], l1[STEPS - 1]);

	const int Ks[] = {3, 4};
	for (int v = 0; v < 2; v++) {
		float *pk = run(&ds, "leaky_relu alpha=0.2", Ks[v], lk, &nk);
		TEST_CHECK(nk == n1, "parameter counts differ");
		for (int s = 0; s < STEPS; s++)
			TEST_CHECK(fabs(lk[s] - l1[s]) <= 1e-3 * fabs(l1[s]), "K=%d step %d: loss %.6f vs K=1 %.6f", Ks[v], s,
				   lk[s], l1[s]);
		double worst = 0, scale = 0;
		for (long i = 0; i < n1; i++)
			worst = fmax(worst, fabs(pk[i] - p1[i])), scale = fmax(scale, fabs(p1[i]));
		printf("K=%d: final loss %.6f (K=1 %.6f), max parameter difference %.3g of max |w| %.3g\n", Ks[v],
		       lk[STEPS - 1], l1[STEPS - 1], worst, scale);
		TEST_CHECK(worst <= 1e-3 * scale, "K=%d: parameters differ by %.3g (max |w| %.3g)", Ks[v], worst, scale);
		free(pk);
	}
	free(pr), free(p0), free(p1);
	dnn_dataset_free(&ds);
	test_starpu_shutdown();
	return test_report("train_leaky_relu");
}
