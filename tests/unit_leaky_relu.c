/* unit_leaky_relu — the leaky_relu kernels (codelets/leaky_relu.h), run as StarPU tasks through
 * the insert helpers, against a double-precision reference:
 *  - forward y = x (x > 0), alpha x (x <= 0) for alpha 0, 0.01, 0.3 and 1, with exact zeros in x
 *    and a NaN-filled y (an element left unwritten shows); every element within 2^-23 relative
 *    of the reference (one float multiply);
 *  - alpha = 0 is relu (codelets/relu.h), every value equal (0 * x is -0 where relu writes +0),
 *    and alpha = 1 is the identity bit for bit;
 *  - backward dx = dy (y > 0), alpha dy (y <= 0), overwriting (a NaN-filled dx) and accumulating
 *    (+= onto random values), within 2^-23 relative. */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leaky_relu.h"
#include "relu.h"
#include "test_util.h"

#define REL 1.2e-7 /* 2^-23: one rounding of a product and of a sum */

/* Worst |got - ref| / |ref| over n (exact where ref is 0); 1 when within REL. */
static int within(const char *what, const float *got, const double *ref, long n)
{
	double worst = 0;
	long at = -1;
	for (long i = 0; i < n; i++) {
		const double d = fabs((double)got[i] - ref[i]);
		const double rel = ref[i] == 0.0 ? (d == 0.0 ? 0.0 : INFINITY) : d / fabs(ref[i]);
		if (!(rel <= worst)) /* NaN counts as the worst */
			worst = rel, at = i;
	}
	const int ok = worst <= REL;
	if (!ok)
		fprintf(stderr, "%s: element %ld is %.9g, want %.9g (relative error %.3g > %.3g)\n", what, at, got[at], ref[at],
			worst, REL);
	return ok;
}

static void forward(const float *x, float *y, long n, float alpha)
{
	dnn_leaky_relu_args a = {.n = n, .alpha = alpha};
	starpu_data_handle_t hx = reg_f((float *)x, n), hy = reg_f(y, n);
	TEST_CHECK(dnn_insert_leaky_relu_fwd(NULL, &a, hx, hy) == 0, "leaky_relu_fwd insert");
	starpu_data_unregister(hx);
	starpu_data_unregister(hy);
}

static void backward(const float *y, const float *dy, float *dx, long n, float alpha, int acc)
{
	dnn_leaky_relu_args a = {.n = n, .alpha = alpha, .accumulate_dx = acc};
	starpu_data_handle_t hy = reg_f((float *)y, n), hdy = reg_f((float *)dy, n), hdx = reg_f(dx, n);
	TEST_CHECK(dnn_insert_leaky_relu_bwd(NULL, &a, hy, hdy, hdx) == 0, "leaky_relu_bwd insert");
	starpu_data_unregister(hy);
	starpu_data_unregister(hdy);
	starpu_data_unregister(hdx);
}

static void check(long n, float alpha)
{
	float *x = alloc_f(n), *y = alloc_f(n), *dy = alloc_f(n), *dx = alloc_f(n), *dx0 = alloc_f(n);
	double *ref = alloc_d(n);
	test_fill_uniform(x, n, -2, 2);
	for (long i = 0; i < n; i += 7)
		x[i] = 0.0f;
	test_fill_uniform(dy, n, -1, 1);
	test_fill_uniform(dx0, n, -1, 1);
	char what[96];

	fill_nan(y, n);
	forward(x, y, n, alpha);
	for (long i = 0; i < n; i++)
		ref[i] = x[i] > 0 ? (double)x[i] : (double)alpha * x[i];
	snprintf(what, sizeof(what), "leaky_relu fwd n=%ld alpha=%g", n, alpha);
	TEST_CHECK(within(what, y, ref, n), "%s", what);

	fill_nan(dx, n);
	backward(y, dy, dx, n, alpha, 0);
	for (long i = 0; i < n; i++)
		ref[i] = x[i] > 0 ? (double)dy[i] : (double)alpha * dy[i];
	snprintf(what, sizeof(what), "leaky_relu bwd n=%ld alpha=%g", n, alpha);
	TEST_CHECK(within(what, dx, ref, n), "%s", what);

	memcpy(dx, dx0, sizeof(float) * (size_t)n);
	backward(y, dy, dx, n, alpha, 1);
	for (long i = 0; i < n; i++)
		ref[i] = (double)dx0[i] + (x[i] > 0 ? (double)dy[i] : (double)(alpha * dy[i]));
	snprintf(what, sizeof(what), "leaky_relu bwd += n=%ld alpha=%g", n, alpha);
	TEST_CHECK(within(what, dx, ref, n), "%s", what);

	if (alpha == 0.0f) { /* relu bit for bit, forward and backward */
		float *yr = alloc_f(n), *dxr = alloc_f(n);
		dnn_relu_forward_cpu(yr, x, n);
		dnn_relu_backward_cpu(dxr, yr, dy, n, 0);
		dnn_leaky_relu_backward_cpu(dx, y, dy, n, 0.0f, 0);
		long differ = 0;
		for (long i = 0; i < n; i++) /* == as values: 0 * x is -0 where relu writes +0 */
			differ += yr[i] != y[i] || dxr[i] != dx[i];
		TEST_CHECK(differ == 0, "alpha=0: %ld elements differ from relu's forward or backward (n=%ld)", differ, n);
		free(yr), free(dxr);
	}
	if (alpha == 1.0f) /* the identity */
		TEST_CHECK(memcmp(x, y, sizeof(float) * (size_t)n) == 0, "alpha=1 is not the identity (n=%ld)", n);
	printf("n=%-6ld alpha=%-4g forward, backward =, backward +=: ok\n", n, alpha);
	free(x), free(y), free(dy), free(dx), free(dx0), free(ref);
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	test_rng_seed(31);
	const long lens[] = {1, 7, 1001, 100003};
	const float alphas[] = {0.0f, 0.01f, 0.3f, 1.0f};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (size_t k = 0; k < sizeof(alphas) / sizeof(alphas[0]); k++)
			check(lens[i], alphas[k]);
	test_starpu_shutdown();
	return test_report("unit_leaky_relu");
}
