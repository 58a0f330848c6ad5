/* unit_attention_kernel — the attention CPU kernels (codelets/attention.c) called directly, no
 * StarPU: forward (y and the log-sum-exp) and backward (dq, dk, dv; overwrite and accumulate)
 * against a plain double-precision softmax attention, with the AVX2 and the portable row loops,
 * at shapes that end inside and across tiles; and a long sequence (T = 2048, D = 64) run with
 * exactly dnn_attention_scratch_floats(T, D) floats of scratch, which must be far below T x T
 * (it is linear in T), checked against the reference at a few rows; a NaN or an infinity in the
 * input reaches the outputs it should. The descriptor's tests (finite differences,
 * chunks) are the attention row of tests/op_cases.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "test_util.h"

/* Reference forward of one (sample, head) query row t: y[t] (D) and lse[t]; p (t+1) scratch. */
static void ref_row(double *yr, double *lse, double *p, const float *qkv, int T, int C, int H, int n, int h, int t)
{
	const int D = C / H, L = 3 * C;
	const double scale = 1.0 / sqrt((double)D);
	const float *base = qkv + (size_t)n * T * L + (size_t)h * D;
	const float *q = base + (size_t)t * L;
	double mx = -INFINITY;
	for (int s = 0; s <= t; s++) {
		const float *k = base + (size_t)s * L + C;
		double acc = 0.0;
		for (int d = 0; d < D; d++)
			acc += (double)q[d] * k[d];
		p[s] = acc * scale;
		mx = p[s] > mx ? p[s] : mx;
	}
	double sum = 0.0;
	for (int s = 0; s <= t; s++)
		sum += (p[s] = exp(p[s] - mx));
	for (int d = 0; d < D; d++)
		yr[d] = 0.0;
	for (int s = 0; s <= t; s++) {
		const float *v = base + (size_t)s * L + 2 * C;
		p[s] /= sum;
		for (int d = 0; d < D; d++)
			yr[d] += p[s] * v[d];
	}
	*lse = mx + log(sum);
}

/* Reference forward: y (N,T,C), lse (N,H,T). */
static void ref_fwd(double *y, double *lse, const float *qkv, int N, int T, int C, int H)
{
	const int D = C / H;
	double *p = alloc_d((size_t)T);
	for (int n = 0; n < N; n++)
		for (int h = 0; h < H; h++)
			for (int t = 0; t < T; t++)
				ref_row(y + ((size_t)n * T + t) * C + (size_t)h * D, lse + ((size_t)n * H + h) * T + t, p, qkv,
					T, C, H, n, h, t);
	free(p);
}

/* Reference backward (the analytic gradient in double): dqkv (N,T,3C) = d(sum y .* dy)/dqkv. */
static void ref_bwd(double *dqkv, const float *qkv, const float *dy, int N, int T, int C, int H)
{
	const int D = C / H, L = 3 * C;
	const double scale = 1.0 / sqrt((double)D);
	double *p = alloc_d((size_t)T), *dp = alloc_d((size_t)T), *yr = alloc_d((size_t)D), lse;
	memset(dqkv, 0, (size_t)N * T * L * sizeof(double));
	for (int n = 0; n < N; n++)
		for (int h = 0; h < H; h++)
			for (int t = 0; t < T; t++) {
				ref_row(yr, &lse, p, qkv, T, C, H, n, h, t);
				const size_t o = (size_t)n * T * L + (size_t)h * D;
				const float *q = qkv + o + (size_t)t * L, *g = dy + ((size_t)n * T + t) * C + (size_t)h * D;
				double dot = 0.0;
				for (int s = 0; s <= t; s++) {
					const float *v = qkv + o + (size_t)s * L + 2 * C;
					dp[s] = 0.0;
					for (int d = 0; d < D; d++) {
						dp[s] += (double)g[d] * v[d];
						dqkv[o + (size_t)s * L + 2 * C + d] += p[s] * g[d];
					}
					dot += p[s] * dp[s];
				}
				for (int s = 0; s <= t; s++) {
					const double ds = p[s] * (dp[s] - dot) * scale;
					const float *k = qkv + o + (size_t)s * L + C;
					for (int d = 0; d < D; d++) {
						dqkv[o + (size_t)t * L + d] += ds * k[d];
						dqkv[o + (size_t)s * L + C + d] += ds * q[d];
					}
				}
			}
	free(p), free(dp), free(yr);
}

/* max |got - ref| / max |ref|: the error relative to the tensor's scale (attention's outputs
 * are averages, its gradients sums of many terms of both signs). */
static int close_scaled(const char *what, const float *got, const double *ref, size_t n, double tol)
{
	double big = 0.0, err = 0.0;
	size_t worst = 0;
	for (size_t i = 0; i < n; i++)
		big = fabs(ref[i]) > big ? fabs(ref[i]) : big;
	for (size_t i = 0; i < n; i++) {
		const double e = fabs((double)got[i] - ref[i]);
		if (!(e <= err)) /* NaN counts */
			err = e, worst = i;
	}
	const double rel = big > 0 ? err / big : err;
	if (!(rel <= tol)) {
		printf("FAIL %s: error %.3g of scale %.3g (tol %.1g) at %zu: %.9g vs %.9g\n", what, rel, big, tol, worst,
		       n ? (double)got[worst] : 0.0, n ? ref[worst] : 0.0);
		return 0;
	}
	return 1;
}

/* One shape: forward and backward (both modes) against the references. */
static int check_shape(int N, int T, int C, int H, int simd)
{
	const size_t nx = (size_t)N * T * 3 * C, ny = (size_t)N * T * C, nl = (size_t)N * H * T;
	const dnn_attention_args a = {.N = N, .T = T, .C = C, .H = H, .save_lse = 1};
	float *qkv = alloc_f(nx), *y = alloc_f(ny), *lse = alloc_f(nl), *dy = alloc_f(ny), *dx = alloc_f(nx);
	float *dx0 = alloc_f(nx), *scratch = alloc_f(dnn_attention_scratch_floats(T, C / H));
	double *ry = alloc_d(ny), *rl = alloc_d(nl), *rdx = alloc_d(nx);
	test_fill_uniform(qkv, nx, -2.0f, 2.0f); /* scores up to ~4 sqrt(D): peaked softmaxes too */
	test_fill_uniform(dy, ny, -1.0f, 1.0f);
	test_fill_uniform(dx0, nx, -1.0f, 1.0f);
	fill_nan(y, ny), fill_nan(lse, nl);
	dnn_attention_forward_cpu(y, lse, qkv, &a, scratch);
	ref_fwd(ry, rl, qkv, N, T, C, H);
	ref_bwd(rdx, qkv, dy, N, T, C, H);
	char what[96];
	int ok = 1;
	snprintf(what, sizeof(what), "N=%d T=%d C=%d H=%d simd=%d y", N, T, C, H, simd);
	ok &= close_scaled(what, y, ry, ny, 2e-6);
	snprintf(what, sizeof(what), "N=%d T=%d C=%d H=%d simd=%d lse", N, T, C, H, simd);
	ok &= test_close_mixed(what, lse, rl, nl, 2e-6);
	fill_nan(dx, nx);
	dnn_attention_backward_cpu(dx, qkv, y, dy, lse, &a, scratch);
	snprintf(what, sizeof(what), "N=%d T=%d C=%d H=%d simd=%d dqkv", N, T, C, H, simd);
	ok &= close_scaled(what, dx, rdx, nx, 2e-5);
	/* accumulate: dx0 + the gradient */
	memcpy(dx, dx0, nx * sizeof(float));
	dnn_attention_args acc = a;
	acc.accumulate_dx = 1;
	dnn_attention_backward_cpu(dx, qkv, y, dy, lse, &acc, scratch);
	for (size_t i = 0; i < nx; i++)
		rdx[i] += dx0[i];
	snprintf(what, sizeof(what), "N=%d T=%d C=%d H=%d simd=%d dqkv+=", N, T, C, H, simd);
	ok &= close_scaled(what, dx, rdx, nx, 2e-5);
	/* eval forward: no lse, the same y bit for bit */
	float *y2 = alloc_f(ny);
	fill_nan(y2, ny);
	dnn_attention_forward_cpu(y2, NULL, qkv, &a, scratch);
	snprintf(what, sizeof(what), "N=%d T=%d C=%d H=%d simd=%d y without lse", N, T, C, H, simd);
	ok &= test_same_bits(what, y2, y, ny);
	free(qkv), free(y), free(lse), free(dy), free(dx), free(dx0), free(scratch), free(y2);
	free(ry), free(rl), free(rdx);
	return ok;
}

/* T = 2048, D = 64, H = 1: the kernels get exactly their scratch, in a block with a NaN canary
 * after it: no T x T matrix (the scratch is below T*T/4 floats, and a T x T one would not fit);
 * y, lse and dv at a few rows against the reference. */
static int check_long(void)
{
	const int T = 2048, C = 64, H = 1;
	const size_t nx = (size_t)T * 3 * C, ny = (size_t)T * C, ns = dnn_attention_scratch_floats(T, C / H);
	int ok = 1;
	if (ns * 4 > (size_t)T * T) {
		printf("FAIL long: scratch of %zu floats is not far below T*T = %zu\n", ns, (size_t)T * T);
		ok = 0;
	}
	/* a scratch-size function that grew with T^2 would be caught at T = 4096 too */
	if (dnn_attention_scratch_floats(2 * T, C / H) > 2 * ns) {
		printf("FAIL long: scratch grows faster than T (%zu at T=%d, %zu at T=%d)\n", ns, T,
		       dnn_attention_scratch_floats(2 * T, C / H), 2 * T);
		ok = 0;
	}
	const dnn_attention_args a = {.N = 1, .T = T, .C = C, .H = H, .save_lse = 1};
	float *qkv = alloc_f(nx), *y = alloc_f(ny), *lse = alloc_f(T), *dy = alloc_f(ny), *dx = alloc_f(nx);
	float *scratch = alloc_f(ns + 16);
	fill_nan(scratch + ns, 16);
	test_fill_uniform(qkv, nx, -2.0f, 2.0f);
	test_fill_uniform(dy, ny, -1.0f, 1.0f);
	dnn_attention_forward_cpu(y, lse, qkv, &a, scratch);
	dnn_attention_backward_cpu(dx, qkv, y, dy, lse, &a, scratch);
	static const int rows[] = {0, 63, 64, 1000, 2047};
	double yr[64], p_lse, *p = alloc_d(T);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const int t = rows[i];
		ref_row(yr, &p_lse, p, qkv, T, C, H, 0, 0, t);
		char what[64];
		snprintf(what, sizeof(what), "long T=%d y row %d", T, t);
		ok &= close_scaled(what, y + (size_t)t * C, yr, C, 2e-6);
		snprintf(what, sizeof(what), "long T=%d lse row %d", T, t);
		ok &= test_close_mixed(what, lse + t, &p_lse, 1, 2e-6);
	}
	/* dv of the last key: only the last query sees it, with P = its softmax weight */
	ref_row(yr, &p_lse, p, qkv, T, C, H, 0, 0, T - 1);
	double dv[64];
	for (int d = 0; d < C; d++)
		dv[d] = p[T - 1] * dy[(size_t)(T - 1) * C + d];
	ok &= close_scaled("long dv of the last key", dx + (size_t)(T - 1) * 3 * C + 2 * C, dv, C, 2e-5);
	for (int i = 0; i < 16; i++)
		if (!isnan(scratch[ns + i])) {
			printf("FAIL long: the kernels wrote past their %zu floats of scratch\n", ns);
			ok = 0;
			break;
		}
	free(qkv), free(y), free(lse), free(dy), free(dx), free(scratch), free(p);
	return ok;
}

/* A NaN in one key reaches the outputs of the queries that see it, and those only (its score is
 * not clamped into a finite exp, which would turn it into a finite weight); an infinite value
 * reaches every later query's: the loss's non-finite check then sees them. (Earlier queries of the same tile get 0 * inf = NaN from the masked product too,
 * as in any masked matrix product, PyTorch's included: finite values are exactly causal,
 * non-finite ones poison their tile.) */
static int check_nonfinite(int simd)
{
	const int N = 1, T = 20, C = 16, H = 2, L = 3 * C;
	const dnn_attention_args a = {.N = N, .T = T, .C = C, .H = H, .save_lse = 1};
	float *qkv = alloc_f((size_t)T * L), *y = alloc_f((size_t)T * C), *lse = alloc_f((size_t)H * T);
	float *scratch = alloc_f(dnn_attention_scratch_floats(T, C / H));
	int ok = 1;
	test_fill_uniform(qkv, (size_t)T * L, -1.0f, 1.0f);
	qkv[(size_t)9 * L + C + 3] = NAN;               /* head 0: token 9's key */
	qkv[(size_t)12 * L + 2 * C + 8] = INFINITY; /* head 1: token 12's value */
	dnn_attention_forward_cpu(y, lse, qkv, &a, scratch);
	for (int t = 0; t < T; t++) {
		const int nan0 = isnan(y[(size_t)t * C]), bad1 = !isfinite(y[(size_t)t * C + 8]);
		if (nan0 != (t >= 9) || (t >= 12 && !bad1)) {
			printf("FAIL simd=%d non-finite: token %d: head 0 %g, head 1 %g\n", simd, t, y[(size_t)t * C],
			       y[(size_t)t * C + 8]);
			ok = 0;
		}
	}
	free(qkv), free(y), free(lse), free(scratch);
	return ok;
}

int main(void)
{
	static const int shapes[][4] = {
		/* N, T, C, H */
		{1, 1, 4, 1},   {2, 5, 8, 2},    {1, 17, 16, 4},  {2, 64, 64, 4},  {1, 65, 32, 2},
		{1, 130, 64, 1}, {2, 130, 64, 4}, {1, 129, 128, 2}, {1, 200, 48, 3},
	};
	int ok = 1;
	test_rng_seed(42);
	for (int simd = 1; simd >= 0; simd--) {
		const int got = dnn_attention_set_simd(simd);
		printf("row loops: %s\n", got ? "AVX2" : "portable");
		for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
			ok &= check_shape(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], got);
		ok &= check_nonfinite(got);
	}
	dnn_attention_set_simd(1);
	ok &= check_long();
	printf("%s\n", ok ? "unit_attention_kernel: OK" : "unit_attention_kernel: FAILED");
	return ok ? 0 : 1;
}
