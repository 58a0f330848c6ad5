/* train_chunks — synchronous training is convergence-invariant (README, "How an iteration
 * becomes tasks"): lenet5 (no batch norm), same seed, 20 steps with K=1 chunk and with K=4
 * chunks (and K=3, which splits 64 unevenly) must give the same per-step losses within 1e-3
 * relative and the same parameters within float-reassociation tolerance (relative, per tensor;
 * bounds measured below). Also checks that the window does not change results. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_source.h"
#include "dataset.h"
#include "graph.h"
#include "knobs.h"
#include "model.h"
#include "test_util.h"
#include "train.h"

#define STEPS 20
#define BATCH 64
#define MAXT 64 /* parameter tensors (lenet5 has 10) */

/* Tensor boundaries of the flattened parameters (the same for every run of the same net). */
static int ntensors;
static long tensor_off[MAXT + 1];

static float *run(const dnn_dataset *ds, int chunks, int window, double *losses, long *nparams_out)
{
	dnn_graph g;
	char err[512];
	if (dnn_graph_load(&g, "lenet5", err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	dnn_model m;
	if (dnn_model_create(&m, &g, 123, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	dnn_dataset_channel_stats(ds, m.in_mean, m.in_std);
	dnn_plan p;
	if (dnn_plan_create(&p, &m, BATCH, chunks, window, 1, dnn_knobs_get(), err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	dnn_data_source src;
	dnn_dataset_source(&src, ds);
	dnn_optim_config optim = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f};
	int *idx = malloc(sizeof(int) * STEPS * BATCH);
	for (int i = 0; i < STEPS * BATCH; i++)
		idx[i] = (i * 7919) % ds->n; /* a fixed, shuffled-looking order */
	for (int s = 0; s < STEPS; s++) {
		if (s >= window) {
			double l, c;
			if (dnn_wait_step(&p, s % window, &l, &c, err, sizeof(err)) != 0) {
				fprintf(stderr, "%s\n", err);
				exit(1);
			}
			losses[s - window] = l / BATCH;
		}
		if (dnn_submit_step(&p, s % window, &src, idx + s * BATCH, s, &optim, err, sizeof(err)) != 0) {
			fprintf(stderr, "%s\n", err);
			exit(1);
		}
	}
	for (int s = STEPS - window; s < STEPS; s++) {
		double l, c;
		if (dnn_wait_step(&p, s % window, &l, &c, err, sizeof(err)) != 0) {
			fprintf(stderr, "%s\n", err);
			exit(1);
		}
		losses[s] = l / BATCH;
	}
	starpu_task_wait_for_all();
	float *out = test_model_params(&m, nparams_out);
	ntensors = m.nparams < MAXT ? m.nparams : MAXT;
	tensor_off[0] = 0;
	for (int i = 0; i < ntensors; i++)
		tensor_off[i + 1] = tensor_off[i] + m.params[i].n;
	free(idx);
	dnn_plan_destroy(&p);
	dnn_model_destroy(&m);
	dnn_graph_free(&g);
	return out;
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	dnn_dataset ds;
	char err[512];
	if (dnn_dataset_load_fashion(&ds, DNN_FASHION_MNIST_DIR, 1, 4096, err, sizeof(err)) != 0) {
		fprintf(stderr, "SKIP: Fashion-MNIST not installed (%s)\n", err);
		test_starpu_shutdown();
		return TEST_SKIP;
	}
	double l1[STEPS], lk[STEPS];
	long n1, nk;
	float *p1 = run(&ds, 1, 2, l1, &n1);
	printf("K=1 losses:");
	for (int s = 0; s < STEPS; s++)
		printf(" %.4f", l1[s]);
	printf("\n");
	/* Parameters move: the run really trained. */
	TEST_CHECK(l1[STEPS - 1] < l1[0] - 0.15, "K=1 loss did not fall: %.4f -> %.4f", l1[0], l1[STEPS - 1]);
	const int variants[][2] = {{4, 2}, {3, 2}, {4, 1}, {8, 4}};
	for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
		int K = variants[v][0], W = variants[v][1];
		float *pk = run(&ds, K, W, lk, &nk);
		TEST_CHECK(nk == n1, "parameter counts differ");
		for (int s = 0; s < STEPS; s++)
			TEST_CHECK(fabs(lk[s] - l1[s]) <= 1e-3 * fabs(l1[s]), "K=%d W=%d step %d: loss %.6f vs K=1 %.6f", K, W,
				   s, lk[s], l1[s]);
		char what[64];
		snprintf(what, sizeof(what), "params K=%d W=%d vs K=1", K, W);
		/* 20 SGD steps with momentum amplify reassociation differences (~1e-7 per op) a little. */
		test_close_mixed_f(what, pk, p1, (size_t)n1, 2e-3);
		/* Relative, per tensor: ||pk - p1||_2 / ||p1||_2 and max|pk - p1| / max|p1|. The
		 * parameters are 0.01-0.1, so the absolute 2e-3 above lets 2-20% through. K chunks only
		 * reassociate float sums (REDUX order, per-chunk partial sums: ~6e-8 relative per add),
		 * and 20 momentum steps amplify that; where a pre-activation or a max-pool pair sits
		 * within rounding of a tie, one sample's gradient path flips and the difference jumps.
		 * Measured here (lenet5, 20 steps, lws, deterministic from run to run):
		 *   STARPU_NCPU=2: worst over the 4 variants and 10 tensors, norm 1.3e-7, max 2.0e-7;
		 *   STARPU_NCPU=1: K=3 the same, but K=4 and K=8 differ on c2.weight by norm 4.2e-5,
		 *                  max-element 2.7e-4 (a tie flip, identical in every rerun; seen
		 *                  too in 2 of 3 runs with STARPU_NCPU=4 on 2 cores).
		 * Bounds: norm 1e-3 (24x the worst measured), max-element 2e-3 (7.5x): still 10-100x
		 * tighter than the absolute check, and a lost or doubled chunk's contribution (a quarter
		 * of a step's gradient with K=4) is expected to move a tensor by percents. */
		double worst_norm = 0, worst_max = 0;
		int wn = 0, wm = 0;
		for (int t = 0; t < ntensors; t++) {
			double dd = 0, rr = 0, dmax = 0, rmax = 0;
			for (long i = tensor_off[t]; i < tensor_off[t + 1]; i++) {
				double d = (double)pk[i] - (double)p1[i];
				dd += d * d;
				rr += (double)p1[i] * p1[i];
				dmax = fmax(dmax, fabs(d));
				rmax = fmax(rmax, fabs((double)p1[i]));
			}
			double rn = sqrt(dd) / fmax(sqrt(rr), 1e-30), rm = dmax / fmax(rmax, 1e-30);
			if (!(rn <= worst_norm))
				worst_norm = rn, wn = t;
			if (!(rm <= worst_max))
				worst_max = rm, wm = t;
		}
		printf("K=%d W=%d: parameters relative to K=1: worst tensor norm %.3g (tensor %d), worst "
		       "max-element %.3g (tensor %d)\n", K, W, worst_norm, wn, worst_max, wm);
		TEST_CHECK(worst_norm <= 1e-3, "%s: tensor %d relative norm difference %.3g > 1e-3", what, wn,
			   worst_norm);
		TEST_CHECK(worst_max <= 2e-3, "%s: tensor %d max-element difference %.3g of its max > 2e-3", what,
			   wm, worst_max);
		printf("K=%d W=%d: final loss %.6f (K=1: %.6f)\n", K, W, lk[STEPS - 1], l1[STEPS - 1]);
		free(pk);
	}
	free(p1);
	dnn_dataset_free(&ds);
	test_starpu_shutdown();
	return test_report("train_chunks");
}
