/* gpu_clip — the gradient-norm clipping codelets (codelets/clip.cu) on a CUDA worker against the CPU
 * worker, from the same inputs:
 *   - cl_grad_sumsq: bit for bit (clip.h: the CPU kernel reproduces the CUDA grid's order, and a
 *     float squared is exact in double, so an FMA changes nothing), sizes below, at and above one
 *     grid of 128 x 256 threads; that is what makes a coefficient independent of which kind of
 *     worker computed it;
 *   - cl_clip_coef over 12 sums (more buffers than STARPU_NMAXBUFS): norm and coefficient bit
 *     for bit (the same adds in parameter order, IEEE sqrt and division in double);
 *   - cl_optim_update with the coefficient buffer, sgd, adamw, lars, lamb, three steps: within
 *     gpu_optim's 1e-5 (FMA contraction; LARS's and LAMB's norms in another order), and with a
 *     coefficient of 1 the CUDA worker's bits of the update without it.
 * Skipped (77) without a CUDA or a CPU worker. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clip.h"
#include "gpu_util.h"
#include "optim.h"
#include "test_util.h"

enum { GPU = 0, CPU = 1, NDEV = 2, STEPS = 3, NSUMS = 12 };
static int workers[NDEV];

static void check_sumsq(long n)
{
	float *g = alloc_f((size_t)n);
	test_fill_uniform(g, (size_t)n, -40, 40);
	double out[NDEV];
	for (int d = 0; d < NDEV; d++) {
		out[d] = NAN;
		starpu_data_handle_t ho, hg = reg_f(g, (size_t)n);
		starpu_vector_data_register(&ho, STARPU_MAIN_RAM, (uintptr_t)&out[d], 1, sizeof(double));
		const dnn_sumsq_args a = {.n = n, .scale = 1.0f / 96};
		struct starpu_data_descr desc[] = {{ho, STARPU_W}, {hg, STARPU_R}};
		gpu_task(&cl_grad_sumsq, workers[d], &a, sizeof a, desc, 2, "grad_sumsq");
		starpu_data_unregister(ho), starpu_data_unregister(hg);
	}
	TEST_CHECK(memcmp(&out[GPU], &out[CPU], sizeof(double)) == 0, "sumsq n=%ld: cuda %.17g vs cpu %.17g", n, out[GPU],
		   out[CPU]);
	free(g);
}

static void check_coef(void)
{
	double sums[NSUMS];
	for (int i = 0; i < NSUMS; i++)
		sums[i] = (double)test_rng_uniform(0, 1) * pow(10.0, i % 5 - 2);
	float coef[NDEV];
	double norm[NDEV];
	for (int d = 0; d < NDEV; d++) {
		struct starpu_data_descr desc[2 + NSUMS];
		coef[d] = NAN, norm[d] = NAN;
		starpu_vector_data_register(&desc[0].handle, STARPU_MAIN_RAM, (uintptr_t)&coef[d], 1, sizeof(float));
		starpu_vector_data_register(&desc[1].handle, STARPU_MAIN_RAM, (uintptr_t)&norm[d], 1, sizeof(double));
		desc[0].mode = desc[1].mode = STARPU_W;
		for (int i = 0; i < NSUMS; i++) {
			starpu_vector_data_register(&desc[2 + i].handle, STARPU_MAIN_RAM, (uintptr_t)&sums[i], 1, sizeof(double));
			desc[2 + i].mode = STARPU_R;
		}
		const dnn_clip_args a = {.max_norm = 0.75f, .nparams = NSUMS};
		gpu_task(&cl_clip_coef, workers[d], &a, sizeof a, desc, 2 + NSUMS, "clip_coef");
		for (int i = 0; i < 2 + NSUMS; i++)
			starpu_data_unregister(desc[i].handle);
	}
	float cref;
	double nref;
	dnn_clip_coef_cpu(&cref, &nref, sums, NSUMS, 0.75f);
	printf("clip_coef: norm cuda %.17g cpu %.17g kernel %.17g; coef %.9g %.9g %.9g\n", norm[GPU], norm[CPU], nref,
	       (double)coef[GPU], (double)coef[CPU], (double)cref);
	TEST_CHECK(memcmp(&norm[GPU], &norm[CPU], sizeof(double)) == 0 && norm[CPU] == nref, "clip_coef: norms differ");
	TEST_CHECK(coef[GPU] == coef[CPU] && coef[CPU] == cref && cref < 1.0f, "clip_coef: coefficients differ (or no clip)");
}

/* STEPS clipped updates on each worker (coefficient c), and with c = 1 the CUDA worker's plain update. */
static void check_update(const char *name, dnn_optim_args a, long n, float c)
{
	a.n = n;
	const long ns = n * dnn_optimizer_state_mult((dnn_optimizer)a.optimizer);
	float *w0 = alloc_f((size_t)n), *v0 = alloc_f((size_t)ns), *g0 = alloc_f((size_t)n);
	test_fill_uniform(w0, (size_t)n, -1, 1);
	test_fill_uniform(v0, (size_t)ns, 0, 0.01f);
	test_fill_uniform(g0, (size_t)n, -30, 30);
	float *w[NDEV + 1], *v[NDEV + 1];
	for (int d = 0; d <= NDEV; d++) { /* d = NDEV: the CUDA worker without the coefficient */
		float *g = gpu_copy_f(g0, (size_t)n), cc = c;
		w[d] = gpu_copy_f(w0, (size_t)n), v[d] = gpu_copy_f(v0, (size_t)ns);
		starpu_data_handle_t hw = reg_f(w[d], (size_t)n), hv = reg_f(v[d], (size_t)ns), hg = reg_f(g, (size_t)n),
				     hc = reg_f(&cc, 1);
		struct starpu_data_descr desc[] = {{hw, STARPU_RW}, {hv, STARPU_RW}, {hg, STARPU_R}, {hc, STARPU_R}};
		dnn_optim_args s = a;
		s.keep_grad = 1, s.clip = d < NDEV;
		for (long t = 1; t <= STEPS; t++) {
			s.bc1 = (float)(1 - pow((double)a.beta1, (double)t)), s.bc2 = (float)(1 - pow((double)a.beta2, (double)t));
			gpu_task(&cl_optim_update, workers[d < NDEV ? d : GPU], &s, sizeof s, desc, d < NDEV ? 4 : 3,
				 "optim_update");
		}
		starpu_data_unregister(hw), starpu_data_unregister(hv), starpu_data_unregister(hg), starpu_data_unregister(hc);
		free(g);
	}
	char what[160];
	snprintf(what, sizeof what, "%s n=%ld c=%g: w cuda vs cpu", name, n, (double)c);
	gpu_close_scaled(what, w[GPU], w[CPU], (size_t)n, 1e-5);
	snprintf(what, sizeof what, "%s n=%ld c=%g: state cuda vs cpu", name, n, (double)c);
	gpu_close_scaled(what, v[GPU], v[CPU], (size_t)ns, 1e-5);
	if (c == 1.0f) {
		snprintf(what, sizeof what, "%s n=%ld: cuda, c = 1 vs no coefficient: w", name, n);
		test_same_bits(what, w[GPU], w[NDEV], (size_t)n);
		snprintf(what, sizeof what, "%s n=%ld: cuda, c = 1 vs no coefficient: state", name, n);
		test_same_bits(what, v[GPU], v[NDEV], (size_t)ns);
	}
	free(w0), free(v0), free(g0);
	for (int d = 0; d <= NDEV; d++)
		free(w[d]), free(v[d]);
}

int main(int argc, char **argv)
{
	int rc = gpu_setup(&argc, &argv, "gpu_clip", 1);
	if (rc != 0)
		return rc;
	workers[GPU] = gpu_cuda_worker;
	workers[CPU] = gpu_cpu_worker;
	test_rng_seed(11);
	const long lens[] = {1, 7, 256, 32768, 32769, 100003, 1 << 20};
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
		check_sumsq(lens[i]);
	check_coef();
	const dnn_optim_args base = {.lr = 1e-3f, .momentum = 0.9f, .weight_decay = 5e-4f, .scale = 1.0f / 256,
				     .layerwise = 1, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .trust = 0.001f};
	const dnn_optimizer opts[] = {DNN_OPT_SGD, DNN_OPT_ADAMW, DNN_OPT_LARS, DNN_OPT_LAMB};
	for (int o = 0; o < 4; o++) {
		dnn_optim_args a = base;
		a.optimizer = (int)opts[o];
		for (int k = 0; k < 2; k++) {
			check_update(dnn_optimizer_name(opts[o]), a, 1000, k ? 1.0f : 0.31f);
			check_update(dnn_optimizer_name(opts[o]), a, 100003, k ? 1.0f : 0.31f);
		}
	}
	test_starpu_shutdown();
	return test_report("gpu_clip");
}
