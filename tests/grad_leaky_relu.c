/* grad_leaky_relu — leaky_relu's backward, run as StarPU tasks (forward, then backward from the
 * forward's output), against central finite differences in double precision.
 *
 * L = sum(leaky_relu(x) .* r) with a random r has dL/dy = r, so the backward task fed with
 * dy = r must return dL/dx, estimated by (L(x + eps) - L(x - eps)) / 2eps per element with the
 * double-precision forward. x is kept at least 0.05 away from the kink at 0 and |r| at least
 * 0.05, so the quotient is exact but for its rounding (~1e-11, relative ~1e-8 at worst).
 * Checked for alpha 0.01, 0.2 and 1, overwriting (a NaN-filled dx) and accumulating (+= onto
 * random values), every element within 1e-6 relative (to |dL/dx|, or for += to the sum of the
 * two terms' sizes; the float backward rounds once or twice: 1.2e-7). */
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>

#include "leaky_relu.h"
#include "test_util.h"

#define EPS 1e-3 /* < the 0.05 distance to the kink: the quotient is exact but for rounding */
#define REL 1e-6

static double loss(const double *x, const double *r, long n, double alpha)
{
	double L = 0;
	for (long i = 0; i < n; i++)
		L += (x[i] > 0 ? x[i] : alpha * x[i]) * r[i];
	return L;
}

/* Worst |got - want| / scale over n (scale: |want|, or for a sum the sum of its terms' sizes, as
 * a float sum is rounded relative to them); 1 when within REL. */
static int within(const char *what, const float *got, const double *want, const double *scale, long n)
{
	double worst = 0;
	long at = 0;
	for (long i = 0; i < n; i++) {
		const double rel = fabs((double)got[i] - want[i]) / fmax(scale[i], 1e-30);
		if (!(rel <= worst))
			worst = rel, at = i;
	}
	printf("%-36s max relative error %.3g\n", what, worst);
	if (!(worst <= REL))
		fprintf(stderr, "%s: element %ld is %.9g, want %.9g\n", what, at, got[at], want[at]);
	return worst <= REL;
}

static void check(long n, float alpha)
{
	float *x = alloc_f(n), *y = alloc_f(n), *r = alloc_f(n), *dx0 = alloc_f(n), *dx1 = alloc_f(n);
	test_fill_uniform(x, n, -1, 1);
	for (long i = 0; i < n; i++) /* keep away from the kink at 0 */
		if (fabsf(x[i]) < 0.05f)
			x[i] = x[i] < 0 ? -0.05f : 0.05f;
	test_fill_uniform(r, n, -1, 1);
	for (long i = 0; i < n; i++) /* |dL/dx| >= 0.05 alpha: the quotient's rounding (~1e-11) stays small */
		if (fabsf(r[i]) < 0.05f)
			r[i] = r[i] < 0 ? -0.05f : 0.05f;
	fill_nan(y, n);
	fill_nan(dx0, n);
	test_fill_uniform(dx1, n, -1, 1);
	double *xd = to_double(x, n), *rd = to_double(r, n), *g = alloc_d(n), *want1 = to_double(dx1, n);
	double *scale0 = alloc_d(n), *scale1 = alloc_d(n);
	for (long i = 0; i < n; i++) {
		const double keep = xd[i];
		xd[i] = keep + EPS;
		const double lp = loss(xd, rd, n, alpha);
		xd[i] = keep - EPS;
		const double lm = loss(xd, rd, n, alpha);
		xd[i] = keep;
		g[i] = (lp - lm) / (2 * EPS);
		scale0[i] = fabs(g[i]), scale1[i] = fabs(want1[i]) + fabs(g[i]);
		want1[i] += g[i];
	}
	starpu_data_handle_t hx = reg_f(x, n), hy = reg_f(y, n), hr = reg_f(r, n), hdx0 = reg_f(dx0, n),
			     hdx1 = reg_f(dx1, n);
	dnn_leaky_relu_args a = {.n = n, .alpha = alpha, .accumulate_dx = 0};
	TEST_CHECK(dnn_insert_leaky_relu_fwd(NULL, &a, hx, hy) == 0, "insert fwd");
	TEST_CHECK(dnn_insert_leaky_relu_bwd(NULL, &a, hy, hr, hdx0) == 0, "insert bwd");
	a.accumulate_dx = 1;
	TEST_CHECK(dnn_insert_leaky_relu_bwd(NULL, &a, hy, hr, hdx1) == 0, "insert bwd +=");
	starpu_data_handle_t all[] = {hx, hy, hr, hdx0, hdx1};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		starpu_data_unregister(all[i]);
	char what[96];
	snprintf(what, sizeof(what), "leaky_relu n=%ld alpha=%g dx", n, alpha);
	TEST_CHECK(within(what, dx0, g, scale0, n), "%s", what);
	snprintf(what, sizeof(what), "leaky_relu n=%ld alpha=%g dx +=", n, alpha);
	TEST_CHECK(within(what, dx1, want1, scale1, n), "%s", what);
	free(x), free(y), free(r), free(dx0), free(dx1), free(xd), free(rd), free(g), free(want1), free(scale0), free(scale1);
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	test_rng_seed(1234);
	const long lens[] = {1, 17, 1000};
	const float alphas[] = {0.01f, 0.2f, 1.0f};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (size_t k = 0; k < sizeof(alphas) / sizeof(alphas[0]); k++)
			check(lens[i], alphas[k]);
	test_starpu_shutdown();
	return test_report("grad_leaky_relu");
}
