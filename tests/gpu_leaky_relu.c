/* gpu_leaky_relu — the leaky_relu codelets run once on a CPU worker and once on a CUDA worker
 * (STARPU_EXECUTE_ON_WORKER) from the same inputs, for several sizes and alphas: forward (a
 * NaN-filled y), backward overwriting (a NaN-filled dx) and accumulating (+= onto random
 * values). Every element of both devices' outputs must agree with a double-precision reference
 * within 1e-6 of the size of its terms (a float product and sum, fused or not on the GPU: 1.2e-7
 * each). Skipped (77) without a CUDA worker or a CPU worker (gpu_util.h). */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"
#include "leaky_relu.h"
#include "test_util.h"

#define TOL 1e-6

/* got within TOL * scale[i] of ref[i] everywhere (NaN fails). */
static void check_close(const char *what, const float *got, const double *ref, const double *scale, long n)
{
	double worst = 0;
	long at = 0;
	for (long i = 0; i < n; i++) {
		const double e = fabs((double)got[i] - ref[i]) / fmax(scale[i], 1e-30);
		if (!(e <= worst))
			worst = isnan(e) ? INFINITY : e, at = i;
	}
	TEST_CHECK(worst <= TOL, "%s: error %.3g of the terms' size at [%ld] (%.9g vs %.9g)", what, worst, at,
		   n ? (double)got[at] : 0.0, n ? ref[at] : 0.0);
}

/* One task of cl on `worker` over (a, b, out) with out's mode `om`; out is written in place. */
static void run(struct starpu_codelet *cl, int worker, const dnn_leaky_relu_args *a, const float *in0,
		const float *in1, float *out, long n, enum starpu_data_access_mode om)
{
	struct starpu_data_descr d[3];
	int k = 0;
	d[k].handle = reg_f((float *)in0, n), d[k++].mode = STARPU_R;
	if (in1)
		d[k].handle = reg_f((float *)in1, n), d[k++].mode = STARPU_R;
	d[k].handle = reg_f(out, n), d[k++].mode = om;
	gpu_task(cl, worker, a, sizeof(*a), d, k, cl->name);
	for (int i = 0; i < k; i++)
		starpu_data_unregister(d[i].handle);
}

static void check(long n, float alpha)
{
	float *x = alloc_f(n), *dy = alloc_f(n), *dx0 = alloc_f(n);
	double *ref = alloc_d(n), *scale = alloc_d(n);
	test_fill_uniform(x, n, -2, 2);
	for (long i = 0; i < n; i += 7)
		x[i] = 0.0f;
	test_fill_uniform(dy, n, -1, 1);
	test_fill_uniform(dx0, n, -1, 1);
	const int dev[2] = {gpu_cpu_worker, gpu_cuda_worker};
	const char *dname[2] = {"cpu", "cuda"};
	float *y[2];
	char what[96];
	dnn_leaky_relu_args a = {.n = n, .alpha = alpha};
	for (long i = 0; i < n; i++)
		ref[i] = x[i] > 0 ? (double)x[i] : (double)alpha * x[i], scale[i] = fabs((double)x[i]);
	for (int d = 0; d < 2; d++) {
		y[d] = alloc_f(n);
		fill_nan(y[d], n);
		run(&cl_leaky_relu_fwd, dev[d], &a, x, NULL, y[d], n, STARPU_W);
		snprintf(what, sizeof(what), "%s fwd n=%ld alpha=%g", dname[d], n, alpha);
		check_close(what, y[d], ref, scale, n);
	}
	for (int acc = 0; acc < 2; acc++) {
		a.accumulate_dx = acc;
		for (long i = 0; i < n; i++) {
			const double g = x[i] > 0 ? (double)dy[i] : (double)alpha * dy[i];
			ref[i] = (acc ? (double)dx0[i] : 0.0) + g;
			scale[i] = (acc ? fabs((double)dx0[i]) : 0.0) + fabs(g);
		}
		for (int d = 0; d < 2; d++) {
			float *dx = alloc_f(n);
			if (acc)
				memcpy(dx, dx0, sizeof(float) * (size_t)n);
			else
				fill_nan(dx, n);
			run(&cl_leaky_relu_bwd, dev[d], &a, y[d], dy, dx, n, acc ? STARPU_RW : STARPU_W);
			snprintf(what, sizeof(what), "%s bwd%s n=%ld alpha=%g", dname[d], acc ? " +=" : "", n, alpha);
			check_close(what, dx, ref, scale, n);
			free(dx);
		}
	}
	printf("n=%-6ld alpha=%-4g: cpu and cuda forward, backward =, += match the reference\n", n, alpha);
	free(x), free(dy), free(dx0), free(ref), free(scale), free(y[0]), free(y[1]);
}

int main(int argc, char **argv)
{
	int rc = gpu_setup(&argc, &argv, "gpu_leaky_relu", 1);
	if (rc != 0)
		return rc;
	test_rng_seed(4242);
	const long lens[] = {1, 7, 1001, 100003};
	const float alphas[] = {0.01f, 0.3f};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (size_t k = 0; k < sizeof(alphas) / sizeof(alphas[0]); k++)
			check(lens[i], alphas[k]);
	test_starpu_shutdown();
	return test_report("gpu_leaky_relu");
}
