/* gpu_optim — the LARS, AdamW and LAMB updates of the update codelet (codelets/optim.cu) on a CUDA
 * worker against the CPU worker (whose kernel unit_optim checks against the double reference of
 * each published formula), from the same inputs, three steps each with keep_grad off and on and
 * with write_delta: LARS on a weight (trust ratio: the two norms reduced on the device in a fixed
 * order) and on a bias (none), AdamW (state m then v, 2n floats; bias correction per step), LAMB
 * on a weight (trust ratio ||w||/||u||: the norms reduced on the device in a fixed order, as
 * LARS's) and on a bias (none).
 * Tolerance 1e-5 relative to max(1, |x|): float kernels, but the CUDA compiler contracts a*b+c into
 * FMAs and LARS's norms are summed in another order (a double sum, so the rate differs by ~1e-16
 * relative), so the two sides differ by a few float roundings per step. Skipped (77) without a
 * CUDA or a CPU worker. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"
#include "optim.h"
#include "test_util.h"

enum { GPU = 0, CPU = 1, NDEV = 2, STEPS = 3 };
static int workers[NDEV];

static void test_opt(const char *name, dnn_optim_args a, long n)
{
	a.n = n, a.write_delta = 1;
	const long ns = n * dnn_optimizer_state_mult((dnn_optimizer)a.optimizer);
	float *w0 = alloc_f(n), *v0 = alloc_f(ns), *g0 = alloc_f(n);
	test_fill_uniform(w0, n, -1, 1);
	test_fill_uniform(v0, ns, 0, 0.01f); /* AdamW's v must be >= 0; a small momentum for the others */
	test_fill_uniform(g0, n, -30, 30);
	float *w[NDEV], *v[NDEV], *g[NDEV], *dl[NDEV];
	for (int d = 0; d < NDEV; d++) {
		w[d] = gpu_copy_f(w0, n), v[d] = gpu_copy_f(v0, ns), g[d] = gpu_copy_f(g0, n), dl[d] = alloc_f(n);
		fill_nan(dl[d], n);
		starpu_data_handle_t hw = reg_f(w[d], n), hv = reg_f(v[d], ns), hg = reg_f(g[d], n), hd = reg_f(dl[d], n);
		struct starpu_data_descr desc[] = {
			{hw, STARPU_RW}, {hv, STARPU_RW}, {hg, a.keep_grad ? STARPU_R : STARPU_RW}, {hd, STARPU_W}};
		for (long t = 1; t <= STEPS; t++) {
			dnn_optim_args s = a;
			s.bc1 = (float)(1 - pow((double)a.beta1, (double)t)), s.bc2 = (float)(1 - pow((double)a.beta2, (double)t));
			gpu_task(&cl_optim_update, workers[d], &s, sizeof s, desc, 4, "optim_update");
		}
		starpu_data_unregister(hw), starpu_data_unregister(hv), starpu_data_unregister(hg), starpu_data_unregister(hd);
	}
	char what[160];
	snprintf(what, sizeof what, "%s n=%ld keep_grad=%d: w", name, n, a.keep_grad);
	gpu_close_scaled(what, w[GPU], w[CPU], (size_t)n, 1e-5);
	snprintf(what, sizeof what, "%s n=%ld keep_grad=%d: state", name, n, a.keep_grad);
	gpu_close_scaled(what, v[GPU], v[CPU], (size_t)ns, 1e-5);
	snprintf(what, sizeof what, "%s n=%ld keep_grad=%d: delta", name, n, a.keep_grad);
	gpu_close_scaled(what, dl[GPU], dl[CPU], (size_t)n, 1e-5);
	snprintf(what, sizeof what, "%s n=%ld keep_grad=%d: grad (kept, or zeroed)", name, n, a.keep_grad);
	test_close_mixed_f(what, g[GPU], g[CPU], (size_t)n, 0);
	double moved = 0;
	for (long i = 0; i < n; i++)
		moved = fmax(moved, fabs((double)w[GPU][i] - w0[i]));
	TEST_CHECK(moved > 0, "%s n=%ld: the update did not move w", name, n);
	free(w0), free(v0), free(g0);
	for (int d = 0; d < NDEV; d++)
		free(w[d]), free(v[d]), free(g[d]), free(dl[d]);
}

int main(int argc, char **argv)
{
	int rc = gpu_setup(&argc, &argv, "gpu_optim", 1);
	if (rc != 0)
		return rc;
	workers[GPU] = gpu_cuda_worker;
	workers[CPU] = gpu_cpu_worker;
	test_rng_seed(5);
	const dnn_optim_args lars_w = {.lr = 2.0f, .momentum = 0.9f, .weight_decay = 5e-4f, .scale = 1.0f / 256,
				     .optimizer = DNN_OPT_LARS, .layerwise = 1, .trust = 0.001f};
	dnn_optim_args lars_b = lars_w;
	lars_b.layerwise = 0, lars_b.weight_decay = 0, lars_b.lr = 0.1f;
	const dnn_optim_args adamw = {.lr = 1e-3f, .weight_decay = 0.01f, .scale = 1.0f / 256, .optimizer = DNN_OPT_ADAMW,
				    .layerwise = 1, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
	dnn_optim_args lamb_w = adamw;
	lamb_w.optimizer = DNN_OPT_LAMB, lamb_w.lr = 5e-3f;
	dnn_optim_args lamb_b = lamb_w;
	lamb_b.layerwise = 0, lamb_b.weight_decay = 0;
	const long lens[] = {1, 7, 1000, 100003, 1 << 20};
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
		for (int kg = 0; kg < 2; kg++) {
			dnn_optim_args a;
			a = lars_w, a.keep_grad = kg, test_opt("lars weight", a, lens[i]);
			a = lars_b, a.keep_grad = kg, test_opt("lars bias", a, lens[i]);
			a = adamw, a.keep_grad = kg, test_opt("adamw", a, lens[i]);
			a = lamb_w, a.keep_grad = kg, test_opt("lamb weight", a, lens[i]);
			a = lamb_b, a.keep_grad = kg, test_opt("lamb bias", a, lens[i]);
		}
	test_starpu_shutdown();
	return test_report("gpu_optim");
}
