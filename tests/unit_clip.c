/* unit_clip — global gradient-norm clipping (--clip-grad-norm; codelets/clip.h, graph/gradclip.h).
 *
 * Kernels: the sum of squares against a long-double reference of sum (g * scale)^2 (sizes below,
 * at and above one grid of 128 x 256 threads; relative 1e-13: each term is exact in double and
 * each partial adds at most n / 32768 + 8 + 7 terms), and bit for bit against a plain transcription
 * of the CUDA launch's order (clip.h), which is what makes the CPU and the GPU agree; the
 * coefficient: 1.0f exactly below X, X / (norm + 1e-6) above, NaN for a non-finite norm.
 *
 * The update: one cl_optim_update task with the coefficient buffer equals one without it on
 * the gradient times the coefficient, for sgd, adamw, lars and lamb: within 4 float roundings
 * (relative 1e-6 of max(1, |x|): grad * (scale * c) and (grad * c) * scale differ by one or two
 * roundings of g, which the updates carry at most a few times), and bit for bit with c = 1.
 *
 * Through training steps of lenet5 (Fashion-MNIST, 4 chunks, 2 slots):
 *   - the coefficient against a double reference computed from the gradients read back: a step
 *     with lr 0, momentum 0 and no weight decay leaves w unchanged and puts grad * scale (* c) in
 *     the momentum buffer, so a first run reads G = grad / B, the reference norm is
 *     sqrt(sum G^2) in long double (relative 1e-12 against the task's), the coefficient
 *     (float)min(1, X / (norm + 1e-6)) (1 ulp), and the clipped run's buffer is G * c (1e-6);
 *   - X = 1e30 gives the bits of no clipping after 6 steps of sgd and of adamw (c = 1 exactly);
 *   - negative control: X = 0.05, below the norms measured (0.15-0.25), moves the parameters.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clip.h"
#include "data_source.h"
#include "dataset.h"
#include "gradclip.h"
#include "knobs.h"
#include "optim.h"
#include "test_util.h"

/* ---------------------------------------------------------------- kernels */
/* The CUDA launch's order, transcribed: thread (b, t) sums its strided elements, then each
 * block's tree, then the blocks in order (clip.cu: sumsq_blocks_kernel, sumsq_total_kernel). */
static double grid_order_sumsq(const float *x, long n, float scale)
{
	enum { B = DNN_SUMSQ_BLOCKS, T = DNN_SUMSQ_THREADS };
	double total = 0;
	for (long b = 0; b < B; b++) {
		double s[T];
		for (long t = 0; t < T; t++) {
			double acc = 0;
			for (long i = b * T + t; i < n; i += (long)B * T) {
				const double g = (double)(x[i] * scale);
				acc += g * g;
			}
			s[t] = acc;
		}
		for (long h = T / 2; h > 0; h >>= 1)
			for (long t = 0; t < h; t++)
				s[t] += s[t + h];
		total += s[0];
	}
	return total;
}

static void check_sumsq(void)
{
	const long sizes[] = {0, 1, 7, 255, 256, 257, 32768, 32769, 100003, 400000};
	const float scale = 1.0f / 96.0f;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		const long n = sizes[k];
		float *x = alloc_f((size_t)(n > 0 ? n : 1));
		test_fill_uniform(x, (size_t)n, -3, 3);
		long double ref = 0;
		for (long i = 0; i < n; i++) {
			const long double g = (long double)(x[i] * scale);
			ref += g * g;
		}
		const double got = dnn_grad_sumsq_cpu(x, n, scale), grid = grid_order_sumsq(x, n, scale);
		TEST_CHECK(fabsl((long double)got - ref) <= 1e-13L * ref, "sumsq n=%ld: %.17g vs reference %.17Lg", n, got,
			   ref);
		TEST_CHECK(memcmp(&got, &grid, sizeof(got)) == 0, "sumsq n=%ld: %.17g is not the grid order's %.17g", n,
			   got, grid);
		free(x);
	}
	/* The coefficient's rule */
	TEST_CHECK(dnn_clip_coef_of(0.5, 1.0f) == 1.0f, "norm below X: coefficient %g, want 1", (double)dnn_clip_coef_of(0.5, 1.0f));
	TEST_CHECK(dnn_clip_coef_of(0.0, 1e-3f) == 1.0f, "zero norm: coefficient %g, want 1", (double)dnn_clip_coef_of(0.0, 1e-3f));
	const float c = dnn_clip_coef_of(4.0, 1.0f);
	TEST_CHECK(c == (float)(1.0 / (4.0 + 1e-6)), "norm 4, X 1: coefficient %.9g, want %.9g", (double)c, 1.0 / (4.0 + 1e-6));
	TEST_CHECK(isnan(dnn_clip_coef_of(NAN, 1.0f)) && isnan(dnn_clip_coef_of(INFINITY, 1.0f)),
		   "a non-finite norm must give a NaN coefficient (the run's non-finite check stops it)");
	const double sums[3] = {1.0, 4.0, 4.0};
	float cc;
	double nn;
	dnn_clip_coef_cpu(&cc, &nn, sums, 3, 1.5f);
	TEST_CHECK(nn == 3.0 && cc == (float)(1.5 / (3.0 + 1e-6)), "coef of sums 1+4+4: norm %g coef %.9g", nn, (double)cc);
}

/* ---------------------------------------------------------------- the update with a coefficient */
enum { NU = 777 };

/* One cl_optim_update task on copies of w, v, grad: with clip (coefficient c in a buffer of its
 * own) or without (the gradient as given). Results in w, v. */
static void one_update(float *w, float *v, float *grad, const dnn_optim_args *a, int clip, float c)
{
	const int sm = dnn_optimizer_state_mult((dnn_optimizer)a->optimizer);
	starpu_data_handle_t hw = reg_f(w, NU), hv = reg_f(v, (size_t)NU * sm), hg = reg_f(grad, NU), hc = reg_f(&c, 1);
	dnn_optim_args c_args = *a;
	c_args.clip = clip;
	struct starpu_data_descr d[4] = {{hw, STARPU_RW}, {hv, STARPU_RW}, {hg, STARPU_RW}, {hc, STARPU_R}};
	test_task(&cl_optim_update, -1, &c_args, sizeof(c_args), d, clip ? 4 : 3, "optim_update");
	starpu_task_wait_for_all();
	starpu_data_unregister(hw), starpu_data_unregister(hv), starpu_data_unregister(hg), starpu_data_unregister(hc);
}

static void check_update_clip(void)
{
	const dnn_optimizer opts[] = {DNN_OPT_SGD, DNN_OPT_ADAMW, DNN_OPT_LARS, DNN_OPT_LAMB};
	const float coefs[] = {0.37f, 1.0f};
	for (size_t o = 0; o < 4; o++)
		for (size_t k = 0; k < 2; k++) {
			const float c = coefs[k];
			dnn_optim_args a = {.n = NU, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f, .scale = 1.0f / 64,
					    .optimizer = (int)opts[o], .layerwise = 1, .beta1 = 0.9f, .beta2 = 0.999f,
					    .eps = 1e-8f, .trust = 0.001f, .bc1 = 0.1f, .bc2 = 0.001f};
			float w0[NU], v0[2 * NU], g0[NU];
			test_fill_uniform(w0, NU, -0.5f, 0.5f);
			test_fill_uniform(v0, 2 * NU, 0.0f, 0.01f); /* adam's s >= 0 */
			test_fill_uniform(g0, NU, -20, 20);
			float w1[NU], v1[2 * NU], g1[NU], w2[NU], v2[2 * NU], g2[NU];
			memcpy(w1, w0, sizeof(w0)), memcpy(v1, v0, sizeof(v0)), memcpy(g1, g0, sizeof(g0));
			memcpy(w2, w0, sizeof(w0)), memcpy(v2, v0, sizeof(v0));
			for (int i = 0; i < NU; i++)
				g2[i] = g0[i] * c;
			one_update(w1, v1, g1, &a, 1, c);
			one_update(w2, v2, g2, &a, 0, 1.0f);
			int nonzero = 0;
			for (int i = 0; i < NU; i++)
				nonzero += g1[i] != 0.0f;
			TEST_CHECK(nonzero == 0, "%s: the clipped update left %d gradient elements unzeroed",
				   dnn_optimizer_name(opts[o]), nonzero);
			const int sm = dnn_optimizer_state_mult(opts[o]);
			char what[96];
			snprintf(what, sizeof(what), "%s, c=%g: w clipped vs w on grad*c", dnn_optimizer_name(opts[o]), (double)c);
			if (c == 1.0f) {
				test_same_bits(what, w1, w2, NU);
				snprintf(what, sizeof(what), "%s, c=1: state", dnn_optimizer_name(opts[o]));
				test_same_bits(what, v1, v2, (size_t)NU * sm);
			} else {
				test_close_mixed_f(what, w1, w2, NU, 1e-6);
				snprintf(what, sizeof(what), "%s, c=%g: state", dnn_optimizer_name(opts[o]), (double)c);
				test_close_mixed_f(what, v1, v2, (size_t)NU * sm, 1e-6);
				/* and the clipping did something: the unclipped update is elsewhere. Not for LARS
				 * with its trust ratio: its local rate divides by ||g||, so c cancels out but for
				 * the weight decay term (the state moved by 1.4e-7 here) */
				if (opts[o] == DNN_OPT_LARS)
					continue;
				float w3[NU], v3[2 * NU], g3[NU];
				memcpy(w3, w0, sizeof(w0)), memcpy(v3, v0, sizeof(v0)), memcpy(g3, g0, sizeof(g0));
				one_update(w3, v3, g3, &a, 0, 1.0f);
				double dmax = 0;
				for (int i = 0; i < NU * sm; i++)
					dmax = fmax(dmax, fabs((double)v3[i] - v1[i]));
				TEST_CHECK(dmax > 1e-4, "%s: the coefficient %g changed the state by only %g",
					   dnn_optimizer_name(opts[o]), (double)c, dmax);
			}
		}
}

/* ---------------------------------------------------------------- through training steps */
enum { BATCH = 96, CHUNKS = 4, SLOTS = 2 };

typedef struct {
	float *w, *v;     // every tensor's value and state, concatenated
	long nw, nv;
	double norm[16];  // per step: the task's pre-clip norm (NaN without clipping)
	float coef;       // the last step's coefficient (NaN without clipping)
} run_out;

static void run(const dnn_dataset *ds, const dnn_optim_config *optim, int steps, run_out *out)
{
	char err[512];
	dnn_graph g;
	dnn_model m;
	dnn_plan p;
	if (dnn_graph_load(&g, "lenet5", err, sizeof(err)) != 0 || dnn_model_create(&m, &g, 123, err, sizeof(err)) != 0 ||
	    dnn_model_set_optimizer(&m, optim->optimizer, err, sizeof(err)) != 0) {
		fprintf(stderr, "FAIL: lenet5: %s\n", err);
		exit(1);
	}
	dnn_dataset_channel_stats(ds, m.in_mean, m.in_std);
	if (dnn_plan_create(&p, &m, BATCH, CHUNKS, SLOTS, 1, dnn_knobs_get(), err, sizeof(err)) != 0) {
		fprintf(stderr, "FAIL: plan: %s\n", err);
		exit(1);
	}
	dnn_data_source src;
	dnn_dataset_source(&src, ds);
	int idx[BATCH];
	for (int s = 0; s < steps; s++) {
		for (int i = 0; i < BATCH; i++)
			idx[i] = ((s * BATCH + i) * 7919) % ds->n;
		dnn_optim_config o = *optim;
		o.t = s + 1;
		double l, c;
		if (dnn_submit_step(&p, s % SLOTS, &src, idx, s, &o, err, sizeof(err)) != 0 ||
		    dnn_wait_step(&p, s % SLOTS, &l, &c, err, sizeof(err)) != 0 ||
		    dnn_plan_grad_norm(&p, s % SLOTS, &out->norm[s], err, sizeof(err)) != 0) {
			fprintf(stderr, "FAIL: step %d: %s\n", s, err);
			exit(1);
		}
	}
	starpu_task_wait_for_all();
	out->coef = NAN;
	if (optim->clip_norm > 0) {
		starpu_data_handle_t hc = p.clip_coef[(steps - 1) % SLOTS];
		TEST_CHECK(starpu_data_acquire(hc, STARPU_R) == 0, "acquire the coefficient");
		out->coef = ((float *)starpu_data_get_local_ptr(hc))[0];
		starpu_data_release(hc);
	}
	out->w = test_model_params(&m, &out->nw);
	out->nv = 0;
	for (int i = 0; i < m.nparams; i++)
		out->nv += dnn_param_state_n(&m, &m.params[i]);
	out->v = alloc_f((size_t)out->nv);
	for (long i = 0, o = 0; i < m.nparams; o += dnn_param_state_n(&m, &m.params[i]), i++)
		memcpy(out->v + o, m.params[i].v, sizeof(float) * (size_t)dnn_param_state_n(&m, &m.params[i]));
	dnn_plan_destroy(&p);
	dnn_model_destroy(&m);
	dnn_graph_free(&g);
}

static void free_out(run_out *r) { free(r->w), free(r->v); }

static void check_training(const dnn_dataset *ds)
{
	/* 1. Gradients read back: lr 0, no momentum, no decay: v = grad * scale (* c), w unchanged. */
	dnn_optim_config probe = {.lr = 0, .momentum = 0, .weight_decay = 0, .optimizer = DNN_OPT_SGD};
	run_out g0, g1;
	run(ds, &probe, 1, &g0);
	long double ss = 0;
	for (long i = 0; i < g0.nv; i++)
		ss += (long double)g0.v[i] * (long double)g0.v[i];
	const double ref_norm = (double)sqrtl(ss);
	const float X = (float)(ref_norm * 0.3); /* the coefficient is then about 0.3 */
	const float ref_coef = (float)((double)X / (ref_norm + 1e-6));
	probe.clip_norm = X;
	run(ds, &probe, 1, &g1);
	printf("step 1: norm %.9g (reference from the gradients read back %.9g), X %.6g, coefficient %.9g "
	       "(reference %.9g)\n", g1.norm[0], ref_norm, (double)X, (double)g1.coef, (double)ref_coef);
	TEST_CHECK(isnan(g0.norm[0]), "without clipping the step's norm must be NaN (not computed), got %g", g0.norm[0]);
	TEST_CHECK(fabs(g1.norm[0] - ref_norm) <= 1e-12 * ref_norm, "norm %.17g vs reference %.17g", g1.norm[0], ref_norm);
	TEST_CHECK(fabsf(g1.coef - ref_coef) <= nextafterf(ref_coef, 2.0f) - ref_coef, "coefficient %.9g vs %.9g",
		   (double)g1.coef, (double)ref_coef);
	float *want = alloc_f((size_t)g0.nv);
	for (long i = 0; i < g0.nv; i++)
		want[i] = g0.v[i] * g1.coef;
	test_close_rel_f("clipped step's gradient vs gradient * coefficient", g1.v, want, (size_t)g0.nv, 1e-6);
	test_same_bits("lr 0 leaves w as it was (clipped vs not)", g1.w, g0.w, (size_t)g0.nw);
	free(want);
	free_out(&g0), free_out(&g1);

	/* 2. X huge: c = 1 exactly, so the bits of no clipping; X small: other parameters. */
	const dnn_optimizer opts[] = {DNN_OPT_SGD, DNN_OPT_ADAMW};
	for (int o = 0; o < 2; o++) {
		dnn_optim_config base = {.lr = opts[o] == DNN_OPT_SGD ? 0.05f : 1e-3f, .momentum = 0.9f, .weight_decay = 5e-4f,
					 .optimizer = opts[o], .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
		run_out off, huge, small;
		run(ds, &base, 6, &off);
		base.clip_norm = 1e30f;
		run(ds, &base, 6, &huge);
		base.clip_norm = 0.05f;
		run(ds, &base, 6, &small);
		const char *name = dnn_optimizer_name(opts[o]);
		printf("%s: norms before clipping (X = 0.05):", name);
		for (int s = 0; s < 6; s++)
			printf(" %.4g", small.norm[s]);
		printf("; last coefficient %.4g; with X = 1e30: %.4g\n", (double)small.coef, (double)huge.coef);
		char what[96];
		snprintf(what, sizeof(what), "%s: X = 1e30 vs no clipping (parameters)", name);
		test_same_bits(what, huge.w, off.w, (size_t)off.nw);
		snprintf(what, sizeof(what), "%s: X = 1e30 vs no clipping (state)", name);
		test_same_bits(what, huge.v, off.v, (size_t)off.nv);
		TEST_CHECK(huge.coef == 1.0f, "%s: X = 1e30 gave the coefficient %.9g, want 1", name, (double)huge.coef);
		for (int s = 0; s < 6; s++)
			TEST_CHECK(small.norm[s] > 0.05 && isfinite(small.norm[s]), "%s step %d: norm %g, want finite and above X", name, s,
				   small.norm[s]);
		double dmax = 0;
		for (long i = 0; i < off.nw; i++)
			dmax = fmax(dmax, fabs((double)small.w[i] - off.w[i]));
		TEST_CHECK(dmax > 1e-4, "%s: X = 0.05 moved the parameters by only %g (clipping had no effect)", name, dmax);
		free_out(&off), free_out(&huge), free_out(&small);
	}
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	test_rng_seed(7);
	check_sumsq();
	check_update_clip();
	dnn_dataset ds;
	char err[512];
	if (dnn_dataset_load_fashion(&ds, DNN_FASHION_MNIST_DIR, 1, 2048, err, sizeof(err)) != 0) {
		fprintf(stderr, "SKIP: Fashion-MNIST not installed (%s)\n", err);
		test_starpu_shutdown();
		return test_failures ? 1 : TEST_SKIP;
	}
	check_training(&ds);
	dnn_dataset_free(&ds);
	test_starpu_shutdown();
	return test_report("unit_clip");
}
