/* unit_optim — the four update rules of the update codelet's CPU kernel (codelets/optim.h:
 * dnn_optim_update_delta_cpu) against a double-precision reference of each published formula,
 * written out here, over 20 steps with fresh gradients each step:
 *   sgd   PyTorch's SGD with momentum and (coupled) weight decay;
 *   lars  You, Gitman & Ginsburg 2017, Algorithm 1 (local rate eta*||w||/(||g||+wd*||w||)), on a
 *         weight (trust ratio) and on a bias (none);
 *   adamw Loshchilov & Hutter 2019 / torch.optim.AdamW (decoupled decay, bias correction);
 *   lamb  You et al. 2020, Algorithm 2 (phi the identity): AdamW's bias-corrected direction plus
 *         wd*w, scaled by the trust ratio ||w||/||u||, on a weight (trust ratio) and on a bias (none).
 * Tolerance: the kernel works in float (24-bit mantissa, 6e-8 relative per rounding); each step
 * rounds a handful of times per element and the errors carry over through w and the state, so
 * after 20 steps |float - double| stays within ~1e-6 relative to max(1, |value|) (the measured
 * maximum is printed: 1.3e-7 to 2.3e-7 here). 2e-6 allows an order of magnitude of headroom over
 * the measurement without letting a wrong formula through: a wrong sign, a missing bias
 * correction, a trust ratio off by wd*||w|| or a missing LAMB trust ratio each move w by 1e-3 or more in these cases (the
 * test checks that too: the reference with one term altered must miss by > 100x the tolerance).
 * AdamW's 16-lane loop (dnn_optim_set_simd) must give the portable loop's bits, over steps, with and
 * without delta, at sizes with masked tails and on zeros, denormals and large values; negative
 * control: the same update with its last product fused into an FMA (what fp-contract would make of
 * it) gives other bits on these data, so the comparison sees a reordering of one rounding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim.h"
#include "test_util.h"

enum { N = 1000, STEPS = 20 };
#define TOL 2e-6

/* The double reference, one step. variant != 0 alters the formula (the sensitivity check). */
static void ref_step(double *w, double *s1, double *s2, const float *grad, const dnn_optim_args *a, long t, int variant)
{
	const double lr = a->lr, mom = a->momentum, wd = a->weight_decay;
	double g[N];
	for (int i = 0; i < N; i++)
		g[i] = (double)grad[i] * (double)a->scale;
	if (a->optimizer == DNN_OPT_SGD) {
		for (int i = 0; i < N; i++) {
			s1[i] = mom * s1[i] + g[i] + wd * w[i];
			w[i] -= lr * s1[i];
		}
	} else if (a->optimizer == DNN_OPT_LARS) {
		double ww = 0, gg = 0;
		for (int i = 0; i < N; i++)
			ww += w[i] * w[i], gg += g[i] * g[i];
		double local = a->layerwise ? a->trust * sqrt(ww) / (sqrt(gg) + (variant ? 0 : wd) * sqrt(ww)) : 1.0;
		for (int i = 0; i < N; i++) {
			s1[i] = mom * s1[i] + lr * local * (g[i] + wd * w[i]);
			w[i] -= s1[i];
		}
	} else if (a->optimizer == DNN_OPT_LAMB) {
		const double b1 = a->beta1, b2 = a->beta2, bc1 = 1 - pow(b1, (double)t), bc2 = 1 - pow(b2, (double)t);
		double u[N], ww = 0, uu = 0;
		for (int i = 0; i < N; i++) {
			s1[i] = b1 * s1[i] + (1 - b1) * g[i];
			s2[i] = b2 * s2[i] + (1 - b2) * g[i] * g[i];
			u[i] = (s1[i] / bc1) / (sqrt(s2[i] / bc2) + a->eps) + wd * w[i];
			ww += w[i] * w[i], uu += u[i] * u[i];
		}
		double ratio = a->layerwise && !variant ? sqrt(ww) / sqrt(uu) : 1.0;
		for (int i = 0; i < N; i++)
			w[i] -= lr * ratio * u[i];
	} else {
		const double b1 = a->beta1, b2 = a->beta2, bc1 = 1 - pow(b1, (double)t), bc2 = 1 - pow(b2, (double)t);
		for (int i = 0; i < N; i++) {
			w[i] *= 1 - lr * wd;
			s1[i] = b1 * s1[i] + (1 - b1) * g[i];
			s2[i] = b2 * s2[i] + (1 - b2) * g[i] * g[i];
			double mhat = s1[i] / (variant ? 1 : bc1), vhat = s2[i] / bc2;
			w[i] -= lr * mhat / (sqrt(vhat) + a->eps);
		}
	}
}

static double max_err(const float *got, const double *ref, int n)
{
	double e = 0;
	for (int i = 0; i < n; i++) {
		double d = fabs((double)got[i] - ref[i]) / fmax(1.0, fabs(ref[i]));
		e = d > e ? d : e;
	}
	return e;
}

/* STEPS updates by the kernel and by the reference from the same start; returns the max error
 * over w and the state, and (variant) the altered reference's distance. */
static double run(const char *what, dnn_optim_args a, int variant)
{
	test_rng_seed(7);
	float w[N], v[2 * N], grad[N], delta[N];
	double rw[N], r1[N], r2[N];
	test_fill_uniform(w, N, -0.5f, 0.5f);
	memset(v, 0, sizeof v);
	for (int i = 0; i < N; i++)
		rw[i] = w[i], r1[i] = r2[i] = 0;
	double err = 0;
	for (long t = 1; t <= STEPS; t++) {
		test_fill_uniform(grad, N, -20, 20); /* a summed gradient: scale makes it a mean */
		a.bc1 = (float)(1 - pow((double)a.beta1, (double)t)), a.bc2 = (float)(1 - pow((double)a.beta2, (double)t));
		float wold[N];
		memcpy(wold, w, sizeof w);
		ref_step(rw, r1, r2, grad, &a, t, variant);
		dnn_optim_update_delta_cpu(w, v, grad, delta, &a);
		for (int i = 0; i < N; i++) {
			TEST_CHECK(grad[i] == 0.0f, "%s: grad[%d] not zeroed", what, i);
			TEST_CHECK(delta[i] == w[i] - wold[i] || fabsf(delta[i] - (w[i] - wold[i])) <= 1e-7f * fmaxf(1, fabsf(wold[i])),
				   "%s step %ld: delta[%d] %g is not the applied change %g", what, t, i, delta[i], w[i] - wold[i]);
			if (test_failures > 20)
				return 1;
		}
	}
	err = fmax(max_err(w, rw, N), max_err(v, r1, N));
	if (a.optimizer == DNN_OPT_ADAMW || a.optimizer == DNN_OPT_LAMB)
		err = fmax(err, max_err(v + N, r2, N));
	return err;
}

/* One AdamW tensor of n elements through `steps` updates, portable (simd 0) or 16 lanes (1), or
 * (fused = 1, portable) with w decay - q fused into fmaf: w, the moments and the deltas of the
 * last step into out (4n floats). */
static void adamw_run(float *out, long n, int steps, int simd, int fused)
{
	float *w = out, *v = out + n, *d = out + 3 * n, *g = malloc(n * sizeof(float));
	if (!g) {
		TEST_CHECK(0, "adamw simd: out of memory");
		return;
	}
	test_rng_seed(77);
	test_fill_uniform(w, n, -1, 1);
	memset(v, 0, 2 * n * sizeof(float));
	for (long i = 0; i < n && i < 8; i++) /* zeros, denormals, large values */
		w[i] = i == 0 ? 0.0f : i == 1 ? 1e-40f : i == 2 ? -3e-39f : i == 3 ? 1e30f : w[i] * 1e4f;
	dnn_optim_set_simd(simd);
	for (int t = 1; t <= steps; t++) {
		test_fill_uniform(g, n, -3, 3);
		if (n > 5)
			g[4] = 0.0f, g[5] = 1e-41f;
		dnn_optim_args a = {.n = n, .optimizer = DNN_OPT_ADAMW, .lr = 1e-3f, .weight_decay = 0.1f, .scale = 1.0f / 64,
				    .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .bc1 = 1.0f - powf(0.9f, (float)t),
				    .bc2 = 1.0f - powf(0.999f, (float)t), .keep_grad = 1};
		if (!fused) {
			dnn_optim_update_delta_cpu(w, v, g, t % 2 ? d : NULL, &a);
			continue;
		}
		float step = a.lr / a.bc1, sq2 = sqrtf(a.bc2), decay = 1.0f - a.lr * a.weight_decay;
		for (long i = 0; i < n; i++) {
			const float gi = g[i] * a.scale, w0 = w[i];
			v[i] = a.beta1 * v[i] + (1.0f - a.beta1) * gi;
			v[n + i] = a.beta2 * v[n + i] + (1.0f - a.beta2) * gi * gi;
			w[i] = fmaf(w0, decay, -(step * v[i] / (sqrtf(v[n + i]) / sq2 + a.eps)));
			if (t % 2)
				d[i] = w[i] - w0;
		}
	}
	free(g);
	dnn_optim_set_simd(1);
}

static void adamw_simd_bits(void)
{
	if (!dnn_optim_set_simd(1)) {
		printf("adamw 16 lanes: no AVX-512F here, the portable loop only\n");
		return;
	}
	static const long sizes[] = {1, 15, 16, 17, 1000, 4099};
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		const long n = sizes[k];
		float *p = malloc(4 * n * sizeof(float)), *q = malloc(4 * n * sizeof(float));
		TEST_CHECK(p && q, "adamw simd: out of memory");
		if (p && q) {
			char what[64];
			snprintf(what, sizeof what, "adamw 16 lanes n=%ld", n);
			adamw_run(p, n, 7, 0, 0), adamw_run(q, n, 7, 1, 0);
			TEST_CHECK(test_same_bits(what, q, p, 4 * (size_t)n), "%s: other bits than the portable loop", what);
			if (n >= 1000) {
				adamw_run(q, n, 7, 0, 1);
				TEST_CHECK(memcmp(q, p, 4 * (size_t)n * sizeof(float)) != 0,
					   "%s: negative control: the FMA-fused update gave the same bits, so the check "
					   "cannot see a contraction",
					   what);
			}
			printf("%s: the portable loop's bits\n", what);
		}
		free(p), free(q);
	}
	printf("adamw isa: %s\n", dnn_optim_isa());
}

int main(void)
{
	const dnn_optim_args base = {.n = N, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f, .scale = 1.0f / 256,
				   .write_delta = 1, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .trust = 0.001f};
	struct {
		const char *name;
		int opt, layerwise;
		float lr, wd;
	} cases[] = {{"sgd", DNN_OPT_SGD, 0, 0.1f, 5e-4f},
		     {"lars weight", DNN_OPT_LARS, 1, 2.0f, 1e-2f},
		     {"lars bias (no trust ratio)", DNN_OPT_LARS, 0, 0.1f, 0.0f},
		     {"adamw", DNN_OPT_ADAMW, 1, 1e-3f, 0.05f},
		     {"lamb weight", DNN_OPT_LAMB, 1, 5e-3f, 0.01f},
		     {"lamb bias (no trust ratio)", DNN_OPT_LAMB, 0, 5e-3f, 0.0f}};
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		dnn_optim_args a = base;
		a.optimizer = cases[k].opt, a.layerwise = cases[k].layerwise, a.lr = cases[k].lr,
		a.weight_decay = cases[k].wd;
		double e = run(cases[k].name, a, 0);
		printf("%-28s max |float - double| / max(1,|x|) over %d steps: %.3g (tolerance %.0e)\n", cases[k].name,
		       STEPS, e, TOL);
		TEST_CHECK(e <= TOL, "%s: max error %.3g over the tolerance %.0e", cases[k].name, e, TOL);
		if (cases[k].opt != DNN_OPT_SGD && cases[k].layerwise) { /* the check can fail: an altered formula misses */
			double miss = run(cases[k].name, a, 1);
			printf("%-28s with the formula altered (%s): %.3g\n", cases[k].name,
			       cases[k].opt == DNN_OPT_LARS    ? "no wd*||w|| in the trust ratio"
			       : cases[k].opt == DNN_OPT_ADAMW ? "no bias correction"
							       : "no trust ratio",
			       miss);
			TEST_CHECK(miss > 100 * TOL, "%s: an altered formula is within %.3g: the test cannot tell", cases[k].name,
				   miss);
		}
	}
	/* The trust ratio itself, on a tensor whose norms are known: ||w|| = 3*sqrt(N)... */
	float w[N], g[N];
	for (int i = 0; i < N; i++)
		w[i] = 3.0f, g[i] = 4.0f * 256; /* scaled gradient 4 */
	dnn_optim_args a = base;
	a.optimizer = DNN_OPT_LARS, a.layerwise = 1, a.weight_decay = 0.1f;
	double want = (double)a.trust * 3.0 / (4.0 + (double)a.weight_decay * 3.0);
	double got = dnn_lars_rate(w, g, &a);
	TEST_CHECK(fabs(got - want) <= 1e-12, "lars rate %.12g, want eta*||w||/(||g||+wd*||w||) = %.12g", got, want);
	a.layerwise = 0;
	TEST_CHECK(dnn_lars_rate(w, g, &a) == 1.0, "no trust ratio for a bias/BN tensor");
	a.layerwise = 1;
	memset(w, 0, sizeof w);
	TEST_CHECK(dnn_lars_rate(w, g, &a) == 1.0, "||w|| = 0 must give rate 1");
	TEST_CHECK(dnn_optimizer_state_mult(DNN_OPT_ADAMW) == 2 && dnn_optimizer_state_mult(DNN_OPT_LARS) == 1 &&
			   dnn_optimizer_state_mult(DNN_OPT_LAMB) == 2,
		   "state sizes");
	/* LAMB's trust ratio on known norms: ||w||^2 = 9, ||u||^2 = 16 -> 3/4; 1 for a bias or a zero norm. */
	TEST_CHECK(fabs(dnn_lamb_ratio(9.0, 16.0, 1) - 0.75) <= 1e-15, "lamb ratio %.17g, want 0.75",
		   dnn_lamb_ratio(9.0, 16.0, 1));
	TEST_CHECK(dnn_lamb_ratio(9.0, 16.0, 0) == 1.0 && dnn_lamb_ratio(0.0, 16.0, 1) == 1.0 &&
			   dnn_lamb_ratio(9.0, 0.0, 1) == 1.0,
		   "lamb ratio must be 1 without layerwise or with a zero norm");
	adamw_simd_bits();
	return test_report("unit_optim");
}
