/* unit_ops — forward of bias, softmax_xent (and its inference softmax; ties, large logits, one
 * class) and the SGD step, run as StarPU tasks on registered vector handles, against naive
 * double-precision references on random shapes (odd sizes, batch 1 included). dense, relu, add
 * and avgpool are the op harness's (tests/op_cases.c). */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "add.h"
#include "avgpool.h"
#include "bias.h"
#include "dense.h"
#include "relu.h"
#include "optim.h"
#include "softmax_xent.h"
#include "test_util.h"

// ------------------------------------------------------------------------------- bias

static void check_bias(int N, int C, int HW)
{
	dnn_bias_args a = {.N = N, .C = C, .HW = HW};
	size_t n = (size_t)N * C * HW;
	float *y = alloc_f(n), *b = alloc_f(C);
	test_fill_uniform(y, n, -1, 1);
	test_fill_uniform(b, C, -1, 1);
	double *ref = alloc_d(n);
	for (int in = 0; in < N; in++)
		for (int c = 0; c < C; c++)
			for (int i = 0; i < HW; i++) {
				size_t k = ((size_t)in * C + c) * HW + i;
				ref[k] = (double)y[k] + b[c];
			}
	starpu_data_handle_t hy = reg_f(y, n), hb = reg_f(b, C);
	dnn_insert_bias_fwd(NULL, &a, hy, hb);
	starpu_data_unregister(hy);
	starpu_data_unregister(hb);
	char what[64];
	snprintf(what, sizeof(what), "bias fwd N=%d C=%d HW=%d", N, C, HW);
	test_close_mixed(what, y, ref, n, 1e-6);
	free(y), free(b), free(ref);
}

// ------------------------------------------------------------------------------- softmax_xent

/* Runs the codelet on (logits, labels) and compares loss, correct count and dlogits with a
 * double-precision reference (log-sum-exp shifted by the row max; ties to the lowest index). */
static void check_softmax_xent_data(const char *name, const float *logits_in, const int32_t *labels_in, int N,
				    int CLS)
{
	dnn_softmax_xent_args a = {.N = N, .CLS = CLS, .T = 1};
	size_t n = (size_t)N * CLS;
	float *logits = alloc_f(n), *dlogits = alloc_f(n), stats[2] = {NAN, NAN};
	int32_t *labels = malloc(N * sizeof(int32_t));
	memcpy(logits, logits_in, n * sizeof(float));
	memcpy(labels, labels_in, N * sizeof(int32_t));
	fill_nan(dlogits, n);
	starpu_data_handle_t hl = reg_f(logits, n), hlab = reg_i(labels, N), hd = reg_f(dlogits, n),
			     hs = reg_f(stats, 2);
	dnn_insert_softmax_xent(NULL, &a, hl, hlab, hd, hs);
	starpu_data_unregister(hl);
	starpu_data_unregister(hlab);
	starpu_data_unregister(hd);
	starpu_data_unregister(hs);

	double loss = 0;
	int correct = 0;
	double *dref = alloc_d(n), *pref = alloc_d(n);
	for (int r = 0; r < N; r++) {
		const float *l = logits + (size_t)r * CLS;
		int am = 0;
		for (int j = 1; j < CLS; j++)
			if (l[j] > l[am])
				am = j;
		double m = l[am], s = 0;
		for (int j = 0; j < CLS; j++)
			s += exp((double)l[j] - m);
		double lse = m + log(s);
		loss += lse - l[labels[r]];
		correct += am == labels[r];
		for (int j = 0; j < CLS; j++) {
			pref[(size_t)r * CLS + j] = exp((double)l[j] - lse);
			dref[(size_t)r * CLS + j] = pref[(size_t)r * CLS + j] - (j == labels[r]);
		}
	}
	char what[96];
	snprintf(what, sizeof(what), "softmax_xent %s loss", name);
	test_close_mixed(what, &stats[0], &loss, 1, 1e-5);
	TEST_CHECK(stats[1] == (float)correct, "softmax_xent %s: correct %g, want %d", name, (double)stats[1],
		   correct);
	snprintf(what, sizeof(what), "softmax_xent %s dlogits", name);
	test_close_mixed(what, dlogits, dref, n, 1e-6);

	/* The inference-only plain kernel. */
	float *probs = alloc_f(n);
	dnn_softmax_cpu(probs, logits, N, CLS);
	snprintf(what, sizeof(what), "softmax %s probs", name);
	test_close_mixed(what, probs, pref, n, 1e-6);
	free(logits), free(dlogits), free(labels), free(dref), free(pref), free(probs);
}

static void check_softmax_xent_random(int N, int CLS)
{
	size_t n = (size_t)N * CLS;
	float *logits = alloc_f(n);
	int32_t *labels = malloc(N * sizeof(int32_t));
	test_fill_uniform(logits, n, -5, 5);
	for (int r = 0; r < N; r++)
		labels[r] = test_rng_int(0, CLS - 1);
	/* Make some rows right: label = argmax. */
	for (int r = 0; r < N; r += 3) {
		int am = 0;
		for (int j = 1; j < CLS; j++)
			if (logits[(size_t)r * CLS + j] > logits[(size_t)r * CLS + am])
				am = j;
		labels[r] = am;
	}
	char name[48];
	snprintf(name, sizeof(name), "N=%d CLS=%d", N, CLS);
	check_softmax_xent_data(name, logits, labels, N, CLS);
	free(logits), free(labels);
}

static void check_softmax_xent_special(void)
{
	/* Ties: the argmax is the lowest index among equal maxima. */
	const float tie[] = {1, 3, 3, 0, /* */ 1, 3, 3, 0, /* */ 2, 2, 2, 2, /* */ 2, 2, 2, 2};
	const int32_t tie_labels[] = {1, 2, 0, 0};
	check_softmax_xent_data("ties", tie, tie_labels, 4, 4);

	/* Large logits: a naive exp() overflows to inf. */
	const float big[] = {1000, 999, -1000, 1000.5f, /* */ -1000, -1000.5f, -999, -2000,
			     88.8f, 89.5f, 1e4f, -1e4f, /* */ 3e4f, 3e4f, 0, -3e4f};
	const int32_t big_labels[] = {0, 2, 2, 3};
	check_softmax_xent_data("large", big, big_labels, 4, 4);

	/* The expected values, by hand, for the tie case: rows 0, 2 and 3 are correct (the lowest
	 * index wins), row 1 is not (ties to the highest index would give 1 correct instead). */
	float logits[16], dl[16], stats[2] = {NAN, NAN};
	int32_t labels[4];
	memcpy(logits, tie, sizeof(tie));
	memcpy(labels, tie_labels, sizeof(tie_labels));
	dnn_softmax_xent_args a = {.N = 4, .CLS = 4, .T = 1};
	starpu_data_handle_t hl = reg_f(logits, 16), hlab = reg_i(labels, 4), hd = reg_f(dl, 16),
			     hs = reg_f(stats, 2);
	dnn_insert_softmax_xent(NULL, &a, hl, hlab, hd, hs);
	starpu_data_unregister(hl);
	starpu_data_unregister(hlab);
	starpu_data_unregister(hd);
	starpu_data_unregister(hs);
	TEST_CHECK(stats[1] == 3.0f, "softmax_xent ties: correct %g, want 3", (double)stats[1]);
	/* Rows 2 and 3 are uniform: loss log(4) each. */
	double s01 = exp(-2.0) + 1 + 1 + exp(-3.0);
	double want = 2 * (log(s01)) + 2 * log(4.0);
	test_close_mixed("softmax_xent ties loss by hand", &stats[0], &want, 1, 1e-6);
}

// ------------------------------------------------------------------------------- sgd

static void check_sgd(void)
{
	const long n = 37;
	dnn_optim_args a = {.n = n, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f, .scale = 0.5f};
	float *w = alloc_f(n), *v = alloc_f(n), *g = alloc_f(n);
	test_fill_uniform(w, n, -1, 1);
	for (long i = 0; i < n; i++)
		v[i] = 0.0f; /* PyTorch's momentum buffer starts from the first gradient */
	w[0] = 1.0f;
	double *wref = alloc_d(n), *vref = alloc_d(n);
	for (long i = 0; i < n; i++)
		wref[i] = w[i], vref[i] = v[i];
	starpu_data_handle_t hw = reg_f(w, n), hv = reg_f(v, n), hg = reg_f(g, n);

	/* Element 0 by hand: w=1, grad=2 every step, lr 0.1, momentum 0.9, wd 0.01, scale 0.5.
	 * step 1: g = 1 + 0.01        = 1.01        v = 1.01        w = 0.899
	 * step 2: g = 1 + 0.00899     = 1.00899     v = 1.91799     w = 0.707201
	 * step 3: g = 1 + 0.00707201  = 1.00707201  v = 2.73326301  w = 0.433874699 */
	const double hand_w[3] = {0.899, 0.707201, 0.433874699};
	const double hand_v[3] = {1.01, 1.91799, 2.73326301};
	for (int it = 0; it < 3; it++) {
		starpu_data_acquire(hg, STARPU_W);
		test_fill_uniform(g, n, -3, 3);
		g[0] = 2.0f;
		for (long i = 0; i < n; i++) {
			double gi = (double)g[i] * a.scale + (double)a.weight_decay * wref[i];
			vref[i] = (double)a.momentum * vref[i] + gi;
			wref[i] -= (double)a.lr * vref[i];
		}
		starpu_data_release(hg);
		dnn_insert_optim_update(NULL, &a, hw, hv, hg);

		starpu_data_acquire(hw, STARPU_R);
		starpu_data_acquire(hv, STARPU_R);
		starpu_data_acquire(hg, STARPU_R);
		char what[48];
		snprintf(what, sizeof(what), "sgd step %d w", it + 1);
		test_close_mixed(what, w, wref, n, 1e-5);
		snprintf(what, sizeof(what), "sgd step %d v", it + 1);
		test_close_mixed(what, v, vref, n, 1e-5);
		snprintf(what, sizeof(what), "sgd step %d w[0] by hand", it + 1);
		test_close_mixed(what, w, &hand_w[it], 1, 1e-6);
		snprintf(what, sizeof(what), "sgd step %d v[0] by hand", it + 1);
		test_close_mixed(what, v, &hand_v[it], 1, 1e-6);
		int zero = 1;
		for (long i = 0; i < n; i++)
			zero &= g[i] == 0.0f;
		TEST_CHECK(zero, "sgd step %d: grad not zeroed", it + 1);
		starpu_data_release(hg);
		starpu_data_release(hv);
		starpu_data_release(hw);
	}
	starpu_data_unregister(hw);
	starpu_data_unregister(hv);
	starpu_data_unregister(hg);
	free(w), free(v), free(g), free(wref), free(vref);
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	test_rng_seed(1234);

	const int nchw_shapes[][3] = {{1, 1, 1}, {1, 3, 5}, {3, 7, 9}, {8, 16, 49}, {2, 5, 1}};
	for (size_t i = 0; i < sizeof(nchw_shapes) / sizeof(nchw_shapes[0]); i++) {
		check_bias(nchw_shapes[i][0], nchw_shapes[i][1], nchw_shapes[i][2]);
	}

	const int xent_shapes[][2] = {{1, 1}, {1, 10}, {7, 3}, {33, 101}, {64, 10}};
	for (size_t i = 0; i < sizeof(xent_shapes) / sizeof(xent_shapes[0]); i++)
		check_softmax_xent_random(xent_shapes[i][0], xent_shapes[i][1]);
	check_softmax_xent_special();

	check_sgd();

	test_starpu_shutdown();
	return test_report("unit_ops");
}
