/* op_bf16.c — the op harness's checks of the bf16 kernels (--precision bf16): dense (and so
 * lm_head, which runs dense's kernels without a bias) and attention, each against its fp32
 * kernel, with a tolerance derived from bf16's 8-bit significand, and a negative control: the
 * same comparison under the fp32 kernel's own tolerance must fail, or the check proves nothing.
 *
 * The bound. A GEMM element c = sum_k a_k b_k of K terms: each operand is rounded to bf16
 * (relative error <= u = 2^-8, round to nearest even), the products of two bf16 values are exact
 * in fp32 and summed in fp32 (relative error of a sum of K terms <= (1 + 2^-24)^K - 1), so
 *     |c_bf16 - c_exact| <= g16(K) S,  g16(K) = (1 + u)^2 (1 + 2^-24)^(K+2) - 1,  S = sum_k |a_k b_k|
 * (K+2: the sum, alpha and beta C). The fp32 kernel is within g32(K) S, g32(K) = (1 + 2^-24)^(K+2)
 * - 1, so the check is |c_bf16 - c_fp32| <= (g16(K) + g32(K)) S, per element: the growth in K is
 * linear, K 2^-24, on top of bf16's 2u (about 0.0078 S). S is the fp32 kernel run on |a| and |b|
 * (and |bias|, |dx0| for the accumulating forms): dense is linear, so that is sum_k |a_k b_k|.
 * Attention: S_ts = scale q_t.k_s is off by at most d_t = g16(D) max_s A_ts, A = scale |q||k|^T,
 * which moves a softmax row's probabilities by at most a factor e^(+-2 d_t); then P (rounded) times
 * v (rounded) adds g16(T) relative, so y_t is within [(e^(2 d_t) - 1)(1 + g16(T)) + g16(T)]
 * max_(s<=t) |v_s| of the fp32 y_t, plus the fp32 kernel's own 1e-5 (the harness's forward
 * tolerance). The backward: per element of dq, dk and dv, the bound carried through each product
 * and dS = P (dP - D_t) (see "The attention backward, per element" below), and a second check
 * against a model of the bf16 arithmetic, tight enough that truncation, an operand left unrounded
 * or a 10% error in dP fail it (the normwise bound used before, 6 (e^(2 d) - 1 + 2 g16(T)) max |g|,
 * let a 10% error in dP pass; attention's bf16 y storage below still uses it, as its own slack).
 * Convolutions: see "conv2d" below (the GEMM bound for im2col and direct, and for Winograd the
 * same bound taken through the transforms).
 * bf16 activation storage (graph/model.h y_bf16): see "storage" below (layernorm's, gelu's and
 * attention's bf16 outputs, dense's bf16 input, attention's backward reading its bf16 output). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "add.h"
#include "attention.h"
#include "batchnorm.h"
#include "batchnorm_simd.h"
#include "conv2d.h"
#include "conv2d_winograd.h"
#include "conv2d_impl.h"
#include "dense.h"
#include "gelu.h"
#include "gemm_bf16.h"
#include "layernorm.h"
#include "op_harness.h"
#include "relu.h"
#include "test_util.h"

static double g16(int K) { return pow(1.0 + ldexp(1.0, -8), 2) * pow(1.0 + ldexp(1.0, -24), K + 2) - 1.0; }
static double g32(int K) { return pow(1.0 + ldexp(1.0, -24), K + 2) - 1.0; }

static float *fill(size_t n, float lo, float hi)
{
	float *x = malloc(n * sizeof(float));
	if (x)
		test_fill_uniform(x, n, lo, hi);
	return x;
}

static void fabs_copy(float *d, const float *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		d[i] = fabsf(s[i]);
}

/* bf16 against fp32 under the bound (tol, per element of scale), and the negative control under
 * the fp32 tolerance (tol32): the first must hold, the second must fail. */
static void check_pair(const char *what, const float *b16, const float *f32, const float *scale, double tol,
		       double tol32, double floor, size_t n)
{
	const size_t bad = test_count_outside(what, b16, f32, scale, tol, floor, n, 1);
	TEST_CHECK(bad == 0, "%s: bf16 against fp32 outside (g16 + g32) S", what);
	const size_t ctl = test_count_outside(what, b16, f32, scale, tol32, 0.0, n, 0);
	TEST_CHECK(ctl > 0, "%s: negative control: bf16 passed the fp32 tolerance (%.3g S), so the bound tests nothing",
		   what, tol32);
}

static void dense_case(int N, int IN, int OUT, int accumulate)
{
	char what[96];
	const size_t nx = (size_t)N * IN, nw = (size_t)OUT * IN, ny = (size_t)N * OUT;
	float *x = fill(nx, -1, 1), *w = fill(nw, -1, 1), *b = fill(OUT, -1, 1), *dy = fill(ny, -1, 1);
	float *dx0 = fill(nx, -1, 1), *dw0 = fill(nw, -1, 1), *db0 = fill(OUT, -1, 1);
	float *y16 = malloc(ny * 4), *y32 = malloc(ny * 4), *ys = malloc(ny * 4);
	float *dx16 = malloc(nx * 4), *dx32 = malloc(nx * 4), *dxs = malloc(nx * 4);
	float *dw16 = malloc(nw * 4), *dw32 = malloc(nw * 4), *dws = malloc(nw * 4);
	float *db16 = malloc(OUT * 4), *db32 = malloc(OUT * 4);
	float *ax = malloc(nx * 4), *aw = malloc(nw * 4), *ab = malloc(OUT * 4), *ady = malloc(ny * 4);
	if (!x || !w || !b || !dy || !dx0 || !dw0 || !db0 || !y16 || !y32 || !ys || !dx16 || !dx32 || !dxs || !dw16 ||
	    !dw32 || !dws || !db16 || !db32 || !ax || !aw || !ab || !ady) {
		TEST_CHECK(0, "dense bf16: out of memory");
		goto out;
	}
	fabs_copy(ax, x, nx), fabs_copy(aw, w, nw), fabs_copy(ab, b, OUT), fabs_copy(ady, dy, ny);
	dnn_dense_args a32 = {.N = N, .IN = IN, .OUT = OUT, .accumulate_dx = accumulate}, a16 = a32;
	a16.bf16 = 1;
	/* forward: y = b + x w^T, K = IN */
	TEST_CHECK(dnn_dense_forward_cpu(y16, x, w, b, &a16) == 0, "dense bf16 forward failed");
	dnn_dense_forward_cpu(y32, x, w, b, &a32);
	dnn_dense_forward_cpu(ys, ax, aw, ab, &a32);
	snprintf(what, sizeof(what), "dense bf16 fwd N=%d IN=%d OUT=%d", N, IN, OUT);
	check_pair(what, y16, y32, ys, g16(IN) + g32(IN), 2 * g32(IN), 0, ny);
	/* backward data: dx (=|+=) dy w, K = OUT; the scale adds |dx0| when accumulating */
	for (size_t i = 0; i < nx; i++)
		dx16[i] = dx32[i] = accumulate ? dx0[i] : NAN, dxs[i] = accumulate ? fabsf(dx0[i]) : NAN;
	TEST_CHECK(dnn_dense_backward_data_cpu(dx16, dy, w, &a16) == 0, "dense bf16 backward data failed");
	dnn_dense_backward_data_cpu(dx32, dy, w, &a32);
	dnn_dense_backward_data_cpu(dxs, ady, aw, &a32);
	snprintf(what, sizeof(what), "dense bf16 bwd data%s N=%d IN=%d OUT=%d", accumulate ? " +=" : "", N, IN, OUT);
	check_pair(what, dx16, dx32, dxs, g16(OUT) + g32(OUT), 2 * g32(OUT), 0, nx);
	/* backward weight: dw += dy^T x, K = N; db's sums are fp32 in both: the same bits */
	memcpy(dw16, dw0, nw * 4), memcpy(dw32, dw0, nw * 4), memcpy(db16, db0, OUT * 4), memcpy(db32, db0, OUT * 4);
	fabs_copy(dws, dw0, nw);
	TEST_CHECK(dnn_dense_backward_weight_cpu(dw16, db16, x, dy, &a16) == 0, "dense bf16 backward weight failed");
	dnn_dense_backward_weight_cpu(dw32, db32, x, dy, &a32);
	dnn_dense_backward_weight_cpu(dws, NULL, ax, ady, &a32);
	snprintf(what, sizeof(what), "dense bf16 bwd weight N=%d IN=%d OUT=%d", N, IN, OUT);
	check_pair(what, dw16, dw32, dws, g16(N) + g32(N), 2 * g32(N), 0, nw);
	TEST_CHECK(test_same_bits("dense bf16 db (fp32 sums)", db16, db32, OUT), "dense bf16: db differs from fp32's");
	/* the same call twice: the same bits (a fixed order of every sum) */
	TEST_CHECK(dnn_dense_forward_cpu(ys, x, w, b, &a16) == 0 && test_same_bits("dense bf16 rerun", ys, y16, ny),
		   "dense bf16: a second run gave other bits");
out:
	free(x), free(w), free(b), free(dy), free(dx0), free(dw0), free(db0), free(y16), free(y32), free(ys);
	free(dx16), free(dx32), free(dxs), free(dw16), free(dw32), free(dws), free(db16), free(db32);
	free(ax), free(aw), free(ab), free(ady);
}

/* Runs the bf16 checks under both GEMM paths that run here: oneDNN (when built with it) and the
 * portable rounding + sgemm path, which must meet the same bound. */
static void each_path(void (*fn)(void))
{
	const int had = dnn_gemm_bf16_set_simd(1);
	for (int simd = had; simd >= 0; simd--) {
		dnn_gemm_bf16_set_simd(simd);
		printf("  bf16 path: %s\n", simd ? "onednn" : "round+sgemm");
		fn();
	}
	dnn_gemm_bf16_set_simd(1);
}

/* dnn_gemm_bf16_ex: an operand rounded beforehand (dnn_bf16_convert, packed) and read in place gives
 * the same bits as dnn_gemm_bf16 rounding it per call, and a bias added by the matmul the same bits
 * as C = bias then beta = 1 (the two forms dense and attention used before). Exactness is the claim,
 * so the comparison is bit for bit; its negative control: one element of the bf16 operand moved by
 * one bf16 step must change the result. The fp32 operands sit at a stride wider than their rows. */
static void gemm_ex_case(int M, int N, int K, int tA, int tB)
{
	const int ra = tA ? K : M, ca = tA ? M : K, rb = tB ? N : K, cb = tB ? K : N; /* stored shapes */
	const int lda = ca + 3, ldb = cb + 5, ldc = N + 2;
	const size_t nc = (size_t)M * ldc;
	float *A = fill((size_t)ra * lda, -1, 1), *B = fill((size_t)rb * ldb, -1, 1), *bias = fill(N, -1, 1);
	float *c0 = malloc(nc * 4), *c1 = malloc(nc * 4);
	uint16_t *ah = malloc((size_t)ra * ca * 2), *bh = malloc((size_t)rb * cb * 2);
	char what[112];
	if (!A || !B || !bias || !c0 || !c1 || !ah || !bh) {
		TEST_CHECK(0, "gemm_bf16_ex: out of memory");
		goto out;
	}
	for (int r = 0; r < ra; r++)
		dnn_bf16_convert(ah + (size_t)r * ca, A + (size_t)r * lda, (size_t)ca);
	for (int r = 0; r < rb; r++)
		dnn_bf16_convert(bh + (size_t)r * cb, B + (size_t)r * ldb, (size_t)cb);
	const dnn_bf16_operand af = {.f = A, .ld = lda}, bf = {.f = B, .ld = ldb}, ahp = {.h = ah, .ld = ca},
			       bhp = {.h = bh, .ld = cb};
	const dnn_bf16_operand as[3] = {ahp, af, ahp}, bs[3] = {bf, bhp, bhp};
	test_fill_uniform(c0, nc, -1, 1);
	memcpy(c1, c0, nc * 4);
	TEST_CHECK(dnn_gemm_bf16(tA, tB, M, N, K, 0.5f, A, lda, B, ldb, 1.0f, c0, ldc) == 0, "dnn_gemm_bf16 failed");
	for (int v = 0; v < 3; v++) {
		float *c = malloc(nc * 4);
		if (!c) {
			TEST_CHECK(0, "gemm_bf16_ex: out of memory");
			break;
		}
		memcpy(c, c1, nc * 4);
		snprintf(what, sizeof(what), "gemm_bf16_ex %s bf16 in place, %dx%dx%d tA=%d tB=%d",
			 v == 0 ? "A" : v == 1 ? "B" : "A and B", M, N, K, tA, tB);
		TEST_CHECK(dnn_gemm_bf16_ex(tA, tB, M, N, K, 0.5f, as[v], bs[v], 1.0f, NULL, c, ldc) == 0 &&
				   test_same_bits(what, c, c0, nc),
			   "%s: other bits than rounding per call", what);
		free(c);
	}
	/* negative control: one bf16 step more in A's first element changes some element of C */
	ah[0]++;
	memcpy(c1, c0, nc * 4);
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++)
			c1[(size_t)i * ldc + j] = 0.0f;
	float *cz = malloc(nc * 4);
	if (cz) {
		memcpy(cz, c1, nc * 4);
		dnn_gemm_bf16_ex(tA, tB, M, N, K, 1.0f, af, bf, 0.0f, NULL, cz, ldc);
		dnn_gemm_bf16_ex(tA, tB, M, N, K, 1.0f, ahp, bf, 0.0f, NULL, c1, ldc);
		TEST_CHECK(memcmp(cz, c1, nc * 4) != 0,
			   "gemm_bf16_ex: negative control: a changed bf16 operand gave the same bits, so the "
			   "same-bits check tests nothing");
		free(cz);
	}
	ah[0]--;
	/* the bias: C = bias, beta = 1 (dense's former forward) against the matmul's bias, beta = 0 */
	for (int i = 0; i < M; i++)
		memcpy(c0 + (size_t)i * ldc, bias, (size_t)N * 4);
	TEST_CHECK(dnn_gemm_bf16(tA, tB, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, c0, ldc) == 0, "dnn_gemm_bf16 failed");
	test_fill_uniform(c1, nc, -1, 1);
	for (int i = 0; i < M; i++) /* the padding of each row is not written: the same on both */
		memcpy(c1 + (size_t)i * ldc + N, c0 + (size_t)i * ldc + N, (size_t)(ldc - N) * 4);
	snprintf(what, sizeof(what), "gemm_bf16_ex bias %dx%dx%d tA=%d tB=%d", M, N, K, tA, tB);
	TEST_CHECK(dnn_gemm_bf16_ex(tA, tB, M, N, K, 1.0f, af, bhp, 0.0f, bias, c1, ldc) == 0 &&
			   test_same_bits(what, c1, c0, nc),
		   "%s: other bits than C = bias, beta = 1", what);
	/* A's column sums in the rounding pass: the bits of the plain loop over its stored rows, and C's
	 * bits unchanged by them */
	float *cs = calloc((size_t)ca, 4), *cs0 = calloc((size_t)ca, 4), *cc = malloc(nc * 4);
	if (cs && cs0 && cc) {
		for (int r = 0; r < ra; r++)
			for (int c = 0; c < ca; c++)
				cs0[c] += A[(size_t)r * lda + c];
		memcpy(cc, c0, nc * 4), memcpy(c1, c0, nc * 4);
		const dnn_bf16_operand afs = {.f = A, .ld = lda, .colsum = cs};
		snprintf(what, sizeof(what), "gemm_bf16_ex column sums %dx%dx%d tA=%d tB=%d", M, N, K, tA, tB);
		TEST_CHECK(dnn_gemm_bf16_ex(tA, tB, M, N, K, 1.0f, afs, bf, 1.0f, NULL, cc, ldc) == 0 &&
				   dnn_gemm_bf16_ex(tA, tB, M, N, K, 1.0f, af, bf, 1.0f, NULL, c1, ldc) == 0 &&
				   test_same_bits(what, cs, cs0, (size_t)ca) && test_same_bits(what, cc, c1, nc),
			   "%s: other bits than the plain loop, or C changed", what);
	} else {
		TEST_CHECK(0, "gemm_bf16_ex: out of memory");
	}
	free(cs), free(cs0), free(cc);
	/* bad calls: both forms of an operand, a bias with beta != 0, column sums of a bf16 operand */
	const dnn_bf16_operand both = {.f = A, .h = ah, .ld = lda}, hsum = {.h = ah, .ld = ca, .colsum = bias};
	TEST_CHECK(dnn_gemm_bf16_ex(tA, tB, M, N, K, 1.0f, both, bf, 0.0f, NULL, c1, ldc) == -1 &&
			   dnn_gemm_bf16_ex(tA, tB, M, N, K, 1.0f, af, bf, 1.0f, bias, c1, ldc) == -1 &&
			   dnn_gemm_bf16_ex(tA, tB, M, N, K, 1.0f, hsum, bf, 0.0f, NULL, c1, ldc) == -1,
		   "gemm_bf16_ex: a bad call was not refused");
	printf("  gemm_bf16_ex %dx%dx%d tA=%d tB=%d: in-place bf16 operands, the bias and the column sums give "
	       "the same bits\n",
	       M, N, K, tA, tB);
out:
	free(A), free(B), free(bias), free(c0), free(c1), free(ah), free(bh);
}

/* dnn_gemm_bf16_pairs (attention's tile products on packed pairs): against the exact products of the
 * same bf16 values, in double. Each product of two bf16 values is exact in fp32, so the only error
 * is the fp32 sum's: |c - c_ref| <= g32(K) S, S = |alpha| sum_k |a_k b_k| (+ |C0| when accumulating),
 * where c_ref sums the rounded operands (the packers' rounding, dnn_bf16_convert's: also checked
 * bit for bit, the fp32 packer against the bf16 one). Negative control: the same check against the
 * products of the unrounded fp32 operands must fail (bf16's 2^-8 is far above g32(K)), so the check
 * sees errors of a rounding's size. K odd reads A's pad column (zero) and never past it (the columns
 * beyond hold NaN); C's columns past N and rows past M are never written. A read pair-major (A^T's
 * rows paired by dnn_bf16_pairs_bf16) gives the bits of A read in rows (the same sums in the same order). */
static void pairs_case(int M, int N, int K, float alpha, int acc)
{
	const int K2 = (K + 1) / 2, lda = 2 * K2 + 2, ldb = N + 3, lds = N + 1, ldc = N + 2;
	const size_t nc = (size_t)(M + 1) * ldc;
	float *A = fill((size_t)M * K, -1, 1), *B = fill((size_t)K * lds, -1, 1), *c = malloc(nc * 4),
	      *c0 = fill(nc, -1, 1), *ref = malloc(nc * 4), *ref32 = malloc(nc * 4), *S = malloc(nc * 4);
	uint16_t *ah = malloc((size_t)M * lda * 2), *bh = malloc((size_t)K * lds * 2);
	uint32_t *bp = malloc((size_t)K2 * ldb * 4), *bp2 = malloc((size_t)K2 * ldb * 4);
	char what[112];
	snprintf(what, sizeof(what), "gemm_bf16_pairs %dx%dx%d alpha=%g acc=%d", M, N, K, alpha, acc);
	if (!A || !B || !c || !c0 || !ref || !ref32 || !S || !ah || !bh || !bp || !bp2) {
		TEST_CHECK(0, "%s: out of memory", what);
		goto out;
	}
	for (int i = 0; i < M; i++) {
		dnn_bf16_convert(ah + (size_t)i * lda, A + (size_t)i * K, (size_t)K);
		for (int k = K; k < lda; k++)
			ah[(size_t)i * lda + k] = k == K ? 0 : 0x7fc0; /* the pad, then NaN never read */
	}
	for (int k = 0; k < K; k++)
		dnn_bf16_convert(bh + (size_t)k * lds, B + (size_t)k * lds, (size_t)lds);
	memset(bp, 0xff, (size_t)K2 * ldb * 4), memset(bp2, 0xff, (size_t)K2 * ldb * 4);
	dnn_bf16_pairs_f32(bp, ldb, B, lds, K, N);
	dnn_bf16_pairs_bf16(bp2, ldb, bh, lds, K, N);
	int same = 1;
	for (int p = 0; p < K2; p++)
		same &= memcmp(bp + (size_t)p * ldb, bp2 + (size_t)p * ldb, (size_t)N * 4) == 0;
	TEST_CHECK(same, "%s: the fp32 packer rounds otherwise than dnn_bf16_convert", what);
	for (int i = 0; i <= M; i++)
		for (int j = 0; j < ldc; j++) {
			const size_t o = (size_t)i * ldc + j;
			double r = 0, r32 = 0, a = 0;
			for (int k = 0; i < M && j < N && k < K; k++) {
				r += (double)dnn_bf16_to_f32(ah[(size_t)i * lda + k]) * dnn_bf16_to_f32(bh[(size_t)k * lds + j]);
				r32 += (double)A[(size_t)i * K + k] * B[(size_t)k * lds + j];
				a += fabs((double)dnn_bf16_to_f32(ah[(size_t)i * lda + k]) * dnn_bf16_to_f32(bh[(size_t)k * lds + j]));
			}
			const int in = i < M && j < N;
			ref[o] = in ? (float)(alpha * r + (acc ? c0[o] : 0.0)) : c0[o]; /* outside: unwritten */
			ref32[o] = in ? (float)(alpha * r32 + (acc ? c0[o] : 0.0)) : c0[o];
			S[o] = (float)(g32(K) * (fabs(alpha) * a + (acc ? fabs(c0[o]) : 0.0)));
		}
	memcpy(c, c0, nc * 4);
	TEST_CHECK(dnn_gemm_bf16_pairs(c, ldc, ah, lda / 2, 1, bp, ldb, M, N, K, alpha, acc) == 0, "%s failed", what);
	TEST_CHECK(test_count_outside(what, c, ref, S, 1.0, 0.0, nc, 1) == 0, "%s: outside the fp32 sum's bound", what);
	TEST_CHECK(test_count_outside(what, c, ref32, S, 1.0, 0.0, nc, 0) > 0,
		   "%s: negative control: the unrounded operands' products passed the bound, so it tests nothing", what);
	/* A read pair-major (A^T's rows paired, as attention's q and dy): the same sums, the same bits */
	float *c2 = malloc(nc * 4);
	uint16_t *at = malloc((size_t)K * M * 2);
	uint32_t *ap = malloc((size_t)K2 * (M + 1) * 4);
	if (c2 && at && ap) {
		for (int k = 0; k < K; k++)
			for (int i = 0; i < M; i++)
				at[(size_t)k * M + i] = ah[(size_t)i * lda + k];
		dnn_bf16_pairs_bf16(ap, M + 1, at, M, K, M);
		memcpy(c2, c0, nc * 4);
		dnn_gemm_bf16_pairs(c2, ldc, (const uint16_t *)ap, 1, M + 1, bp, ldb, M, N, K, alpha, acc);
		TEST_CHECK(test_same_bits(what, c2, c, nc), "%s: A pair-major gave other bits than A in rows", what);
		memcpy(c2, c0, nc * 4);
		dnn_gemm_bf16_pairs(c2, ldc, ah, lda / 2, 1, bp, ldb, M, N, K, alpha, acc);
		TEST_CHECK(test_same_bits(what, c2, c, nc), "%s: a second call gave other bits", what);
		/* negative control of the same-bits checks: one bf16 step in A's first value moves C */
		ah[0]++;
		memcpy(c2, c0, nc * 4);
		dnn_gemm_bf16_pairs(c2, ldc, ah, lda / 2, 1, bp, ldb, M, N, K, alpha, acc);
		TEST_CHECK(memcmp(c2, c, nc * 4) != 0, "%s: negative control: a changed A gave the same bits", what);
		ah[0]--;
	} else {
		TEST_CHECK(0, "%s: out of memory", what);
	}
	free(c2), free(at), free(ap);
	printf("  %s: within the fp32 sum's bound of the exact bf16 products\n", what);
out:
	free(A), free(B), free(c), free(c0), free(ref), free(ref32), free(S), free(ah), free(bh), free(bp), free(bp2);
}

static void pairs_all(void)
{
	if (!dnn_cpu_has_bf16()) {
		float c = 0;
		const uint16_t a[2] = {0, 0};
		const uint32_t b = 0;
		TEST_CHECK(dnn_gemm_bf16_pairs(&c, 1, a, 1, 1, &b, 1, 1, 1, 2, 1.0f, 0) == -1,
			   "gemm_bf16_pairs ran on a CPU without AVX512_BF16");
		printf("  gemm_bf16_pairs: no AVX512_BF16 here, refused as it must be\n");
		return;
	}
	test_rng_seed(4521);
	pairs_case(64, 64, 32, 0.17677669f, 0); /* attention's scores: scale q k^T, D = 32 */
	pairs_case(64, 32, 64, 1.0f, 1);        /* o += P v, dq += dS k */
	pairs_case(32, 64, 64, 1.0f, 1);        /* dv^T += dy^T P */
	pairs_case(37, 45, 19, 0.5f, 1);        /* odd K, ragged rows and columns */
	pairs_case(5, 100, 7, 1.0f, 0);         /* a wide block and a tail */
	pairs_case(9, 17, 1, 2.0f, 1);          /* K = 1: one pair, its high half the pad */
}

static void gemm_ex_all(void)
{
	test_rng_seed(4504);
	gemm_ex_case(37, 45, 19, 0, 1); /* dense forward's form */
	gemm_ex_case(37, 45, 19, 1, 0); /* backward weight's */
	gemm_ex_case(64, 32, 64, 0, 0); /* attention's tiles */
	gemm_ex_case(64, 64, 32, 1, 1);
	gemm_ex_case(300, 256, 64, 0, 1);
}

/* ------------------------------------------------------------------ storage
 *
 * The claim of bf16 activation storage is exactness: an op that writes its output y in bf16 writes
 * dnn_bf16_convert(y_fp32), the values its readers' bf16 GEMMs rounded y_fp32 to before, and a
 * reader that takes x in bf16 gives the bits it gave on the fp32 x those values came from. So the
 * checks are bit for bit, each with a negative control (one bf16 element moved by one step must
 * change the result). Beside exactness, the rounding's own bound, stated for the record: round to
 * nearest even with an 8-bit significand moves each value by at most u |y|, u = 2^-8 (a flushed
 * denormal, |y| < 2^-126, by at most 2^-126); its negative control: the fp32 tolerance 2^-24 |y|
 * must fail on the same values. Where the storage changes a computation (attention's backward
 * reads the bf16 y for D_t), the change has its own bound, below. */

/* yh (n bf16) against the fp32 y it must be the rounding of: bit for bit, and within u |y|. */
static void storage_check(const char *what, const uint16_t *yh, const float *y, size_t n)
{
	uint16_t *want = malloc(n * 2);
	float *wide = malloc(n * 4);
	if (!want || !wide) {
		TEST_CHECK(0, "%s: out of memory", what);
		goto out;
	}
	dnn_bf16_convert(want, y, n);
	size_t diff = 0;
	for (size_t i = 0; i < n; i++)
		diff += yh[i] != want[i], wide[i] = dnn_bf16_to_f32(yh[i]);
	TEST_CHECK(diff == 0, "%s: %zu of %zu bf16 values are not dnn_bf16_convert of the fp32 output", what, diff, n);
	char w2[128];
	snprintf(w2, sizeof(w2), "%s (rounding)", what);
	TEST_CHECK(test_count_outside(w2, wide, y, y, ldexp(1.0, -8), ldexp(1.0, -126), n, 1) == 0, "%s: outside u |y|", what);
	TEST_CHECK(test_count_outside(w2, wide, y, y, ldexp(1.0, -24), 0.0, n, 0) > 0,
		   "%s: negative control: the bf16 values passed the fp32 tolerance, so the bound tests nothing", what);
out:
	free(want), free(wide);
}

static void layernorm_storage_case(long rows, int C, float offset)
{
	const size_t n = (size_t)rows * C;
	float *x = fill(n, offset - 2, offset + 2), *g = fill(C, 0.5f, 1.5f), *b = fill(C, -0.5f, 0.5f);
	float *y = malloc(n * 4), *sv = malloc(3 * (size_t)rows * 4), *sh = malloc(3 * (size_t)rows * 4);
	uint16_t *yh = malloc(n * 2);
	char what[96];
	if (!x || !g || !b || !y || !sv || !sh || !yh) {
		TEST_CHECK(0, "layernorm storage: out of memory");
		goto out;
	}
	dnn_layernorm_args a = {.rows = rows, .C = C, .eps = 1e-5f, .save = 1}, ah = a;
	ah.y_bf16 = 1;
	dnn_layernorm_forward_cpu(y, sv, x, g, b, &a);
	dnn_layernorm_forward_cpu(yh, sh, x, g, b, &ah);
	snprintf(what, sizeof(what), "layernorm bf16 y rows=%ld C=%d", rows, C);
	storage_check(what, yh, y, n);
	TEST_CHECK(test_same_bits("layernorm bf16 y: saved statistics", sh, sv, 3 * (size_t)rows),
		   "%s: the saved statistics differ from the fp32 forward's", what);
out:
	free(x), free(g), free(b), free(y), free(sv), free(sh), free(yh);
}

void h_extra_layernorm_bf16(void)
{
	test_rng_seed(4511);
	layernorm_storage_case(3, 7, 0);
	layernorm_storage_case(37, 45, 0);
	layernorm_storage_case(256, 128, 0); /* gpt-nano: 2 samples of 128 tokens, d 128 */
	layernorm_storage_case(5, 771, 30); /* C > the 256-float staging block, rows off 0 */
}

static void gelu_storage_case(long n)
{
	float *x = fill((size_t)n, -6, 6), *y = malloc((size_t)n * 4);
	uint16_t *yh = malloc((size_t)n * 2);
	char what[64];
	if (!x || !y || !yh) {
		TEST_CHECK(0, "gelu storage: out of memory");
		goto out;
	}
	dnn_gelu_forward_cpu(y, x, n);
	dnn_gelu_forward_bf16_cpu(yh, x, n);
	snprintf(what, sizeof(what), "gelu bf16 y n=%ld", n);
	storage_check(what, yh, y, (size_t)n);
out:
	free(x), free(y), free(yh);
}

void h_extra_gelu_bf16(void)
{
	test_rng_seed(4512);
	gelu_storage_case(7);          /* a tail only */
	gelu_storage_case(1001);       /* a tail of 9 past the last 16 */
	gelu_storage_case(64 * 512 + 3); /* several 512-float staging blocks, ragged */
}

/* dense with x stored in bf16 (x_bf16): forward and weight gradient bit for bit as with the fp32 x. */
static void dense_storage_case(int N, int IN, int OUT)
{
	const size_t nx = (size_t)N * IN, nw = (size_t)OUT * IN, ny = (size_t)N * OUT;
	float *x = fill(nx, -1, 1), *w = fill(nw, -1, 1), *b = fill(OUT, -1, 1), *dy = fill(ny, -1, 1);
	float *y0 = malloc(ny * 4), *y1 = malloc(ny * 4), *dw0 = fill(nw, -1, 1), *dw1 = malloc(nw * 4);
	float *db0 = fill(OUT, -1, 1), *db1 = malloc(OUT * 4);
	uint16_t *xh = malloc(nx * 2);
	char what[96];
	if (!x || !w || !b || !dy || !y0 || !y1 || !dw0 || !dw1 || !db0 || !db1 || !xh) {
		TEST_CHECK(0, "dense storage: out of memory");
		goto out;
	}
	memcpy(dw1, dw0, nw * 4), memcpy(db1, db0, (size_t)OUT * 4);
	dnn_bf16_convert(xh, x, nx);
	dnn_dense_args a = {.N = N, .IN = IN, .OUT = OUT, .bf16 = 1}, ah = a;
	ah.x_bf16 = 1;
	TEST_CHECK(dnn_dense_forward_cpu(y0, x, w, b, &a) == 0 && dnn_dense_forward_cpu(y1, xh, w, b, &ah) == 0,
		   "dense storage: forward failed");
	snprintf(what, sizeof(what), "dense bf16 x fwd N=%d IN=%d OUT=%d", N, IN, OUT);
	TEST_CHECK(test_same_bits(what, y1, y0, ny), "%s: other bits than the fp32 x", what);
	TEST_CHECK(dnn_dense_backward_weight_cpu(dw0, db0, x, dy, &a) == 0 &&
			   dnn_dense_backward_weight_cpu(dw1, db1, xh, dy, &ah) == 0,
		   "dense storage: backward weight failed");
	snprintf(what, sizeof(what), "dense bf16 x bwd weight N=%d IN=%d OUT=%d", N, IN, OUT);
	TEST_CHECK(test_same_bits(what, dw1, dw0, nw) && test_same_bits(what, db1, db0, (size_t)OUT),
		   "%s: other bits than the fp32 x", what);
	/* y written in bf16 (y_bf16, dnn_gemm_bf16_out): dnn_bf16_convert of the fp32 y, bit for bit, with
	 * x in fp32 and in bf16 */
	uint16_t *yh = malloc(ny * 2);
	TEST_CHECK(yh != NULL, "dense storage: out of memory");
	for (int xb = 0; yh && xb <= 1; xb++) {
		dnn_dense_args ay = a;
		ay.x_bf16 = xb, ay.y_bf16 = 1;
		snprintf(what, sizeof(what), "dense bf16 y (x %s) N=%d IN=%d OUT=%d", xb ? "bf16" : "fp32", N, IN, OUT);
		TEST_CHECK(dnn_dense_forward_cpu(yh, xb ? (const void *)xh : x, w, b, &ay) == 0, "%s: failed", what);
		storage_check(what, yh, y0, ny);
	}
	free(yh);
	/* negative control: x[0] one bf16 step away changes y's first row */
	xh[0]++;
	dnn_dense_forward_cpu(y1, xh, w, b, &ah);
	TEST_CHECK(memcmp(y1, y0, (size_t)OUT * 4) != 0,
		   "dense storage: negative control: a changed bf16 x gave the same y, so the check tests nothing");
	/* x_bf16 without bf16 (the fp32 GEMM cannot read bf16) is refused */
	ah.bf16 = 0;
	TEST_CHECK(dnn_dense_forward_cpu(y1, xh, w, b, &ah) == -1 &&
			   dnn_dense_backward_weight_cpu(dw1, db1, xh, dy, &ah) == -1,
		   "dense storage: x_bf16 without bf16 was not refused");
	printf("  dense bf16 x N=%d IN=%d OUT=%d: the same bits as the fp32 x\n", N, IN, OUT);
out:
	free(x), free(w), free(b), free(dy), free(y0), free(y1), free(dw0), free(dw1), free(db0), free(db1), free(xh);
}

static void dense_all(void)
{
	gemm_ex_all();
	pairs_all();
	test_rng_seed(4513);
	dense_storage_case(37, 45, 19);
	dense_storage_case(256, 128, 384); /* qkv after a layernorm */
	dense_storage_case(64, 512, 128);  /* mlp after gelu */
	test_rng_seed(4501);
	dense_case(37, 45, 19, 0); /* no size a multiple of anything */
	dense_case(37, 45, 19, 1);
	dense_case(256, 128, 384, 0); /* gpt-nano's qkv, 2 samples of 128 tokens */
	dense_case(64, 512, 128, 1);  /* its mlp projection: K = 512 */
	dense_case(300, 64, 256, 0);  /* an lm_head: OUT = V */
}

void h_extra_dense_bf16(void)
{
	if (!dnn_cpu_has_bf16())
		printf("  no AVX512_BF16 here: the bf16 checks run the portable path only\n");
	each_path(dense_all);
}

/* The attention backward, per element. A double-precision model of the backward's arithmetic
 * (att_bwd_model) gives two checks of the bf16 kernel, both per element of dq, dk and dv:
 *
 * 1. Against the fp32 kernel, the bound of the GEMM rows: each output is a sum of 2-3 products
 *    chained through the softmax, and each kernel (bf16, fp32) is within a bound of the exact
 *    value taken with the unrounded operands; the check is the sum of the two bounds. With
 *    A_ts = scale sum_d |q_td k_sd|, B_ts = sum_d |dy_td v_sd|, Y_t = sum_d |dy_td y_td| and a
 *    kernel's g(K) (g16, or g32 for the fp32 kernel):
 *      S_ts = scale q_t.k_s is within g(D) A_ts; P = exp(S - lse) (fp32 S - lse: 2^-24 |S - lse|
 *      more in the exponent; the exp within 2 ulp of expf, expf within 1: eps = 2^-21 relative;
 *      below 2^-126 flushed or ~1e-38: f = 2^-125 absolute) is within dP_ts = P e^d (1 + eps) + f - P,
 *      d = g(D) A_ts + 2^-24 (|S_ts| + g(D) A_ts + |lse_t|);
 *      dP_ts = dy_t.v_s within g(D) B_ts and D_t = dy_t.y_t (fp32 in both kernels) within g32(D) Y_t,
 *      so x = dP - D_t within beta_ts = g(D) B_ts + g32(D) Y_t, and dS = scale P x (three fp32
 *      operations) within E_ts = scale [(P + dP_ts)(|x| + beta_ts)(1 + 2^-24)^3 - P |x|];
 *      dv_sd = sum_t P_ts dy_td, dq_td = sum_s dS_ts k_sd, dk_sd = sum_t dS_ts q_td: a sum of
 *      products whose first factor is within alpha of the exact one (alpha = dP_ts or E_ts, and the
 *      bf16 kernel's rounding: (|a| + alpha)(1 + u) - |a|), the second within u relative (bf16) or
 *      exact (fp32), summed in fp32 over at most T terms plus 2 roundings per tile of the
 *      accumulation (at most 2T + 2: g32(2T) without the u's) is within
 *        sum_i [(|a_i| + alpha_i)(1 + v)(1 + g32(2T)) - |a_i|] |b_i|,  v = u (bf16) or 0 (fp32).
 *    The first-order term is 2u sum |a||b| per product in the chain, as the GEMM rows' (g16 + g32) S.
 *    Negative controls: the fp32 tolerance (1e-5 max |g|) must fail, and so must the model of a
 *    kernel that gets dP 10% wrong (every dP_ts times 1.1), under the same bound, in dq and in dk
 *    (dv = P^T dy does not read dP).
 *    An upper bound on |bf16 - fp32| cannot see a rounding that errs less than bf16's (an operand
 *    left unrounded, which the first check passes by construction) nor, on data of random signs,
 *    a truncating one (its errors cancel in the sums as RNE's do), hence the second check:
 * 2. Against the model of the bf16 arithmetic itself: q, k, v, dy rounded to bf16 as the kernel
 *    rounds them (the same values), S, P, dP, D_t, dS exact from those, P and dS rounded to bf16 by
 *    RNE, the three products' sums exact. The kernel's fp32 P_ts lies in the interval the bound of
 *    1. gives with g32 in place of g (its operands are the model's), [P e^-d (1 - eps) - f,
 *    P e^d (1 + eps) + f], and since rounding is monotone its bf16 value is within
 *    w_ts = r(hi) - r(lo) of the model's: 0 unless a rounding boundary falls inside (an interval of
 *    some 2^-20 P against bf16's steps of 2^-8 P: a few in a thousand), one bf16 step when one does;
 *    the same for dS (interval +-E_ts with beta = g32(D) (B_ts + Y_t)). The sum over i of
 *    a_i b_i is then within sum_i [w_i + g32(2T) (|a_i| + w_i)] |b_i| (plus 2^-23 |ref|: the model's
 *    value as a float, and 2^-100: vdpbf16ps flushes denormal products, at most 2T of them, each
 *    under 2^-126 max |b|). The tolerance is of fp32's order where no boundary is crossed, so
 *    every deviation from the bf16 arithmetic shows; negative controls (each must fail): the model
 *    with dP 10% wrong, with truncation in place of RNE (every rounding: q, k, v, dy, P, dS), and
 *    with each of the six rounded operands in turn left unrounded. */
enum {
	ATT_EXACT = 0,   /* unrounded operands: the reference of check 1; tol: the bf16 + fp32 bounds */
	ATT_RNE = 1,     /* the bf16 arithmetic (check 2); tol: its tolerance */
	ATT_TRUNC = 2,   /* fault: truncation in place of RNE */
	ATT_DP10 = 4,    /* fault: dP_ts times 1.1 */
	ATT_UNR_Q = 8,   /* fault: this operand left unrounded (ATT_UNR_Q << i: q, k, v, dy, P, dS) */
};
#define ATT_UNR_ALL (63 * ATT_UNR_Q)

/* x rounded to a bf16 value as the mode says: RNE (the kernels' dnn_bf16_convert), truncation, or not
 * at all (ATT_EXACT, or the operand the fault leaves unrounded). */
static double att_round(double x, int mode, int unr)
{
	if (!(mode & (ATT_RNE | ATT_TRUNC)) || (mode & unr))
		return x;
	const float f = (float)x;
	if (mode & ATT_TRUNC) {
		uint32_t b;
		memcpy(&b, &f, 4);
		b &= 0xffff0000u;
		float t;
		memcpy(&t, &b, 4);
		return t;
	}
	return dnn_bf16_round(f);
}

/* The kernel's bf16 value of an fp32 quantity within [lo, hi]: at most this far from the model's. */
static double att_width(double lo, double hi) { return (double)dnn_bf16_round((float)hi) - dnn_bf16_round((float)lo); }

/* One term's contribution to a bound: a within alpha, b within v relative, the sum's g. */
static double att_term(double a, double alpha, double b, double v, double gs)
{
	return ((fabs(a) + alpha) * (1 + v) * (1 + gs) - fabs(a)) * fabs(b);
}

/* g (N,T,3C) as dqkv: the model's dq, dk, dv; tol (N,T,3C): the per-element tolerance of the mode
 * (ATT_EXACT: check 1's bound, bf16's plus fp32's; ATT_RNE: check 2's); NULL for the faults. */
static int att_bwd_model(double *g, double *tol, const float *qkv, const float *y, const float *dy, const float *lse,
			 int N, int T, int C, int H, int mode)
{
	const int D = C / H;
	const double scale = 1.0f / sqrtf((float)D), u = ldexp(1.0, -8), eps = ldexp(1.0, -21), f = ldexp(1.0, -125);
	const double gsum = g32(2 * T), e3 = pow(1 + ldexp(1.0, -24), 3) - 1;
	const size_t TT = (size_t)T * T;
	double *P = malloc(TT * 8 * 5), *Ph = P + TT, *dS = Ph + TT, *dSh = dS + TT, *w = dSh + TT;
	double *aP = malloc(TT * 8 * 4), *aS = aP + TT, *aP32 = aS + TT, *aS32 = aP32 + TT;
	double *hq = malloc((size_t)T * D * 8 * 4), *hk = hq + (size_t)T * D, *hv = hk + (size_t)T * D,
	       *hdy = hv + (size_t)T * D;
	if (!P || !aP || !hq) {
		free(P), free(aP), free(hq);
		return -1;
	}
	for (size_t i = 0; i < (size_t)N * T * 3 * C; i++)
		g[i] = 0, tol ? tol[i] = 0 : 0;
	for (int n = 0; n < N; n++)
		for (int h = 0; h < H; h++) {
			const size_t o = (size_t)n * T * 3 * C + (size_t)h * D, oy = (size_t)n * T * C + (size_t)h * D;
			for (int t = 0; t < T; t++)
				for (int d = 0; d < D; d++) {
					const size_t i = (size_t)t * D + d, x = o + (size_t)t * 3 * C + d;
					hq[i] = att_round(qkv[x], mode, ATT_UNR_Q);
					hk[i] = att_round(qkv[x + C], mode, ATT_UNR_Q << 1);
					hv[i] = att_round(qkv[x + 2 * C], mode, ATT_UNR_Q << 2);
					hdy[i] = att_round(dy[oy + (size_t)t * C + d], mode, ATT_UNR_Q << 3);
				}
			for (int t = 0; t < T; t++) {
				const float *dyt = dy + oy + (size_t)t * C, *yt = y + oy + (size_t)t * C;
				const double l = lse[((size_t)n * H + h) * T + t];
				double Dt = 0, Y = 0;
				for (int d = 0; d < D; d++)
					Dt += (double)dyt[d] * yt[d], Y += fabs((double)dyt[d] * yt[d]);
				for (int s = 0; s <= t; s++) {
					double Sx = 0, A = 0, dP = 0, B = 0;
					for (int d = 0; d < D; d++) {
						const double *q = hq + (size_t)t * D, *k = hk + (size_t)s * D;
						const double *v = hv + (size_t)s * D, *e = hdy + (size_t)t * D;
						Sx += q[d] * k[d], A += fabs(q[d] * k[d]), dP += e[d] * v[d], B += fabs(e[d] * v[d]);
					}
					Sx *= scale, A *= scale;
					if (mode & ATT_DP10)
						dP *= 1.1;
					const size_t i = (size_t)t * T + s;
					const double p = exp(Sx - l), x = dP - Dt;
					P[i] = p, dS[i] = scale * p * x;
					Ph[i] = att_round(p, mode, ATT_UNR_Q << 4), dSh[i] = att_round(dS[i], mode, ATT_UNR_Q << 5);
					/* the fp32 kernel's (and in check 2 the bf16 kernel's) fp32 P and dS: their intervals */
					const double s32 = g32(D) * A, d32 = s32 + ldexp(fabs(Sx) + s32 + fabs(l), -24);
					const double lo32 = p * exp(-d32) * (1 - eps) - f, hi32 = p * exp(d32) * (1 + eps) + f;
					const double b32 = g32(D) * (B + Y);
					const double E32 = scale * ((hi32) * (fabs(x) + b32) * (1 + e3) - p * fabs(x));
					if (mode & ATT_RNE) { /* the kernel's bf16 P and dS: within w, aS of the model's */
						w[i] = att_width(lo32, hi32), aS[i] = att_width(dS[i] - E32, dS[i] + E32);
						continue;
					}
					const double s16 = g16(D) * A, d16 = s16 + ldexp(fabs(Sx) + s16 + fabs(l), -24);
					const double hi16 = p * exp(d16) * (1 + eps) + f;
					const double E16 = scale * (hi16 * (fabs(x) + g16(D) * B + g32(D) * Y) * (1 + e3) -
								    p * fabs(x));
					aP[i] = hi16 * (1 + u) - p, aP32[i] = hi32 - p;
					aS[i] = (fabs(dS[i]) + E16) * (1 + u) - fabs(dS[i]), aS32[i] = E32;
				}
			}
			/* the three products, summed in double (within T 2^-53 of exact: 2^-29 of g32(2T)) */
			for (int t = 0; t < T; t++)
				for (int d = 0; d < D; d++) {
					double dq = 0, tq = 0;
					for (int s = 0; s <= t; s++) {
						const size_t i = (size_t)t * T + s;
						const double k = hk[(size_t)s * D + d];
						dq += dSh[i] * k;
						tq += mode & ATT_RNE ? (aS[i] + gsum * (fabs(dSh[i]) + aS[i])) * fabs(k)
								     : att_term(dS[i], aS[i], k, u, gsum) +
									       att_term(dS[i], aS32[i], k, 0, gsum);
					}
					const size_t x = o + (size_t)t * 3 * C + d;
					g[x] = dq;
					if (tol)
						tol[x] = tq;
				}
			for (int s = 0; s < T; s++)
				for (int d = 0; d < D; d++) {
					double dk = 0, dv = 0, tk = 0, tv = 0;
					for (int t = s; t < T; t++) {
						const size_t i = (size_t)t * T + s;
						const double q = hq[(size_t)t * D + d], e = hdy[(size_t)t * D + d];
						dk += dSh[i] * q, dv += Ph[i] * e;
						if (mode & ATT_RNE)
							tk += (aS[i] + gsum * (fabs(dSh[i]) + aS[i])) * fabs(q),
								tv += (w[i] + gsum * (fabs(Ph[i]) + w[i])) * fabs(e);
						else
							tk += att_term(dS[i], aS[i], q, u, gsum) + att_term(dS[i], aS32[i], q, 0, gsum),
								tv += att_term(P[i], aP[i], e, u, gsum) +
								      att_term(P[i], aP32[i], e, 0, gsum);
					}
					const size_t x = o + (size_t)s * 3 * C + d;
					g[x + C] = dk, g[x + 2 * C] = dv;
					if (tol)
						tol[x + C] = tk, tol[x + 2 * C] = tv;
				}
		}
	free(P), free(aP), free(hq);
	return 0;
}

/* Part j (0 dq, 1 dk, 2 dv) of a dqkv (N,T,3C) of floats or doubles, as floats: dst (N,T,C). */
static void att_part(float *dst, const float *src, const double *srcd, size_t rows, int C, int j)
{
	for (size_t r = 0; r < rows; r++)
		for (int c = 0; c < C; c++) {
			const size_t i = r * 3 * C + (size_t)j * C + c;
			dst[r * C + c] = src ? src[i] : (float)srcd[i];
		}
}

/* The two backward checks of the model above on the bf16 kernel's dqkv g16v, per part; check 1
 * against the fp32 kernel's g32v. Returns 0 or -1 (out of memory, which also fails a check). */
static int att_bwd_checks(const char *what, const float *g16v, const float *g32v, const float *qkv, const float *y,
			  const float *dy, const float *lse, int N, int T, int C, int H)
{
	static const char *part[3] = {"dq", "dk", "dv"};
	const size_t nq = (size_t)N * T * 3 * C, np = (size_t)N * T * C, rows = (size_t)N * T;
	double *g = malloc(nq * 8), *tol = malloc(nq * 8), *gf = malloc(nq * 8), *tol2 = malloc(nq * 8);
	float *a = malloc(np * 4), *b = malloc(np * 4), *sc = malloc(np * 4), *wf = malloc(np * 4);
	float *tolf = malloc(nq * 4);
	int rc = -1;
	char w[160];
	if (!g || !tol || !gf || !tol2 || !a || !b || !sc || !wf || !tolf ||
	    att_bwd_model(g, tol, qkv, y, dy, lse, N, T, C, H, ATT_EXACT) != 0 ||
	    att_bwd_model(gf, tol2, qkv, y, dy, lse, N, T, C, H, ATT_RNE) != 0) {
		TEST_CHECK(0, "%s: out of memory", what);
		goto out;
	}
	double gmax = 0;
	for (size_t i = 0; i < nq; i++)
		gmax = fmax(gmax, fabs(g32v[i]));
	/* check 1: |g16 - g32| within the bf16 + fp32 bounds; controls: the fp32 tolerance, and dP 10% off */
	for (size_t i = 0; i < nq; i++)
		tolf[i] = (float)(tol[i] * (1 + ldexp(1.0, -20)));
	if (att_bwd_model(g, NULL, qkv, y, dy, lse, N, T, C, H, ATT_EXACT | ATT_DP10) != 0)
		goto oom;
	for (int j = 0; j < 3; j++) {
		att_part(a, g16v, NULL, rows, C, j), att_part(b, g32v, NULL, rows, C, j), att_part(sc, tolf, NULL, rows, C, j);
		snprintf(w, sizeof(w), "%s %s vs fp32", what, part[j]);
		TEST_CHECK(test_count_outside(w, a, b, sc, 1.0, 0.0, np, 1) == 0, "%s: outside the bf16 + fp32 bounds", w);
		TEST_CHECK(test_count_outside(w, a, b, NULL, 1e-5 * fmax(1.0, gmax), 0.0, np, 0) > 0,
			   "%s: negative control: bf16 passed the fp32 tolerance, so the bound tests nothing", w);
		if (j == 2)
			break; /* dv = P^T dy does not read dP */
		att_part(wf, NULL, g, rows, C, j);
		snprintf(w, sizeof(w), "%s %s vs fp32, model with dP 10%% off", what, part[j]);
		TEST_CHECK(test_count_outside(w, wf, b, sc, 1.0, 0.0, np, 0) > 0,
			   "%s: negative control: a 10%% error in dP passed the bound", w);
	}
	/* check 2: the kernel against the bf16 arithmetic's model */
	for (size_t i = 0; i < nq; i++)
		tolf[i] = (float)((tol2[i] + ldexp(fabs(gf[i]), -23)) * (1 + ldexp(1.0, -20)));
	for (int j = 0; j < 3; j++) {
		att_part(a, g16v, NULL, rows, C, j), att_part(b, NULL, gf, rows, C, j), att_part(sc, tolf, NULL, rows, C, j);
		snprintf(w, sizeof(w), "%s %s vs the bf16 model", what, part[j]);
		TEST_CHECK(test_count_outside(w, a, b, sc, 1.0, ldexp(1.0, -100), np, 1) == 0,
			   "%s: outside the bf16 arithmetic's tolerance", w);
	}
	/* its negative controls: each fault must put some element of some part outside */
	static const struct {
		int mode;
		const char *name;
	} fault[] = {{ATT_RNE | ATT_DP10, "dP 10% off"},        {ATT_TRUNC, "truncation for RNE"},
		     {ATT_RNE | ATT_UNR_Q, "q unrounded"},       {ATT_RNE | ATT_UNR_Q << 1, "k unrounded"},
		     {ATT_RNE | ATT_UNR_Q << 2, "v unrounded"},  {ATT_RNE | ATT_UNR_Q << 3, "dy unrounded"},
		     {ATT_RNE | ATT_UNR_Q << 4, "P unrounded"},  {ATT_RNE | ATT_UNR_Q << 5, "dS unrounded"}};
	for (size_t k = 0; k < sizeof(fault) / sizeof(fault[0]); k++) {
		if (att_bwd_model(g, NULL, qkv, y, dy, lse, N, T, C, H, fault[k].mode) != 0)
			goto oom;
		size_t out = 0;
		for (int j = 0; j < 3; j++) {
			att_part(a, g16v, NULL, rows, C, j), att_part(b, NULL, g, rows, C, j);
			att_part(sc, tolf, NULL, rows, C, j);
			snprintf(w, sizeof(w), "%s %s vs the model with %s", what, part[j], fault[k].name);
			out += test_count_outside(w, a, b, sc, 1.0, ldexp(1.0, -100), np, 0);
		}
		TEST_CHECK(out > 0, "%s: negative control: the kernel passed the model with %s, so check 2 cannot see it",
			   what, fault[k].name);
	}
	rc = 0;
	goto out;
oom:
	TEST_CHECK(0, "%s: out of memory", what);
out:
	free(g), free(tol), free(gf), free(tol2), free(a), free(b), free(sc), free(wf), free(tolf);
	return rc;
}

/* The forward, check 2 (check 1 is attention_case's bound against the fp32 y): the kernel's bf16 y
 * against a model of its arithmetic, per element. The kernel's online softmax, per query t and key
 * tile j (DNN_ATT_BK keys): the running max m_j of S over the tiles so far, P'_ts = exp(S_ts - m_j)
 * in fp32, rounded to bf16 for o += P' v, o and l rescaled by e^(m_(j-1) - m_j) when the max moves,
 * y = o (1 / l). The model: q, k, v rounded as the kernel rounds them, S and m_j exact from those,
 * P' rounded to bf16 by RNE, y = sum_s e^(m_j(s) - M) r(P'_ts) v_s / sum_s exp(S_ts - M) (M the last
 * max) in double. The kernel's S is within s'_ts = g32(D) A_ts, its m_j within the row's largest s',
 * sbar; so its fp32 P' lies in [P' e^-d (1 - eps) - f, P' e^d (1 + eps) + f],
 * d = s' + sbar + 2^-24 (|S - m_j| + s' + sbar) (eps, f as in the backward), and its bf16 P' within
 * w_ts (the width of that interval's rounding) of the model's; each tile's chain of at most nt
 * rescales (nt: the row's tiles; each an expf of a difference of two maxima, within 2 sbar and
 * 2^-24 (|m| + |m'|), and one product) moves a term by a factor within 1 + R,
 * R = (e^(2 sbar + 2^-23 max |m|) (1 + eps) (1 + 2^-24)^2)^nt - 1. With a_s = e^(m_j(s) - M) r(P'_ts):
 *   |o - o_model| <= Eo = sum_s [(|a_s| + e^(m_j - M) ((|r(P')| + w)(1 + R) - |r(P')|))(1 + g32(2T)) - |a_s|] |v_s|,
 *   |l - l_model| <= El = sum_s e^(m_j - M) [(P' + dP')(1 + R)(1 + g32(2T)) - P'],  dP' = hi - P',
 *   |y - y_model| <= B + 2^-22 (|y_model| + B),  B = (Eo + |y_model| El) / (l_model - El)
 * (l_model >= 1: the max's own term), plus 2^-23 |y_model| (the model as a float) and 2^-100.
 * Negative controls (each must fail): truncation for RNE, and each of q, k, v, P' left unrounded. */
static int att_fwd_model(double *y, double *tol, const float *qkv, int N, int T, int C, int H, int mode)
{
	const int D = C / H;
	const double scale = 1.0f / sqrtf((float)D), eps = ldexp(1.0, -21), f = ldexp(1.0, -125);
	const double gsum = g32(2 * T), e2 = ldexp(1.0, -22);
	double *hq = malloc((size_t)T * D * 8 * 3), *hk = hq + (size_t)T * D, *hv = hk + (size_t)T * D;
	double *S = malloc((size_t)T * 8 * 6), *A = S + T, *mj = A + T, *Pp = mj + T, *sc = Pp + T, *W = sc + T;
	if (!hq || !S) {
		free(hq), free(S);
		return -1;
	}
	for (int n = 0; n < N; n++)
		for (int h = 0; h < H; h++) {
			const size_t o = (size_t)n * T * 3 * C + (size_t)h * D, oy = (size_t)n * T * C + (size_t)h * D;
			for (int t = 0; t < T; t++)
				for (int d = 0; d < D; d++) {
					const size_t i = (size_t)t * D + d, x = o + (size_t)t * 3 * C + d;
					hq[i] = att_round(qkv[x], mode, ATT_UNR_Q);
					hk[i] = att_round(qkv[x + C], mode, ATT_UNR_Q << 1);
					hv[i] = att_round(qkv[x + 2 * C], mode, ATT_UNR_Q << 2);
				}
			for (int t = 0; t < T; t++) {
				const double *q = hq + (size_t)t * D;
				double sbar = 0, m = -INFINITY, mabs = 0;
				for (int s = 0; s <= t; s++) {
					double Sx = 0, Ax = 0;
					for (int d = 0; d < D; d++)
						Sx += q[d] * hk[(size_t)s * D + d], Ax += fabs(q[d] * hk[(size_t)s * D + d]);
					S[s] = Sx * scale, A[s] = Ax * scale, sbar = fmax(sbar, g32(D) * A[s]);
				}
				for (int s = 0; s <= t; s++) { /* m_j: the running max after the tile of key s */
					if (s % DNN_ATT_BK == 0)
						for (int s2 = s; s2 <= t && s2 < s + DNN_ATT_BK; s2++)
							m = fmax(m, S[s2]);
					mj[s] = m, mabs = fmax(mabs, fabs(m));
				}
				const int nt = t / DNN_ATT_BK + 1;
				const double R =
					pow(exp(2 * sbar + ldexp(mabs, -23)) * (1 + eps) * pow(1 + ldexp(1.0, -24), 2), nt) - 1;
				double l = 0, El = 0;
				for (int s = 0; s <= t; s++) {
					const double p = exp(S[s] - mj[s]), s1 = g32(D) * A[s];
					const double dd = s1 + sbar + ldexp(fabs(S[s] - mj[s]) + s1 + sbar, -24);
					const double lo = p * exp(-dd) * (1 - eps) - f, hi = p * exp(dd) * (1 + eps) + f;
					Pp[s] = p, sc[s] = exp(mj[s] - m), W[s] = att_width(lo, hi);
					l += sc[s] * p, El += sc[s] * (hi * (1 + R) * (1 + gsum) - p);
				}
				for (int d = 0; d < D; d++) {
					double ov = 0, Eo = 0;
					for (int s = 0; s <= t; s++) {
						const double r = att_round(Pp[s], mode, ATT_UNR_Q << 4), v = hv[(size_t)s * D + d];
						const double a = sc[s] * fabs(r), al = sc[s] * ((fabs(r) + W[s]) * (1 + R) - fabs(r));
						ov += sc[s] * r * v, Eo += ((a + al) * (1 + gsum) - a) * fabs(v);
					}
					const size_t i = oy + (size_t)t * C + d;
					y[i] = ov / l;
					if (tol) {
						const double B = (Eo + fabs(y[i]) * El) / (l - El);
						tol[i] = B + e2 * (fabs(y[i]) + B);
					}
				}
			}
		}
	free(hq), free(S);
	return 0;
}

/* Check 2 of the forward on the bf16 kernel's y16 (N,T,C), and its negative controls. */
static void att_fwd_check(const char *what, const float *y16, const float *qkv, int N, int T, int C, int H)
{
	const size_t ny = (size_t)N * T * C;
	double *ym = malloc(ny * 8), *tol = malloc(ny * 8);
	float *yf = malloc(ny * 4), *tf = malloc(ny * 4);
	char w[160];
	if (!ym || !tol || !yf || !tf || att_fwd_model(ym, tol, qkv, N, T, C, H, ATT_RNE) != 0) {
		TEST_CHECK(0, "%s: out of memory", what);
		goto out;
	}
	for (size_t i = 0; i < ny; i++)
		yf[i] = (float)ym[i], tf[i] = (float)((tol[i] + ldexp(fabs(ym[i]), -23)) * (1 + ldexp(1.0, -20)));
	snprintf(w, sizeof(w), "%s y vs the bf16 model", what);
	TEST_CHECK(test_count_outside(w, y16, yf, tf, 1.0, ldexp(1.0, -100), ny, 1) == 0,
		   "%s: outside the bf16 arithmetic's tolerance", w);
	static const struct {
		int mode;
		const char *name;
	} fault[] = {{ATT_TRUNC, "truncation for RNE"},       {ATT_RNE | ATT_UNR_Q, "q unrounded"},
		     {ATT_RNE | ATT_UNR_Q << 1, "k unrounded"}, {ATT_RNE | ATT_UNR_Q << 2, "v unrounded"},
		     {ATT_RNE | ATT_UNR_Q << 4, "P unrounded"}};
	for (size_t k = 0; k < sizeof(fault) / sizeof(fault[0]); k++) {
		if (att_fwd_model(ym, NULL, qkv, N, T, C, H, fault[k].mode) != 0) {
			TEST_CHECK(0, "%s: out of memory", what);
			break;
		}
		for (size_t i = 0; i < ny; i++)
			yf[i] = (float)ym[i];
		snprintf(w, sizeof(w), "%s y vs the model with %s", what, fault[k].name);
		TEST_CHECK(test_count_outside(w, y16, yf, tf, 1.0, ldexp(1.0, -100), ny, 0) > 0,
			   "%s: negative control: the kernel passed the model with %s, so check 2 cannot see it", w,
			   fault[k].name);
	}
out:
	free(ym), free(tol), free(yf), free(tf);
}

static void attention_case(int N, int T, int C, int H, float qk_range)
{
	const int D = C / H;
	const size_t nq = (size_t)N * T * 3 * C, ny = (size_t)N * T * C, nl = (size_t)N * H * T;
	float *qkv = fill(nq, -qk_range, qk_range), *dy = fill(ny, -1, 1);
	float *y16 = malloc(ny * 4), *y32 = malloc(ny * 4), *lse = malloc(nl * 4), *l16 = malloc(nl * 4);
	float *g16v = malloc(nq * 4), *g32v = malloc(nq * 4);
	const size_t ns = dnn_attention_scratch_floats(T, D);
	float *scratch = malloc((ns + 16) * sizeof(float)); /* 16 canary values past the scratch */
	if (!qkv || !dy || !y16 || !y32 || !lse || !l16 || !g16v || !g32v || !scratch) {
		TEST_CHECK(0, "attention bf16: out of memory");
		goto out;
	}
	for (int i = 0; i < 16; i++)
		scratch[ns + i] = -12345.0f;
	dnn_attention_args a32 = {.N = N, .T = T, .C = C, .H = H, .save_lse = 1}, a16 = a32;
	a16.bf16 = 1;
	TEST_CHECK(dnn_attention_forward_cpu(y16, l16, qkv, &a16, scratch) == 0, "attention bf16 forward failed");
	dnn_attention_forward_cpu(y32, lse, qkv, &a32, scratch);
	/* d_t = g16(D) max_s A_ts per (sample, head, query); the bound per element of y */
	const double scale = 1.0 / sqrt((double)D);
	float *bound = malloc(ny * 4), *bound32 = malloc(ny * 4);
	if (!bound || !bound32) {
		TEST_CHECK(0, "attention bf16: out of memory");
		free(bound), free(bound32);
		goto out;
	}
	for (int n = 0; n < N; n++)
		for (int h = 0; h < H; h++)
			for (int t = 0; t < T; t++) {
				const float *q = qkv + ((size_t)n * T + t) * 3 * C + (size_t)h * D;
				double amax = 0;
				for (int s = 0; s <= t; s++) {
					const float *k = qkv + ((size_t)n * T + s) * 3 * C + C + (size_t)h * D;
					double A = 0;
					for (int d = 0; d < D; d++)
						A += fabs((double)q[d] * k[d]);
					amax = fmax(amax, A * scale);
				}
				const double dt = g16(D) * amax, grow = (exp(2 * dt) - 1) * (1 + g16(T)) + g16(T);
				for (int d = 0; d < D; d++) {
					double vmax = 0;
					for (int s = 0; s <= t; s++)
						vmax = fmax(vmax, fabs(qkv[((size_t)n * T + s) * 3 * C + 2 * C +
									   (size_t)h * D + d]));
					const size_t i = ((size_t)n * T + t) * C + (size_t)h * D + d;
					bound[i] = (float)(grow * vmax + 1e-5 * fmax(1.0, fabs(y32[i])));
					bound32[i] = (float)(1e-5 * fmax(1.0, fabs(y32[i])));
				}
			}
	char what[96];
	snprintf(what, sizeof(what), "attention bf16 fwd N=%d T=%d C=%d H=%d", N, T, C, H);
	TEST_CHECK(test_count_outside(what, y16, y32, bound, 1.0, 0.0, ny, 1) == 0,
		   "%s: bf16 against fp32 outside the bound", what);
	TEST_CHECK(test_count_outside(what, y16, y32, bound32, 1.0, 0.0, ny, 0) > 0,
		   "%s: negative control: bf16 passed the fp32 tolerance (1e-5), so the bound tests nothing", what);
	att_fwd_check(what, y16, qkv, N, T, C, H);
	/* backward, from the fp32 forward's y and lse: the backward's own bf16 error */
	for (size_t i = 0; i < nq; i++)
		g16v[i] = g32v[i] = NAN;
	TEST_CHECK(dnn_attention_backward_cpu(g16v, qkv, y32, dy, lse, &a16, scratch) == 0,
		   "attention bf16 backward failed");
	dnn_attention_backward_cpu(g32v, qkv, y32, dy, lse, &a32, scratch);
	snprintf(what, sizeof(what), "attention bf16 bwd N=%d T=%d C=%d H=%d", N, T, C, H);
	att_bwd_checks(what, g16v, g32v, qkv, y32, dy, lse, N, T, C, H);
	TEST_CHECK(dnn_attention_forward_cpu(y32, l16, qkv, &a16, scratch) == 0 &&
			   test_same_bits("attention bf16 rerun", y32, y16, ny),
		   "attention bf16: a second run gave other bits");
	int canary = 1;
	for (int i = 0; i < 16; i++)
		canary &= scratch[ns + i] == -12345.0f;
	TEST_CHECK(canary, "attention bf16 N=%d T=%d C=%d H=%d: the kernels wrote past dnn_attention_scratch_floats", N,
		   T, C, H);
	free(bound), free(bound32);
out:
	free(qkv), free(dy), free(y16), free(y32), free(lse), free(l16), free(g16v), free(g32v), free(scratch);
}

/* Attention with its output stored in bf16 (y_bf16). Forward: y_bf16 is dnn_bf16_convert of the
 * bf16 forward's fp32 y, bit for bit. Backward: reading the bf16 y gives the bits of reading the
 * fp32 values it widens to (exact; negative control: one y element one step away changes dqkv),
 * and against the backward on the unrounded fp32 y (both with bf16 GEMMs) the change is bounded:
 * y_r = y (1 + e), |e| <= u, moves D_t = dy_t.y_t by at most E_t = u sum_d |dy_td y_td| (plus the
 * fp32 sum's own D 2^-24 on both sides); D_t enters only dS_ts = P_ts (dP_ts - D_t) scale, so dv
 * does not move, dq_t by at most scale E_t sum_s P_ts |k_s| <= scale max_t E_t max |k| (a softmax
 * row sums to 1), dk_s by at most scale sum_t P_ts E_t |q_t| <= scale T max_t E_t max |q| (a column
 * of P sums to at most T). Each run's own bf16 rounding of dS and the products adds at most the
 * bound of the fp32 comparison above (tolb, each), so
 *     max |g_stored - g_fp32y| <= scale T max_t E_t max |q, k| + 2 tolb;
 * negative control: the fp32 tolerance (1e-5 max |g|) must fail (D_t's change is of order 2^-9). */
static void attention_storage_case(int N, int T, int C, int H)
{
	const int D = C / H;
	const size_t nq = (size_t)N * T * 3 * C, ny = (size_t)N * T * C, nl = (size_t)N * H * T;
	float *qkv = fill(nq, -1, 1), *dy = fill(ny, -1, 1), *y = malloc(ny * 4), *yw = malloc(ny * 4);
	float *lse = malloc(nl * 4), *l2 = malloc(nl * 4);
	float *g0 = malloc(nq * 4), *g1 = malloc(nq * 4), *g2 = malloc(nq * 4);
	float *scratch = malloc(dnn_attention_scratch_floats(T, D) * sizeof(float));
	uint16_t *yh = malloc(ny * 2);
	char what[112];
	if (!qkv || !dy || !y || !yw || !lse || !l2 || !g0 || !g1 || !g2 || !scratch || !yh) {
		TEST_CHECK(0, "attention storage: out of memory");
		goto out;
	}
	dnn_attention_args a = {.N = N, .T = T, .C = C, .H = H, .save_lse = 1, .bf16 = 1}, ah = a;
	ah.y_bf16 = 1;
	TEST_CHECK(dnn_attention_forward_cpu(y, lse, qkv, &a, scratch) == 0 &&
			   dnn_attention_forward_cpu(yh, l2, qkv, &ah, scratch) == 0,
		   "attention storage: forward failed");
	snprintf(what, sizeof(what), "attention bf16 y N=%d T=%d C=%d H=%d", N, T, C, H);
	storage_check(what, yh, y, ny);
	TEST_CHECK(test_same_bits("attention bf16 y: lse", l2, lse, nl), "%s: lse differs", what);
	/* qkv stored in bf16 (x_bf16): forward and backward give the fp32 qkv's bits (each head's q, k, v
	 * were rounded so); negative control: one step in qkv changes y */
	uint16_t *qh = malloc(nq * 2);
	float *yq = malloc(ny * 4), *gq = malloc(nq * 4);
	if (qh && yq && gq) {
		dnn_attention_args ax = a;
		ax.x_bf16 = 1;
		dnn_bf16_convert(qh, qkv, nq);
		snprintf(what, sizeof(what), "attention bf16 qkv N=%d T=%d C=%d H=%d", N, T, C, H);
		TEST_CHECK(dnn_attention_forward_cpu(yq, l2, qh, &ax, scratch) == 0 && test_same_bits(what, yq, y, ny),
			   "%s: forward: other bits than the fp32 qkv", what);
		for (size_t i = 0; i < nq; i++)
			g1[i] = gq[i] = NAN;
		TEST_CHECK(dnn_attention_backward_cpu(gq, qh, y, dy, lse, &ax, scratch) == 0 &&
				   dnn_attention_backward_cpu(g1, qkv, y, dy, lse, &a, scratch) == 0 &&
				   test_same_bits(what, gq, g1, nq),
			   "%s: backward: other bits than the fp32 qkv", what);
		qh[2 * C]++; /* v of token 0, head 0: every query of the head sees it (token 0's q would not do:
			      * a single key's softmax is 1 whatever the score) */
		dnn_attention_forward_cpu(yq, l2, qh, &ax, scratch);
		TEST_CHECK(memcmp(yq, y, ny * 4) != 0,
			   "attention storage: negative control: a changed bf16 qkv gave the same y, so the check "
			   "tests nothing");
	} else {
		TEST_CHECK(0, "attention storage: out of memory");
	}
	free(qh), free(yq), free(gq);
	for (size_t i = 0; i < ny; i++)
		yw[i] = dnn_bf16_to_f32(yh[i]);
	TEST_CHECK(dnn_attention_backward_cpu(g0, qkv, yh, dy, lse, &ah, scratch) == 0 &&
			   dnn_attention_backward_cpu(g1, qkv, yw, dy, lse, &a, scratch) == 0 &&
			   dnn_attention_backward_cpu(g2, qkv, y, dy, lse, &a, scratch) == 0,
		   "attention storage: backward failed");
	snprintf(what, sizeof(what), "attention bwd reading bf16 y N=%d T=%d C=%d H=%d", N, T, C, H);
	TEST_CHECK(test_same_bits(what, g0, g1, nq), "%s: other bits than the widened fp32 y", what);
	/* the bound against the unrounded y */
	double emax = 0, qkmax = 0, gmax = 0, dmax = 0;
	const double scale = 1.0 / sqrt((double)D);
	for (size_t i = 0; i < nq; i++) {
		gmax = fmax(gmax, fabs(g2[i]));
		if (i % (3 * (size_t)C) < 2 * (size_t)C) /* q and k, not v */
			qkmax = fmax(qkmax, fabs(qkv[i]));
	}
	for (int n = 0; n < N; n++)
		for (int h = 0; h < H; h++)
			for (int t = 0; t < T; t++) {
				const size_t o = ((size_t)n * T + t) * C + (size_t)h * D;
				double e = 0, amax = 0;
				for (int d = 0; d < D; d++)
					e += fabs((double)dy[o + d] * y[o + d]);
				emax = fmax(emax, ldexp(e, -8) + 2 * D * ldexp(e, -24));
				const float *q = qkv + ((size_t)n * T + t) * 3 * C + (size_t)h * D;
				for (int s2 = 0; s2 <= t; s2++) {
					const float *k = qkv + ((size_t)n * T + s2) * 3 * C + C + (size_t)h * D;
					double A = 0;
					for (int d = 0; d < D; d++)
						A += fabs((double)q[d] * k[d]);
					amax = fmax(amax, A * scale);
				}
				dmax = fmax(dmax, g16(D) * amax);
			}
	const double tolb = 6 * (exp(2 * dmax) - 1 + 2 * g16(T)) * gmax + 1e-5;
	const double tol = scale * T * emax * qkmax + 2 * tolb, tol32 = 1e-5 * fmax(1.0, gmax);
	snprintf(what, sizeof(what), "attention bwd bf16 y vs fp32 y N=%d T=%d C=%d H=%d", N, T, C, H);
	check_pair(what, g0, g2, NULL, tol, tol32, 0.0, nq);
	/* negative control of the same-bits check: one y element one bf16 step away */
	yh[0]++;
	dnn_attention_backward_cpu(g1, qkv, yh, dy, lse, &ah, scratch);
	TEST_CHECK(memcmp(g1, g0, nq * 4) != 0,
		   "attention storage: negative control: a changed bf16 y gave the same dqkv, so the check tests "
		   "nothing");
	ah.bf16 = 0; /* y_bf16 without the bf16 GEMMs is refused */
	TEST_CHECK(dnn_attention_forward_cpu(yh, l2, qkv, &ah, scratch) == -1 &&
			   dnn_attention_backward_cpu(g1, qkv, yh, dy, lse, &ah, scratch) == -1,
		   "attention storage: y_bf16 without bf16 was not refused");
out:
	free(qkv), free(dy), free(y), free(yw), free(lse), free(l2), free(g0), free(g1), free(g2), free(scratch);
	free(yh);
}

static void attention_all(void)
{
	test_rng_seed(4514);
	attention_storage_case(2, 37, 24, 3);   /* ragged tiles, D = 8 */
	attention_storage_case(2, 128, 128, 4); /* gpt-nano's head: T = 128, D = 32 */
	test_rng_seed(4502);
	attention_case(2, 37, 24, 3, 1.0f);   /* one ragged tile, D = 8 */
	attention_case(2, 67, 15, 3, 1.0f);   /* D = 5 and T odd: the pairs' pad row and column */
	attention_case(1, 130, 64, 2, 1.0f);  /* three query tiles, the last ragged; D = 32 as gpt-nano */
	attention_case(1, 128, 128, 2, 2.0f); /* D = 64 as GPT-2, larger scores */
}

void h_extra_attention_bf16(void) { each_path(attention_all); }

/* ------------------------------------------------------------------ conv2d
 *
 * Every CPU path of conv2d (im2col + GEMM, direct, Winograd F(2x2) and F(4x4)) in bf16 against the
 * same path in fp32 (the algorithm forced through a->algo), forward, backward data (=, +=) and
 * backward filter (+=).
 *
 * im2col and direct: each output is a sum of K products (forward C R S, backward data K R S,
 * filter N P Q): the GEMM bound above, (g16(K) + g32(K)) S per element, S the fp32 im2col kernel on
 * |x|, |w| (plus |dx0| or |dw0| for the accumulating forms).
 *
 * Winograd rounds the transformed operands U[xi] = (G g G^T)[xi] and V[xi] = (B^T d B)[xi] (not x
 * and w): its GEMM M[xi] = sum_c U[xi] V[xi] is then within g16(C) sum_c |U[xi]| |V[xi]|, and the
 * output transform Y = A^T M A adds these errors with the weights |A^T| (x) |A^T|, so per output o
 *     |y_bf16 - y_exact| <= g16(C) T_o,  T_o = sum_xi (|A^T| (x) |A^T|)[o, xi] sum_c |U[xi]| |V[xi]|
 * with U, V the exact transforms (computed here in double). The fp32 transforms (both kernels
 * compute them) add rounding errors relative to the same sum taken through the absolute matrices,
 * Tbar_o (|G|, |B^T|, |A^T| in place of G, B^T, A^T): each entry passes at most 6 (m + 2) + C
 * roundings (two passes of m + 2 terms in each of the three transforms, the C-term sum), so each
 * kernel is within g32(6 (m + 2) + C) Tbar_o of y_exact. The check per element:
 *     |y_bf16 - y_fp32| <= g16(C) T_o + 2 g32(6 (m + 2) + C) Tbar_o   (+ the |dx0| term of +=),
 * and the negative control is the fp32 kernel's part alone, 2 g32(6 (m + 2) + C) Tbar_o. The
 * matrices' norms say why the transforms multiply the operand error and why the bound is taken per
 * element rather than from x and w: the sums sum_t |G[xi, t]| times sum_j |B^T[xi, j]| weighted by
 * |A^T[o, xi]|, at the worst o, are 8 in 1-D for F(2, 3) and 29.6 for our F(4, 3) (64 and 876 in
 * 2-D), against 3 (9) for a direct sum of |w| |d| over the taps: a bound from max |w| max |d| would
 * be 7x (F(2x2)) and 97x (F(4x4)) looser than im2col's, F(4x4)'s above 1 (2 u 876: useless),
 * whereas T_o keeps the cancellations that the transforms make. The weight gradient (F(2x2) only) rounds
 * D[xi] = (A dy A^T)[xi] and V[xi] and sums over the N tiles t of the chunk: dU[xi] within
 * g16(Nt) sum_t |D[xi]| |V[xi]|, taken to dw by G^T dU G: T_rs = sum_xi (|G^T| (x) |G^T|)[rs, xi]
 * sum_t |D[xi]| |V[xi]|, the fp32 part g32(6 (m + 2) + Nt) Tbar likewise. */

/* F(m x m, 3 x 3)'s matrices, a = m + 2: A^T (m, a), G (a, 3), B^T (a, a); F(2x2) Lavin and Gray's. */
static const double AT2[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
static const double G2[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
static const double BT2[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
/* F(4x4)'s points 0, 1, -1, 1/2, -2, infinity, scaled as codelets/conv2d_winograd_f4.c's kernels */
static const double AT4[4][6] = {{1, 1, 1, 8, 1, 0}, {0, 1, -1, 4, -2, 0}, {0, 1, 1, 2, 4, 0}, {0, 1, -1, 1, -8, 1}};
static const double G4[6][3] = {{1 / 2., 0, 0},		   {1 / 6., 1 / 6., 1 / 6.},   {1 / 6., -1 / 6., 1 / 6.},
				{2 / 15., 1 / 15., 1 / 30.}, {1 / 30., -1 / 15., 2 / 15.}, {0, 0, 1 / 2.}};
static const double BT4[6][6] = {{2, -3, -4, 3, 2, 0},	{0, -2, 1, 5, 2, 0},   {0, -2, 5, -1, -2, 0},
				 {0, 2, 1, -2, -1, 0}, {0, 1, -2, -1, 2, 0}, {0, 2, -3, -4, 3, 2}};

typedef struct {
	int m, a;
	double at[4][6], g[6][3], bt[6][6];
} wino_mats;

static wino_mats wino_mats_of(int m)
{
	wino_mats w = {.m = m, .a = m + 2};
	for (int i = 0; i < m; i++)
		for (int j = 0; j < m + 2; j++)
			w.at[i][j] = m == 2 ? AT2[i][j] : AT4[i][j];
	for (int i = 0; i < m + 2; i++) {
		for (int j = 0; j < 3; j++)
			w.g[i][j] = m == 2 ? G2[i][j] : G4[i][j];
		for (int j = 0; j < m + 2; j++)
			w.bt[i][j] = m == 2 ? BT2[i][j] : BT4[i][j];
	}
	return w;
}

/* out (lr, rr) = L (lr, lc) in (lc, lc) R^T, R (rr, lc); L and R at row stride 6, in and out
 * packed; with the absolute values of L, in and R when ab. */
static void sandwich(double *out, const double *L, int lr, int lc, const double *in, const double *R, int rr, int ab)
{
	double t[6][6]; // L in, (lr, lc)
	for (int i = 0; i < lr; i++)
		for (int j = 0; j < lc; j++) {
			double v = 0;
			for (int k = 0; k < lc; k++) {
				const double l = L[i * 6 + k], x = in[k * lc + j];
				v += ab ? fabs(l) * fabs(x) : l * x;
			}
			t[i][j] = v;
		}
	for (int i = 0; i < lr; i++)
		for (int j = 0; j < rr; j++) {
			double v = 0;
			for (int k = 0; k < lc; k++) {
				const double r = R[j * 6 + k];
				v += ab ? t[i][k] * fabs(r) : t[i][k] * r;
			}
			out[i * rr + j] = v;
		}
}

/* d (h, w) = the patch of img (H, W) from row r0, column c0 on, zero outside the image. */
static void patch(double *d, const float *img, int H, int W, int r0, int c0, int h, int w)
{
	for (int i = 0; i < h; i++)
		for (int j = 0; j < w; j++) {
			const int r = r0 + i, c = c0 + j;
			d[i * w + j] = r >= 0 && r < H && c >= 0 && c < W ? img[(size_t)r * W + c] : 0.0;
		}
}

/* T, Tbar (N, K, P, Q) of the Winograd forward y = conv(x, w) on m x m tiles, pad p (>= 0):
 * x (N, C, H, W), w (K, C, 3, 3), P = H + 2 p - 2, Q = W + 2 p - 2. Returns -1 out of memory. */
static int wino_fwd_terms(double *T, double *Tb, const float *x, const float *w, int N, int C, int H, int W, int K,
			  int pad, int m)
{
	const wino_mats M = wino_mats_of(m);
	const int a = M.a, P = H + 2 * pad - 2, Q = W + 2 * pad - 2, th = (P + m - 1) / m, tw = (Q + m - 1) / m;
	const int aa = a * a;
	double gm[6 * 6], bm[6 * 6], atm[6 * 6]; // G, B^T, A^T at row stride 6
	for (int i = 0; i < 36; i++)
		gm[i] = bm[i] = atm[i] = 0;
	for (int i = 0; i < a; i++)
		for (int j = 0; j < 3; j++)
			gm[i * 6 + j] = M.g[i][j];
	for (int i = 0; i < a; i++)
		for (int j = 0; j < a; j++)
			bm[i * 6 + j] = M.bt[i][j];
	for (int i = 0; i < m; i++)
		for (int j = 0; j < a; j++)
			atm[i * 6 + j] = M.at[i][j];
	double *U = malloc((size_t)K * C * aa * 2 * sizeof(double)); // U, Ubar per (k, c)
	double *V = malloc((size_t)C * aa * 2 * sizeof(double));     // V, Vbar of one tile per c
	double *S = malloc((size_t)K * aa * 2 * sizeof(double));
	if (!U || !V || !S) {
		free(U), free(V), free(S);
		return -1;
	}
	for (int k = 0; k < K; k++)
		for (int c = 0; c < C; c++) {
			double g[9];
			for (int i = 0; i < 9; i++)
				g[i] = w[((size_t)k * C + c) * 9 + i];
			/* U = G g G^T: sandwich's in is (lc, lc) = (3, 3), out (a, a) */
			double *u = U + ((size_t)k * C + c) * aa * 2;
			sandwich(u, gm, a, 3, g, gm, a, 0);
			sandwich(u + aa, gm, a, 3, g, gm, a, 1);
		}
	for (int n = 0; n < N; n++)
		for (int ti = 0; ti < th; ti++)
			for (int tj = 0; tj < tw; tj++) {
				for (int c = 0; c < C; c++) {
					double d[36];
					const float *img = x + ((size_t)n * C + c) * H * W;
					patch(d, img, H, W, ti * m - pad, tj * m - pad, a, a);
					sandwich(V + (size_t)c * aa * 2, bm, a, a, d, bm, a, 0);
					sandwich(V + (size_t)c * aa * 2 + aa, bm, a, a, d, bm, a, 1);
				}
				for (int k = 0; k < K; k++) {
					double *s = S + (size_t)k * aa * 2;
					for (int i = 0; i < 2 * aa; i++)
						s[i] = 0;
					for (int c = 0; c < C; c++) {
						const double *u = U + ((size_t)k * C + c) * aa * 2;
						const double *v = V + (size_t)c * aa * 2;
						for (int i = 0; i < aa; i++) {
							s[i] += fabs(u[i]) * fabs(v[i]);
							s[aa + i] += u[aa + i] * v[aa + i];
						}
					}
					double t[16], tb[16]; // (m, m) = |A^T| s |A^T|^T
					sandwich(t, atm, m, a, s, atm, m, 1);
					sandwich(tb, atm, m, a, s + aa, atm, m, 1);
					for (int i = 0; i < m; i++)
						for (int j = 0; j < m; j++) {
							const int p = ti * m + i, q = tj * m + j;
							if (p < P && q < Q) {
								const size_t o = (((size_t)n * K + k) * P + p) * Q + q;
								T[o] = t[i * m + j], Tb[o] = tb[i * m + j];
							}
						}
				}
			}
	free(U), free(V), free(S);
	return 0;
}

/* T, Tbar (K, C, 3, 3) of the Winograd F(2x2) weight gradient dw = sum over n, tiles of
 * G^T (D .* V) G, D = A dy_tile A^T (A = (A^T)^T), V = B^T d B; Nt (out) the tiles summed. */
static int wino_filter_terms(double *T, double *Tb, int *Nt, const float *x, const float *dy, int N, int C, int H,
			     int W, int K, int pad)
{
	const wino_mats M = wino_mats_of(2);
	const int a = 4, m = 2, P = H + 2 * pad - 2, Q = W + 2 * pad - 2, th = (P + 1) / 2, tw = (Q + 1) / 2;
	double am[36] = {0}, bm[36] = {0}, gtm[36] = {0}; // A (a, m), B^T, G^T (3, a) at row stride 6
	for (int i = 0; i < a; i++)
		for (int j = 0; j < m; j++)
			am[i * 6 + j] = M.at[j][i];
	for (int i = 0; i < a; i++)
		for (int j = 0; j < a; j++)
			bm[i * 6 + j] = M.bt[i][j];
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < a; j++)
			gtm[i * 6 + j] = M.g[j][i];
	double *S = calloc((size_t)K * C * 32, sizeof(double)); // sum |D||V|, sum Dbar Vbar per (k, c)
	double *V = malloc((size_t)C * 32 * sizeof(double)), *D = malloc((size_t)K * 32 * sizeof(double));
	if (!S || !V || !D) {
		free(S), free(V), free(D);
		return -1;
	}
	for (int n = 0; n < N; n++)
		for (int ti = 0; ti < th; ti++)
			for (int tj = 0; tj < tw; tj++) {
				for (int c = 0; c < C; c++) {
					double d[16];
					const float *img = x + ((size_t)n * C + c) * H * W;
					patch(d, img, H, W, ti * m - pad, tj * m - pad, a, a);
					sandwich(V + (size_t)c * 32, bm, a, a, d, bm, a, 0);
					sandwich(V + (size_t)c * 32 + 16, bm, a, a, d, bm, a, 1);
				}
				for (int k = 0; k < K; k++) {
					double e[4];
					patch(e, dy + ((size_t)n * K + k) * P * Q, P, Q, ti * m, tj * m, m, m);
					sandwich(D + (size_t)k * 32, am, a, m, e, am, a, 0);
					sandwich(D + (size_t)k * 32 + 16, am, a, m, e, am, a, 1);
				}
				for (int k = 0; k < K; k++)
					for (int c = 0; c < C; c++) {
						double *s = S + ((size_t)k * C + c) * 32;
						const double *dd = D + (size_t)k * 32, *v = V + (size_t)c * 32;
						for (int i = 0; i < 16; i++) {
							s[i] += fabs(dd[i]) * fabs(v[i]);
							s[16 + i] += dd[16 + i] * v[16 + i];
						}
					}
			}
	for (size_t kc = 0; kc < (size_t)K * C; kc++) {
		sandwich(T + kc * 9, gtm, 3, a, S + kc * 32, gtm, 3, 1);
		sandwich(Tb + kc * 9, gtm, 3, a, S + kc * 32 + 16, gtm, 3, 1);
	}
	*Nt = N * th * tw;
	free(S), free(V), free(D);
	return 0;
}

static const char *pass_name[3] = {"fwd", "bwd data", "bwd filter"};

/* Checks one pass: b16 against f32 with the bound (per element: g16 terms + fp32 terms) and the
 * negative control (the fp32 terms alone). Winograd: T, Tb; GEMM: S (tol16 S, tol32 S). */
static void conv_check(const char *what, const float *b16, const float *f32, const double *T, const double *Tb,
		       double c16, double c32, size_t n)
{
	float *lim = malloc(n * sizeof(float)), *lim32 = malloc(n * sizeof(float));
	if (!lim || !lim32) {
		TEST_CHECK(0, "conv bf16: out of memory");
		free(lim), free(lim32);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		lim[i] = (float)(c16 * T[i] + c32 * Tb[i]);
		lim32[i] = (float)(c32 * Tb[i]);
	}
	TEST_CHECK(test_count_outside(what, b16, f32, lim, 1.0, 0.0, n, 1) == 0,
		   "%s: bf16 against fp32 outside the bound", what);
	TEST_CHECK(test_count_outside(what, b16, f32, lim32, 1.0, 0.0, n, 0) > 0,
		   "%s: negative control: bf16 passed the fp32 tolerance, so the bound tests nothing", what);
	free(lim), free(lim32);
}

/* One conv shape under one forced algorithm: the three passes, bf16 against fp32. */
static void conv_case(int N, int C, int H, int W, int K, int R, int stride, int pad, int algo, int accumulate)
{
	dnn_conv2d_args a32 = {.N = N, .C = C, .H = H, .W = W, .K = K, .R = R, .S = R, .stride = stride, .pad = pad,
			       .dilation = 1, .accumulate_dx = accumulate, .algo = algo};
	if (dnn_conv2d_args_finish(&a32) != 0) {
		TEST_CHECK(0, "conv bf16: bad shape");
		return;
	}
	dnn_conv2d_args a16 = a32, aS = a32;
	a16.bf16 = 1;
	/* oneDNN's conv (bf16 only) against fp32 im2col: both GEMM-like sums of the same products, the GEMM bound */
	if (algo == DNN_CONV_ALGO_ONEDNN)
		a32.algo = DNN_CONV_ALGO_IM2COL;
	aS.algo = DNN_CONV_ALGO_IM2COL; // S = sum |a||b|: a GEMM on absolute values, not Winograd's
	const int P = a32.P, Q = a32.Q;
	const size_t nx = (size_t)N * C * H * W, nw = (size_t)K * C * R * R, ny = (size_t)N * K * P * Q;
	const size_t nmax = nx > ny ? (nx > nw ? nx : nw) : (ny > nw ? ny : nw);
	float *x = fill(nx, -1, 1), *w = fill(nw, -1, 1), *dy = fill(ny, -1, 1), *dx0 = fill(nx, -1, 1);
	float *dw0 = fill(nw, -0.1f, 0.1f), *o16 = malloc(nmax * 4), *o32 = malloc(nmax * 4), *os = malloc(nmax * 4);
	float *ax = malloc(nx * 4), *aw = malloc(nw * 4), *ady = malloc(ny * 4), *w2 = malloc(nw * 4);
	double *T = malloc(nmax * sizeof(double)), *Tb = malloc(nmax * sizeof(double));
	if (!x || !w || !dy || !dx0 || !dw0 || !o16 || !o32 || !os || !ax || !aw || !ady || !w2 || !T || !Tb) {
		TEST_CHECK(0, "conv bf16: out of memory");
		goto out;
	}
	fabs_copy(ax, x, nx), fabs_copy(aw, w, nw), fabs_copy(ady, dy, ny);
	static const char *algos[] = {"auto", "im2col", "winograd", "winograd4", "onednn"};
	for (int pass = 0; pass < 3; pass++) {
		const int m = dnn_conv2d_cpu_winograd_tile(&a32, pass);
		if (algo == DNN_CONV_ALGO_ONEDNN)
			TEST_CHECK(dnn_conv2d_cpu_uses_onednn(&a16, pass) && !dnn_conv2d_cpu_winograd_tile(&a16, pass),
				   "conv bf16: DNN_CONV_ALGO_ONEDNN does not run oneDNN's conv");
		const size_t n = pass == 0 ? ny : pass == 1 ? nx : nw;
		char what[128];
		snprintf(what, sizeof(what), "conv bf16 %s N=%d C%d %dx%d K%d k%d s%d p%d%s [%s: %s]", pass_name[pass],
			 N, C, H, W, K, R, stride, pad, pass == 1 && accumulate ? " +=" : "", algos[algo],
			 m ? (m == 2 ? "F(2x2)" : "F(4x4)") : dnn_conv2d_cpu_uses_onednn(&a16, pass) ? "oneDNN conv" : "GEMM/direct");
		for (int rep = 0; rep < 2; rep++) { // rep 1: the same bf16 call again, into os
			float *out = rep ? os : o16;
			if (pass == 0) {
				dnn_conv2d_forward_cpu(out, x, w, &a16);
				if (!rep)
					dnn_conv2d_forward_cpu(o32, x, w, &a32);
			} else if (pass == 1) {
				memcpy(out, dx0, nx * 4);
				dnn_conv2d_backward_data_cpu(out, dy, w, &a16);
				if (!rep) {
					memcpy(o32, dx0, nx * 4);
					dnn_conv2d_backward_data_cpu(o32, dy, w, &a32);
				}
			} else {
				memcpy(out, dw0, nw * 4);
				dnn_conv2d_backward_filter_cpu(out, x, dy, &a16);
				if (!rep) {
					memcpy(o32, dw0, nw * 4);
					dnn_conv2d_backward_filter_cpu(o32, x, dy, &a32);
				}
			}
		}
		TEST_CHECK(test_same_bits(what, os, o16, n), "%s: a second bf16 run gave other bits", what);
		if (!m) { /* GEMM bound: S from |x|, |w|, |dy| (+ |dx0|, |dw0|) on im2col fp32 */
			int terms;
			if (pass == 0) {
				dnn_conv2d_forward_cpu(os, ax, aw, &aS), terms = C * R * R;
			} else if (pass == 1) {
				fabs_copy(os, dx0, nx);
				dnn_conv2d_backward_data_cpu(os, ady, aw, &aS), terms = K * R * R + 1;
			} else {
				fabs_copy(os, dw0, nw);
				dnn_conv2d_backward_filter_cpu(os, ax, ady, &aS), terms = N * P * Q + 1;
			}
			for (size_t i = 0; i < n; i++)
				T[i] = Tb[i] = os[i];
			conv_check(what, o16, o32, T, Tb, g16(terms), g32(terms), n);
			continue;
		}
		int sum_terms = C;
		if (pass == 0) {
			TEST_CHECK(wino_fwd_terms(T, Tb, x, w, N, C, H, W, K, pad, m) == 0, "conv bf16: out of memory");
		} else if (pass == 1) { /* dx = conv(dy, w'), w' (C, K, 3, 3) flipped, pad 2 - pad */
			for (int k = 0; k < K; k++)
				for (int c = 0; c < C; c++)
					for (int i = 0; i < 9; i++)
						w2[((size_t)c * K + k) * 9 + 8 - i] = w[((size_t)k * C + c) * 9 + i];
			TEST_CHECK(wino_fwd_terms(T, Tb, dy, w2, N, K, P, Q, C, 2 - pad, m) == 0,
				   "conv bf16: out of memory");
			sum_terms = K;
			if (accumulate)
				for (size_t i = 0; i < nx; i++)
					Tb[i] += fabs(dx0[i]);
		} else {
			TEST_CHECK(wino_filter_terms(T, Tb, &sum_terms, x, dy, N, C, H, W, K, pad) == 0,
				   "conv bf16: out of memory");
			for (size_t i = 0; i < nw; i++)
				Tb[i] += fabs(dw0[i]);
		}
		const int rnd = 6 * (m + 2) + sum_terms;
		conv_check(what, o16, o32, T, Tb, g16(sum_terms), 2 * g32(rnd), n);
	}
out:
	free(x), free(w), free(dy), free(dx0), free(dw0), free(o16), free(o32), free(os);
	free(ax), free(aw), free(ady), free(w2), free(T), free(Tb);
}

static void conv_all(void)
{
	test_rng_seed(4504);
	/* im2col: 3x3 (backward data as its flipped forward), stride 2, 1x1 with and without stride, 7x7 */
	conv_case(2, 16, 12, 13, 16, 3, 1, 1, DNN_CONV_ALGO_IM2COL, 0);
	conv_case(3, 16, 16, 16, 32, 3, 2, 1, DNN_CONV_ALGO_IM2COL, 1);
	conv_case(2, 16, 8, 8, 32, 1, 2, 0, DNN_CONV_ALGO_IM2COL, 0);
	conv_case(2, 8, 7, 9, 12, 1, 1, 0, DNN_CONV_ALGO_IM2COL, 1);
	conv_case(2, 3, 19, 17, 8, 7, 2, 3, DNN_CONV_ALGO_IM2COL, 0);
	/* direct (auto on LeNet-5's convs: C K <= 128; in bf16 auto runs the second, C6 5x5, through oneDNN's conv,
	 * conv2d_algo.c's ONEDNN_CONV_RULE, where the oneDNN path is on). One image for the stem: its weight gradient sums
	 * N P Q = 784 products per element, and at 4 images (3136) fp32's worst-case bound 2 g32(K) S
	 * grows past bf16's actual error (random roundings grow as sqrt(K)): the negative control
	 * passed (0 of 150 outside, worst 0.9x) */
	conv_case(1, 1, 28, 28, 6, 5, 1, 2, DNN_CONV_ALGO_AUTO, 0);
	conv_case(3, 6, 14, 14, 16, 5, 1, 0, DNN_CONV_ALGO_AUTO, 0);
	/* Winograd F(2x2): ResNet stage shapes, a partial tile, grouped images, the RGB stem */
	conv_case(2, 16, 16, 16, 16, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD, 0);
	conv_case(5, 32, 7, 7, 24, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD, 1);
	conv_case(2, 3, 16, 16, 16, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD, 0);
	/* the weight gradient's vdpbf16ps kernel at its edges: 13 output and 6 input channels (register
	 * blocks of 1 and 2 rows), chunks of 49 and 75 tiles (packed tails of 24 and 16 tiles, a masked
	 * last step of 12 and 8 pairs) */
	conv_case(1, 6, 14, 14, 13, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD, 0);
	conv_case(3, 6, 10, 10, 13, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD, 0);
	/* Winograd F(4x4) (forward and backward data; the weight gradient F(2x2)): tile rows,
	 * row groups, strips, partial tiles */
	conv_case(1, 16, 32, 32, 16, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD4, 0);
	conv_case(3, 32, 8, 8, 32, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD4, 0);
	conv_case(2, 16, 24, 24, 16, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD4, 1);
	conv_case(2, 32, 14, 14, 32, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD4, 0);
	/* oneDNN's bf16 conv primitives (the oneDNN path only: without it DNN_CONV_ALGO_ONEDNN is auto, whose Winograd
	 * the GEMM bound does not cover): ResNet's 3x3 stride 2 and 1x1 stride-2 shortcut, the 8x8 stage, the RGB
	 * stem, channel counts off oneDNN's 16-channel blocks on a non-square image, LeNet-5's unpadded 5x5 */
	if (dnn_gemm_bf16_simd() && dnn_cpu_has_bf16()) {
		conv_case(2, 16, 16, 16, 32, 3, 2, 1, DNN_CONV_ALGO_ONEDNN, 1);
		conv_case(2, 16, 14, 14, 32, 1, 2, 0, DNN_CONV_ALGO_ONEDNN, 0);
		conv_case(2, 32, 8, 8, 32, 3, 1, 1, DNN_CONV_ALGO_ONEDNN, 1);
		conv_case(2, 3, 16, 16, 16, 3, 1, 1, DNN_CONV_ALGO_ONEDNN, 0);
		conv_case(2, 24, 7, 9, 20, 3, 1, 1, DNN_CONV_ALGO_ONEDNN, 1);
		conv_case(1, 6, 14, 14, 16, 5, 1, 0, DNN_CONV_ALGO_ONEDNN, 0);
	}
}

/* F(2x2)'s bf16 forward (and backward data, its flipped forward) writes V's channel pairs from its input
 * transform (input_row_cpairs) instead of fp32 V packed by dnn_wino_gemms: the same fp32 values rounded once by the
 * same instruction, so the claim is the same bits as the former path, kept as the control (dnn_wino_set_vpairs(0)).
 * Compared bit for bit; negative control: x (or dy) one bf16 step away at one element must change the pairs path's
 * result (the comparison sees a change of one rounded operand). Shapes: odd C (a last pair with a zero half), tile
 * rows of 15 and 18 tiles (a masked last vector; two vectors), grouped images with partial tiles, one image cut into
 * several chunks, += in backward data. */
static void vpairs_case(int N, int C, int H, int W, int K, int accumulate)
{
	dnn_conv2d_args a = {.N = N, .C = C, .H = H, .W = W, .K = K, .R = 3, .S = 3, .stride = 1, .pad = 1,
			     .dilation = 1, .accumulate_dx = accumulate, .algo = DNN_CONV_ALGO_WINOGRAD, .bf16 = 1};
	if (dnn_conv2d_args_finish(&a) != 0) {
		TEST_CHECK(0, "vpairs: bad shape");
		return;
	}
	const size_t nx = (size_t)N * C * H * W, nw = (size_t)K * C * 9, ny = (size_t)N * K * a.P * a.Q;
	float *x = fill(nx, -1, 1), *w = fill(nw, -1, 1), *dy = fill(ny, -1, 1), *dx0 = fill(nx, -1, 1);
	float *got = malloc((nx > ny ? nx : ny) * 4), *want = malloc((nx > ny ? nx : ny) * 4);
	if (!x || !w || !dy || !dx0 || !got || !want) {
		TEST_CHECK(0, "vpairs: out of memory");
		goto out;
	}
	for (int pass = 0; pass < 2; pass++) {
		const size_t n = pass ? nx : ny;
		float *in = pass ? dy : x;
		char what[128];
		snprintf(what, sizeof(what), "F(2x2) bf16 V pairs %s N=%d C%d %dx%d K%d%s", pass_name[pass], N, C, H, W,
			 K, pass && accumulate ? " +=" : "");
		TEST_CHECK(dnn_conv2d_cpu_winograd_tile(&a, pass) == 2, "%s: not F(2x2)", what);
		float *res[2] = {want, got}; // [0]: the former path (fp32 V, packed), [1]: the pairs
		for (int vp = 0; vp < 2; vp++) {
			dnn_wino_set_vpairs(vp);
			if (pass)
				memcpy(res[vp], dx0, nx * 4), dnn_conv2d_backward_data_cpu(res[vp], dy, w, &a);
			else
				dnn_conv2d_forward_cpu(res[vp], x, w, &a);
		}
		TEST_CHECK(test_same_bits(what, got, want, n), "%s: not the packed fp32 V's bits", what);
		/* negative control: one input element a bf16 step up (2^-8 relative: rounds to another bf16 value) */
		const size_t j = (pass ? ny : nx) / 2;
		const float keep = in[j];
		in[j] = keep + ldexpf(fabsf(keep) > 0.0f ? fabsf(keep) : 1.0f, -7);
		if (pass)
			memcpy(got, dx0, nx * 4), dnn_conv2d_backward_data_cpu(got, dy, w, &a);
		else
			dnn_conv2d_forward_cpu(got, x, w, &a);
		in[j] = keep;
		size_t diff = 0;
		for (size_t i = 0; i < n; i++)
			diff += memcmp(&got[i], &want[i], 4) != 0;
		printf("  %s: negative control: one input element a bf16 step away changes %zu of %zu\n", what, diff,
		       n);
		TEST_CHECK(diff > 0, "%s: negative control: a changed input gave the same bits", what);
	}
out:
	dnn_wino_set_vpairs(1);
	free(x), free(w), free(dy), free(dx0), free(got), free(want);
}

/* F(2x2)'s bf16 weight gradient writes D's tile pairs 32 tiles at a time (grad_rows_pairs) where dy's rows allow
 * (P even, Q = 2 tw, tw 4, 8 or a multiple of 16) instead of one tile row at a time (grad_row_pairs): the same fp32
 * values rounded by the same rounding, so the claim is the same bits as the former path, kept as the control
 * (dnn_wino_set_dgroups(0)). Compared bit for bit, dw += onto a nonzero dw; negative control: dy one bf16 step away
 * at one element must change the result. Shapes: 8x8 (4 tile rows per vector) with 8 and 5 images per chunk, 16x16
 * (2 tile rows per vector, an odd chunk: a last vector of 16 tiles), 32x32 cut into chunks of tile rows, 64x64 (32
 * tiles a row), and 14x14 (tw 7: the former path in both) as the shape the groups leave alone. */
static void dgroups_case(int N, int C, int H, int W, int K)
{
	dnn_conv2d_args a = {.N = N, .C = C, .H = H, .W = W, .K = K, .R = 3, .S = 3, .stride = 1, .pad = 1,
			     .dilation = 1, .algo = DNN_CONV_ALGO_WINOGRAD, .bf16 = 1};
	if (dnn_conv2d_args_finish(&a) != 0) {
		TEST_CHECK(0, "dgroups: bad shape");
		return;
	}
	const size_t nx = (size_t)N * C * H * W, nw = (size_t)K * C * 9, ny = (size_t)N * K * a.P * a.Q;
	float *x = fill(nx, -1, 1), *dy = fill(ny, -1, 1), *dw0 = fill(nw, -1, 1);
	float *got = malloc(nw * 4), *want = malloc(nw * 4);
	if (!x || !dy || !dw0 || !got || !want) {
		TEST_CHECK(0, "dgroups: out of memory");
		goto out;
	}
	char what[128];
	snprintf(what, sizeof(what), "F(2x2) bf16 D groups bwd filter N=%d C%d %dx%d K%d", N, C, H, W, K);
	TEST_CHECK(dnn_conv2d_cpu_winograd_tile(&a, 2) == 2, "%s: not F(2x2)", what);
	float *res[2] = {want, got}; // [0]: the former path (a tile row at a time), [1]: the groups
	for (int dg = 0; dg < 2; dg++) {
		dnn_wino_set_dgroups(dg);
		memcpy(res[dg], dw0, nw * 4), dnn_conv2d_backward_filter_cpu(res[dg], x, dy, &a);
	}
	TEST_CHECK(test_same_bits(what, got, want, nw), "%s: not the former path's bits", what);
	/* negative control: one dy element a bf16 step up (2^-7 relative: rounds to another bf16 value) */
	const size_t j = ny / 2;
	const float keep = dy[j];
	dy[j] = keep + ldexpf(fabsf(keep) > 0.0f ? fabsf(keep) : 1.0f, -7);
	memcpy(got, dw0, nw * 4), dnn_conv2d_backward_filter_cpu(got, x, dy, &a);
	dy[j] = keep;
	size_t diff = 0;
	for (size_t i = 0; i < nw; i++)
		diff += memcmp(&got[i], &want[i], 4) != 0;
	printf("  %s: negative control: one dy element a bf16 step away changes %zu of %zu\n", what, diff, nw);
	TEST_CHECK(diff > 0, "%s: negative control: a changed dy gave the same bits", what);
out:
	dnn_wino_set_dgroups(1);
	free(x), free(dy), free(dw0), free(got), free(want);
}

/* F(2x2)'s output transform of a bf16 y stores 32 tiles' outputs at a time (output_rows_y_bf16) where the image
 * allows (P even, Q = 2 tw, tw 4, 8 or a multiple of 16) instead of one tile row at a time (output_row_y_bf16): the
 * same fp32 sums plus the same bias, rounded by the same rounding, so the claim is the same bits as the former path,
 * kept as the control (dnn_wino_set_ygroups(0)). Compared bit for bit (y's bf16 values), with and without the bias;
 * negative control: x one bf16 step away at one element must change y. Shapes as dgroups_case's. */
static void ygroups_case(int N, int C, int H, int W, int K, int bias)
{
	dnn_conv2d_args a = {.N = N, .C = C, .H = H, .W = W, .K = K, .R = 3, .S = 3, .stride = 1, .pad = 1,
			     .dilation = 1, .algo = DNN_CONV_ALGO_WINOGRAD, .bf16 = 1, .y_bf16 = 1, .bias = bias};
	if (dnn_conv2d_args_finish(&a) != 0) {
		TEST_CHECK(0, "ygroups: bad shape");
		return;
	}
	const size_t nx = (size_t)N * C * H * W, nw = (size_t)K * C * 9, ny = (size_t)N * K * a.P * a.Q;
	float *x = fill(nx, -1, 1), *w = fill(nw, -1, 1), *b = fill((size_t)K, -1, 1);
	uint16_t *got = malloc(ny * 2), *want = malloc(ny * 2);
	if (!x || !w || !b || !got || !want) {
		TEST_CHECK(0, "ygroups: out of memory");
		goto out;
	}
	char what[128];
	snprintf(what, sizeof(what), "F(2x2) bf16 y groups fwd N=%d C%d %dx%d K%d%s", N, C, H, W, K, bias ? " bias" : "");
	TEST_CHECK(dnn_conv2d_cpu_winograd_tile(&a, 0) == 2, "%s: not F(2x2)", what);
	uint16_t *res[2] = {want, got}; // [0]: the former path (a tile row at a time), [1]: the groups
	for (int yg = 0; yg < 2; yg++) {
		dnn_wino_set_ygroups(yg);
		memset(res[yg], 0xff, ny * 2);
		dnn_conv2d_forward_bias_cpu((float *)(void *)res[yg], x, w, bias ? b : NULL, &a);
	}
	size_t diff = 0;
	for (size_t i = 0; i < ny; i++)
		diff += got[i] != want[i];
	TEST_CHECK(diff == 0, "%s: %zu of %zu bf16 values not the former path's bits", what, diff, ny);
	/* negative control: one x element a bf16 step up (2^-7 relative: rounds to another bf16 value) */
	const size_t j = nx / 2;
	const float keep = x[j];
	x[j] = keep + ldexpf(fabsf(keep) > 0.0f ? fabsf(keep) : 1.0f, -7);
	dnn_conv2d_forward_bias_cpu((float *)(void *)got, x, w, bias ? b : NULL, &a);
	x[j] = keep;
	diff = 0;
	for (size_t i = 0; i < ny; i++)
		diff += got[i] != want[i];
	printf("  %s: negative control: one x element a bf16 step away changes %zu of %zu\n", what, diff, ny);
	TEST_CHECK(diff > 0, "%s: negative control: a changed x gave the same bits", what);
out:
	dnn_wino_set_ygroups(1);
	free(x), free(w), free(b), free(got), free(want);
}

void h_extra_conv_bf16(void)
{
	if (!dnn_cpu_has_bf16())
		printf("  no AVX512_BF16 here: the bf16 checks run the portable path only\n");
	each_path(conv_all);
	if (dnn_cpu_has_bf16() && dnn_wino_avx512()) {
		test_rng_seed(4507);
		vpairs_case(2, 16, 16, 16, 16, 0); /* ResNet's 16x16 stage: 8 tiles a row, whole images per chunk */
		vpairs_case(1, 16, 32, 32, 16, 1); /* the 32x32 stage: one image in several chunks */
		vpairs_case(3, 17, 30, 30, 9, 1);  /* odd C, K (backward data's C); 15 tiles a row: a masked vector */
		vpairs_case(1, 16, 36, 36, 6, 0);  /* 18 tiles a row: two vectors (past 32 columns: the AVX2 split) */
		vpairs_case(5, 32, 7, 7, 24, 1);   /* grouped images, partial tiles */
		dgroups_case(8, 64, 8, 8, 64);     /* ResNet's 8x8 stage: 4 tile rows per vector, whole images per chunk */
		dgroups_case(5, 24, 8, 8, 20);     /* 8x8, 5 images */
		dgroups_case(3, 32, 16, 16, 32);   /* the 16x16 stage: 2 tile rows per vector */
		dgroups_case(1, 16, 18, 16, 16);   /* 9 tile rows: a last tile row alone (grad_row_pairs) */
		dgroups_case(2, 16, 32, 32, 16);   /* the 32x32 stage: chunks of tile rows */
		dgroups_case(1, 8, 64, 64, 8);     /* 32 tiles a row */
		dgroups_case(2, 16, 14, 14, 16);   /* tw 7: left to the former path */
		ygroups_case(8, 64, 8, 8, 64, 0);  /* as dgroups_case's shapes, with and without the bias */
		ygroups_case(5, 24, 8, 8, 20, 1);
		ygroups_case(3, 32, 16, 16, 32, 1);
		ygroups_case(1, 16, 18, 16, 16, 0);
		ygroups_case(2, 16, 32, 32, 16, 1);
		ygroups_case(1, 8, 64, 64, 8, 0);
		ygroups_case(2, 16, 14, 14, 16, 1);
	} else {
		printf("  F(2x2) bf16 V pairs: not run (they need AVX512_BF16 and the AVX-512 Winograd kernels)\n");
	}
}

/* gpu mode: dense's bf16 codelets on the CUDA worker (cublasGemmEx, CUBLAS_COMPUTE_32F_FAST_16BF)
 * against the CPU's fp32 kernels under the same bound, g16(K) + g32(K) times S, and the negative
 * control. Runs only where the harness found a CUDA worker (else its gpu mode exits 77). */
static starpu_data_handle_t reg(float *p, size_t n)
{
	starpu_data_handle_t h;
	starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)p, n, sizeof(float));
	return h;
}

static void dense_gpu_case(int N, int IN, int OUT)
{
	const size_t nx = (size_t)N * IN, nw = (size_t)OUT * IN, ny = (size_t)N * OUT;
	float *x = fill(nx, -1, 1), *w = fill(nw, -1, 1), *b = fill(OUT, -1, 1), *dy = fill(ny, -1, 1);
	float *y = malloc(ny * 4), *y32 = malloc(ny * 4), *ys = malloc(ny * 4), *dx = malloc(nx * 4),
	      *dx32 = malloc(nx * 4);
	float *dxs = malloc(nx * 4), *ax = malloc(nx * 4), *aw = malloc(nw * 4), *ab = malloc(OUT * 4),
	      *ady = malloc(ny * 4);
	if (!x || !w || !b || !dy || !y || !y32 || !ys || !dx || !dx32 || !dxs || !ax || !aw || !ab || !ady) {
		TEST_CHECK(0, "dense bf16 gpu: out of memory");
		goto out;
	}
	fabs_copy(ax, x, nx), fabs_copy(aw, w, nw), fabs_copy(ab, b, OUT), fabs_copy(ady, dy, ny);
	dnn_dense_args a32 = {.N = N, .IN = IN, .OUT = OUT}, a16 = a32;
	a16.bf16 = 1;
	dnn_dense_forward_cpu(y32, x, w, b, &a32), dnn_dense_forward_cpu(ys, ax, aw, ab, &a32);
	dnn_dense_backward_data_cpu(dx32, dy, w, &a32), dnn_dense_backward_data_cpu(dxs, ady, aw, &a32);
	for (size_t i = 0; i < ny; i++)
		y[i] = NAN;
	for (size_t i = 0; i < nx; i++)
		dx[i] = NAN;
	starpu_data_handle_t hx = reg(x, nx), hw = reg(w, nw), hb = reg(b, OUT), hy = reg(y, ny), hdy = reg(dy, ny),
			     hdx = reg(dx, nx);
	struct starpu_data_descr f[] = {{hx, STARPU_R}, {hw, STARPU_R}, {hb, STARPU_R}, {hy, STARPU_W}};
	test_task(&cl_dense_fwd, h_cuda_worker(), &a16, sizeof a16, f, 4, "dense_fwd bf16");
	struct starpu_data_descr d[] = {{hdy, STARPU_R}, {hw, STARPU_R}, {hdx, STARPU_W}};
	test_task(&cl_dense_bwd_data, h_cuda_worker(), &a16, sizeof a16, d, 3, "dense_bwd_data bf16");
	starpu_data_handle_t all[] = {hx, hw, hb, hy, hdy, hdx};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		starpu_data_unregister(all[i]);
	char what[96];
	snprintf(what, sizeof(what), "dense bf16 CUDA fwd N=%d IN=%d OUT=%d", N, IN, OUT);
	check_pair(what, y, y32, ys, g16(IN) + g32(IN), 2 * g32(IN), 0, ny);
	snprintf(what, sizeof(what), "dense bf16 CUDA bwd data N=%d IN=%d OUT=%d", N, IN, OUT);
	check_pair(what, dx, dx32, dxs, g16(OUT) + g32(OUT), 2 * g32(OUT), 0, nx);
out:
	free(x), free(w), free(b), free(dy), free(y), free(y32), free(ys), free(dx), free(dx32), free(dxs);
	free(ax), free(aw), free(ab), free(ady);
}

void h_extra_dense_bf16_gpu(void)
{
	test_rng_seed(4503);
	dense_gpu_case(37, 45, 19);
	dense_gpu_case(256, 128, 384);
	dense_gpu_case(300, 64, 256);
}

/* ------------------------------------------------------------------ bf16 activations
 *
 * The activations stored in bf16 (graph/model.h y_bf16, --precision bf16): the codelets that read or
 * write them, run as StarPU tasks on a CPU worker with 2-byte handles.
 *
 * conv2d with a bf16 x (a->x_bf16): the kernels widen x exactly (im2col as it copies it into its padded phases,
 * F(2x2)'s AVX-512 image split in registers, conv2d_algo.c into a scratch for the other paths), so
 *   - the task's forward and weight gradient are the kernel's bits on the widened x (exactness: compared bit
 *     for bit; negative control: one element of the stored x one bf16 step away must change them);
 *   - on the paths that round x itself (im2col, direct), the stored x rounded as dnn_bf16_convert is
 *     the value the conv rounded to: the same bits as the bf16 kernel on the fp32 x (negative control:
 *     x truncated to bf16 instead of rounded must give other bits);
 *   - against the fp32 kernel on the fp32 x, per output: the bf16 kernel's bound on the stored x
 *     (the GEMM's (g16 + g32) S, or Winograd's g16(C) T + 2 g32 Tbar, op_bf16's conv2d section) plus
 *     the stored x's own rounding, |sum w (x~ - x)| <= u sum |w| |x| = u S (u = 2^-8); the negative
 *     control is the fp32 part alone (g32 S, or 2 g32 Tbar), which must fail. */

static int cpu_worker(void)
{
	const int w = starpu_worker_get_by_type(STARPU_CPU_WORKER, 0);
	return w >= 0 ? w : -1;
}

static starpu_data_handle_t reg16(uint16_t *p, size_t n)
{
	starpu_data_handle_t h;
	starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)p, n, sizeof(uint16_t));
	return h;
}

/* y = the conv's forward task (fwd = 1) or dw += its weight-gradient task (fwd = 0) with x in bf16. */
static void conv_task_bf16x(float *out, const uint16_t *xh, const float *w, const float *dy, const dnn_conv2d_args *a,
			    int fwd)
{
	const size_t nx = (size_t)a->N * a->C * a->H * a->W, nw = (size_t)a->K * a->C * a->R * a->S;
	const size_t ny = (size_t)a->N * a->K * a->P * a->Q;
	starpu_data_handle_t hx = reg16((uint16_t *)xh, nx), hw = reg((float *)(fwd ? w : dy), fwd ? nw : ny);
	starpu_data_handle_t ho = reg(out, fwd ? ny : nw);
	if (fwd) {
		struct starpu_data_descr d[] = {{hx, STARPU_R}, {hw, STARPU_R}, {ho, STARPU_W}};
		test_task(&cl_conv2d_fwd, cpu_worker(), a, sizeof *a, d, 3, "conv_fwd bf16 x");
	} else {
		struct starpu_data_descr d[] = {{hx, STARPU_R}, {hw, STARPU_R}, {ho, STARPU_RW}};
		test_task(&cl_conv2d_bwd_filter, cpu_worker(), a, sizeof *a, d, 3, "conv_bwd_filter bf16 x");
	}
	starpu_data_unregister(hx), starpu_data_unregister(hw), starpu_data_unregister(ho);
}

static void conv_act_case(int N, int C, int H, int W, int K, int R, int stride, int pad, int algo)
{
	dnn_conv2d_args a32 = {.N = N, .C = C, .H = H, .W = W, .K = K, .R = R, .S = R, .stride = stride, .pad = pad,
			       .dilation = 1, .algo = algo};
	if (dnn_conv2d_args_finish(&a32) != 0) {
		TEST_CHECK(0, "conv bf16 x: bad shape");
		return;
	}
	dnn_conv2d_args a16 = a32, ax16 = a32, aS = a32;
	a16.bf16 = ax16.bf16 = ax16.x_bf16 = 1;
	aS.algo = DNN_CONV_ALGO_IM2COL;
	const size_t nx = (size_t)N * C * H * W, nw = (size_t)K * C * R * R, ny = (size_t)N * K * a32.P * a32.Q;
	const size_t nmax = nx > ny ? (nx > nw ? nx : nw) : (ny > nw ? ny : nw);
	float *x = fill(nx, -1, 1), *w = fill(nw, -1, 1), *dy = fill(ny, -1, 1), *dw0 = fill(nw, -0.1f, 0.1f);
	float *xw = malloc(nx * 4), *ax = malloc(nx * 4), *aw = malloc(nw * 4), *ady = malloc(ny * 4);
	float *got = malloc(nmax * 4), *want = malloc(nmax * 4), *f32 = malloc(nmax * 4), *s = malloc(nmax * 4);
	uint16_t *xh = malloc(nx * 2), *xt = malloc(nx * 2);
	double *T = malloc(nmax * sizeof(double)), *Tb = malloc(nmax * sizeof(double));
	if (!x || !w || !dy || !dw0 || !xw || !ax || !aw || !ady || !got || !want || !f32 || !s || !xh || !xt || !T ||
	    !Tb) {
		TEST_CHECK(0, "conv bf16 x: out of memory");
		goto out;
	}
	dnn_bf16_convert(xh, x, nx);
	dnn_bf16_widen(xw, xh, nx);
	for (size_t i = 0; i < nx; i++) { /* truncation: the negative control of the rounding's match */
		uint32_t u;
		memcpy(&u, &x[i], 4);
		xt[i] = (uint16_t)(u >> 16);
	}
	fabs_copy(ax, x, nx), fabs_copy(aw, w, nw), fabs_copy(ady, dy, ny);
	static const char *algos[] = {"auto", "im2col", "winograd", "winograd4", "onednn"};
	for (int pass = 0; pass < 3; pass += 2) { /* forward, weight gradient: the passes that read x */
		/* the bf16 path's algorithm (auto's rules differ by precision: oneDNN's conv, the Winograd filter rule) */
		const int fwd = pass == 0, m = dnn_conv2d_cpu_winograd_tile(&a16, pass);
		const size_t n = fwd ? ny : nw;
		char what[160];
		/* F(2x2) reads the bf16 x in its split where dnn_wino_reads_bf16 says, else x is widened first */
		const dnn_wino_shape ws = {.N = N, .C = C, .H = H, .W = W, .K = K, .P = a32.P, .Q = a32.Q, .pad_h = pad,
					   .pad_w = pad};
		snprintf(what, sizeof(what), "conv bf16 x %s N=%d C%d %dx%d K%d k%d s%d p%d [%s: %s]", pass_name[pass], N, C,
			 H, W, K, R, stride, pad, algos[algo],
			 m == 2 ? (dnn_wino_reads_bf16(&ws) ? "F(2x2), bf16 split" : "F(2x2), widened")
			 : m	? "F(4x4), widened"
			 : dnn_conv2d_cpu_uses_onednn(&a16, pass) ? "oneDNN conv"
								   : "GEMM/direct");
		/* the task, the kernel on the widened x, the kernel on the fp32 x (bf16 and fp32) */
		if (!fwd)
			memcpy(got, dw0, nw * 4), memcpy(want, dw0, nw * 4), memcpy(f32, dw0, nw * 4), memcpy(s, dw0, nw * 4);
		conv_task_bf16x(got, xh, w, dy, &ax16, fwd);
		if (fwd)
			dnn_conv2d_forward_cpu(want, xw, w, &a16), dnn_conv2d_forward_cpu(f32, x, w, &a32);
		else
			dnn_conv2d_backward_filter_cpu(want, xw, dy, &a16), dnn_conv2d_backward_filter_cpu(f32, x, dy, &a32);
		TEST_CHECK(test_same_bits(what, got, want, n), "%s: the task is not the kernel on the widened x", what);
		{ /* negative control of the exactness: one stored element one bf16 step up, near an image's centre, at
		   * even coordinates (read by strided convs; in 4 F(2x2) tiles: an element in one tile only, a corner
		   * without padding, moved its V entries by less than their bf16 rounding and changed nothing) */
			const size_t j = ((size_t)(N / 2) * C * H + (H / 2 & ~1)) * W + (W / 2 & ~1);
			uint16_t keep = xh[j];
			xh[j] = (uint16_t)(keep + 1);
			if (!fwd)
				memcpy(s, dw0, nw * 4);
			conv_task_bf16x(s, xh, w, dy, &ax16, fwd);
			xh[j] = keep;
			size_t diff = 0;
			for (size_t i = 0; i < n; i++)
				diff += memcmp(&s[i], &got[i], 4) != 0;
			printf("  %s: negative control: one stored element a bf16 step away changes %zu of %zu\n", what, diff,
			       n);
			TEST_CHECK(diff > 0, "%s: negative control: a changed bf16 x changed nothing", what);
		}
		if (!m) { /* the stored value is the one the conv rounded x to (im2col, direct, oneDNN's reorder) */
			if (fwd)
				dnn_conv2d_forward_cpu(want, x, w, &a16);
			else
				memcpy(want, dw0, nw * 4), dnn_conv2d_backward_filter_cpu(want, x, dy, &a16);
			TEST_CHECK(test_same_bits(what, got, want, n), "%s: bf16 x is not the value the conv rounds to",
				   what);
			if (!fwd)
				memcpy(s, dw0, nw * 4);
			conv_task_bf16x(s, xt, w, dy, &ax16, fwd);
			size_t diff = 0;
			for (size_t i = 0; i < n; i++)
				diff += memcmp(&s[i], &want[i], 4) != 0;
			printf("  %s: negative control: x truncated, not rounded, changes %zu of %zu\n", what, diff, n);
			TEST_CHECK(diff > 0, "%s: negative control: truncated x gave the rounded x's bits", what);
		}
		/* the bound against fp32 on the fp32 x; S = sum |w| |x| (im2col fp32 on absolute values) */
		int terms;
		if (fwd)
			dnn_conv2d_forward_cpu(s, ax, aw, &aS), terms = C * R * R;
		else
			fabs_copy(s, dw0, nw), dnn_conv2d_backward_filter_cpu(s, ax, ady, &aS), terms = N * a32.P * a32.Q + 1;
		const double u = ldexp(1.0, -8);
		if (!m) {
			for (size_t i = 0; i < n; i++)
				T[i] = (g16(terms) + u) * s[i], Tb[i] = s[i];
			conv_check(what, got, f32, T, Tb, 1.0, g32(terms), n);
		} else if (fwd) { /* Winograd forward on the stored x, then its rounding through S */
			TEST_CHECK(wino_fwd_terms(T, Tb, xw, w, N, C, H, W, K, pad, m) == 0, "conv bf16 x: out of memory");
			for (size_t i = 0; i < n; i++)
				T[i] = g16(C) * T[i] + u * s[i];
			conv_check(what, got, f32, T, Tb, 1.0, 2 * g32(6 * (m + 2) + C), n);
		} else {
			int nt = 0;
			TEST_CHECK(wino_filter_terms(T, Tb, &nt, xw, dy, N, C, H, W, K, pad) == 0, "conv bf16 x: out of memory");
			for (size_t i = 0; i < n; i++)
				T[i] = g16(nt) * T[i] + u * s[i], Tb[i] += fabs(dw0[i]);
			conv_check(what, got, f32, T, Tb, 1.0, 2 * g32(6 * (m + 2) + nt), n);
		}
	}
out:
	free(x), free(w), free(dy), free(dw0), free(xw), free(ax), free(aw), free(ady), free(got), free(want), free(f32);
	free(s), free(xh), free(xt), free(T), free(Tb);
}

static void conv_act_all(void)
{
	test_rng_seed(4505);
	/* ResNet-8's convs that read a relu's output: 3x3 stride 1 and 2, 1x1 stride 2, each path forced */
	conv_act_case(2, 16, 12, 12, 16, 3, 1, 1, DNN_CONV_ALGO_IM2COL);
	conv_act_case(2, 16, 12, 12, 16, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD);
	conv_act_case(2, 16, 16, 16, 16, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD4);
	/* F(2x2)'s split reading the bf16 x (forward and weight gradient): ResNet-20's 32x32 stage (whole 32-value
	 * rows), ResNet-8's 28x28 (the second half of a row masked at the image's end), 7x7 images grouped in a chunk
	 * (image offsets in 2-byte values), no padding; past 32 columns x is widened first (the AVX2-width split) */
	conv_act_case(2, 16, 32, 32, 16, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD);
	conv_act_case(1, 8, 28, 28, 8, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD);
	conv_act_case(3, 16, 7, 7, 16, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD);
	conv_act_case(2, 8, 10, 10, 8, 3, 1, 0, DNN_CONV_ALGO_WINOGRAD);
	conv_act_case(1, 8, 36, 36, 8, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD);
	conv_act_case(3, 16, 14, 14, 32, 3, 2, 1, DNN_CONV_ALGO_AUTO);
	conv_act_case(2, 16, 14, 14, 32, 1, 2, 0, DNN_CONV_ALGO_AUTO);
	conv_act_case(1, 6, 14, 14, 16, 5, 1, 0, DNN_CONV_ALGO_AUTO); /* LeNet-5's second conv (oneDNN under auto) */
	/* oneDNN's primitives, whose reorder then reads the bf16 x as it is (conv2d_onednn.c; without oneDNN: auto) */
	conv_act_case(2, 32, 8, 8, 32, 3, 1, 1, DNN_CONV_ALGO_ONEDNN);
	conv_act_case(2, 16, 14, 14, 32, 3, 2, 1, DNN_CONV_ALGO_ONEDNN);
}

void h_extra_conv_act_bf16(void) { each_path(conv_act_all); }

/* conv2d writing a bf16 y (a->y_bf16: its output stored in bf16, graph/ops/conv.c bf16_out): each CPU forward path
 * rounds its own output blocks (Winograd's output transform or its chunk, oneDNN's bf16 destination, im2col's GEMM
 * blocks, the direct path's rows), the bias added first. So the task with a 2-byte y handle gives, bit for bit,
 * dnn_bf16_convert of what the same path's task writes into an fp32 y (the bias task's floats included: conv2d.c
 * adds it after the kernel there). Negative control: the fp32 y truncated to bf16 instead of rounded must differ
 * from the task's y (else the bit check could not tell a truncating epilogue). The fp32 side needs no new bound:
 * it is the bf16 kernel the conv2d rows above check. */
static void conv_task_y(void *y, const float *x, const uint16_t *xh, const float *w, const float *b,
			const dnn_conv2d_args *a)
{
	const size_t nx = (size_t)a->N * a->C * a->H * a->W, nw = (size_t)a->K * a->C * a->R * a->S;
	const size_t ny = (size_t)a->N * a->K * a->P * a->Q;
	starpu_data_handle_t hx = a->x_bf16 ? reg16((uint16_t *)xh, nx) : reg((float *)x, nx), hw = reg((float *)w, nw);
	starpu_data_handle_t hy = a->y_bf16 ? reg16(y, ny) : reg(y, ny), hb = a->bias ? reg((float *)b, (size_t)a->K) : NULL;
	struct starpu_data_descr d[] = {{hx, STARPU_R}, {hw, STARPU_R}, {hy, STARPU_W}, {hb, STARPU_R}};
	test_task(&cl_conv2d_fwd, cpu_worker(), a, sizeof *a, d, a->bias ? 4 : 3, "conv_fwd bf16 y");
	starpu_data_unregister(hx), starpu_data_unregister(hw), starpu_data_unregister(hy);
	if (hb)
		starpu_data_unregister(hb);
}

static void conv_out_case(int N, int C, int H, int W, int K, int R, int stride, int pad, int algo, int bias, int xb)
{
	dnn_conv2d_args a = {.N = N, .C = C, .H = H, .W = W, .K = K, .R = R, .S = R, .stride = stride, .pad = pad,
			     .dilation = 1, .algo = algo, .bf16 = 1, .bias = bias, .x_bf16 = xb};
	if (dnn_conv2d_args_finish(&a) != 0) {
		TEST_CHECK(0, "conv bf16 y: bad shape");
		return;
	}
	dnn_conv2d_args ay = a;
	ay.y_bf16 = 1;
	const size_t nx = (size_t)N * C * H * W, nw = (size_t)K * C * R * R, ny = (size_t)N * K * a.P * a.Q;
	float *x = fill(nx, -1, 1), *w = fill(nw, -1, 1), *b = fill((size_t)K, -0.5f, 0.5f), *y32 = malloc(ny * 4);
	uint16_t *xh = malloc(nx * 2), *yh = malloc(ny * 2), *want = malloc(ny * 2), *yt = malloc(ny * 2);
	if (!x || !w || !b || !y32 || !xh || !yh || !want || !yt) {
		TEST_CHECK(0, "conv bf16 y: out of memory");
		goto out;
	}
	dnn_bf16_convert(xh, x, nx);
	static const char *algos[] = {"auto", "im2col", "winograd", "winograd4", "onednn"};
	const int m = dnn_conv2d_cpu_winograd_tile(&a, 0);
	char what[192];
	snprintf(what, sizeof(what), "conv bf16 y N=%d C%d %dx%d K%d k%d s%d p%d%s%s [%s: %s%s]", N, C, H, W, K, R,
		 stride, pad, bias ? " bias" : "", xb ? " bf16 x" : "", algos[algo],
		 m ? (m == 2 ? "F(2x2)" : "F(4x4)") : dnn_conv2d_cpu_uses_onednn(&a, 0) ? "oneDNN conv" : "GEMM/direct",
		 dnn_conv_direct_avx512() ? "" : ", AVX2");
	memset(yh, 0xff, ny * 2); /* NaNs: an element the task did not write fails the check */
	conv_task_y(y32, x, xh, w, b, &a);
	conv_task_y(yh, x, xh, w, b, &ay);
	dnn_bf16_convert(want, y32, ny);
	size_t diff = 0;
	for (size_t i = 0; i < ny; i++)
		diff += want[i] != yh[i];
	TEST_CHECK(diff == 0, "%s: %zu of %zu bf16 values are not dnn_bf16_convert of the path's fp32 y", what, diff, ny);
	size_t tdiff = 0; /* negative control: truncation instead of rounding */
	for (size_t i = 0; i < ny; i++) {
		uint32_t u;
		memcpy(&u, &y32[i], 4);
		yt[i] = (uint16_t)(u >> 16);
		tdiff += yt[i] != yh[i];
	}
	printf("  %s: %zu of %zu differ from the rounding; truncation (negative control) differs in %zu\n", what, diff,
	       ny, tdiff);
	TEST_CHECK(tdiff > 0, "%s: negative control: the truncated y matched the task's y", what);
out:
	free(x), free(w), free(b), free(y32), free(xh), free(yh), free(want), free(yt);
}

static void conv_out_all(void)
{
	test_rng_seed(4506);
	/* each forward path, forced as the rows above force them: im2col (a block of rows; several whole images per
	 * GEMM on small images), 1x1 stride 2 (im2col's pointwise GEMM in column blocks) */
	conv_out_case(2, 16, 12, 12, 16, 3, 1, 1, DNN_CONV_ALGO_IM2COL, 1, 0);
	conv_out_case(3, 16, 6, 6, 16, 3, 1, 1, DNN_CONV_ALGO_IM2COL, 0, 0);
	conv_out_case(2, 16, 14, 14, 32, 1, 2, 0, DNN_CONV_ALGO_AUTO, 1, 1);
	/* F(2x2): whole-vector rows (16 columns), masked row ends, an odd P (the last tile row's second row dropped) */
	conv_out_case(2, 16, 16, 16, 16, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD, 1, 0);
	conv_out_case(2, 16, 13, 11, 16, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD, 1, 1);
	conv_out_case(2, 8, 7, 7, 16, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD, 0, 0);
	/* F(4x4)'s three layouts: tile rows (32 columns), row groups (16, 8 columns), strips (24 columns) */
	conv_out_case(1, 16, 32, 32, 16, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD4, 1, 0);
	conv_out_case(2, 16, 16, 16, 16, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD4, 1, 1);
	conv_out_case(3, 16, 7, 7, 16, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD4, 0, 0);
	conv_out_case(2, 16, 24, 24, 16, 3, 1, 1, DNN_CONV_ALGO_WINOGRAD4, 1, 0);
	/* the direct path (few channels: the RGB stem, LeNet-5's first conv, a tall image), AVX-512 and AVX2 */
	for (int avx512 = 1; avx512 >= 0; avx512--) {
		dnn_conv_direct_set_avx512(avx512);
		conv_out_case(2, 3, 16, 16, 16, 3, 1, 1, DNN_CONV_ALGO_AUTO, 1, 0);
		conv_out_case(2, 1, 28, 28, 6, 5, 1, 0, DNN_CONV_ALGO_AUTO, 0, 0);
		conv_out_case(1, 3, 40, 16, 16, 3, 1, 1, DNN_CONV_ALGO_AUTO, 1, 0); /* 40 rows: blocks of 32 rows */
	}
	dnn_conv_direct_set_avx512(1);
	/* oneDNN's conv with a bf16 destination (without oneDNN: auto's path), with and without its bias */
	conv_out_case(2, 32, 8, 8, 32, 3, 1, 1, DNN_CONV_ALGO_ONEDNN, 1, 1);
	conv_out_case(2, 32, 8, 8, 32, 3, 1, 1, DNN_CONV_ALGO_ONEDNN, 0, 0);
	conv_out_case(2, 16, 14, 14, 32, 3, 2, 1, DNN_CONV_ALGO_ONEDNN, 1, 0);
}

/* oneDNN's per-thread primitive caches (codelets/onednn_thread.h: 32 conv entries, 48 matmul entries, round-robin
 * eviction): a shape run again after more distinct shapes than the cache holds (its entry evicted, the primitive made
 * anew) gives the bits of its first run; the caches are released at the end (their engine too). */
static void onednn_cache_case(void)
{
	enum { NCONV = 40, NMM = 60 }; /* more than CV_CACHE (32) and MM_CACHE (48) */
	conv_geom g0 = {.N = 2, .C = 4, .H = 6, .W = 6, .K = 4, .R = 3, .S = 3, .P = 6, .Q = 6, .stride = 1, .dil = 1,
			.pad_h = 1, .pad_w = 1, .bf16 = 1};
	if (!dnn_conv_onednn_applies(&g0)) {
		printf("  oneDNN caches: skipped (no oneDNN bf16 path on this CPU or build)\n");
		return;
	}
	test_rng_seed(4510);
	const size_t nmax = (size_t)2 * 4 * (6 + NCONV) * (6 + NCONV);
	float *x = malloc(nmax * 4), *w = malloc(4 * 4 * 9 * 4), *y = malloc(nmax * 4), *y0 = malloc(nmax * 4);
	float *A = malloc(64 * 64 * 4), *B = malloc(64 * 64 * 4), *C = malloc(64 * 64 * 4), *C0 = malloc(64 * 64 * 4);
	TEST_CHECK(x && w && y && y0 && A && B && C && C0, "out of memory");
	if (!(x && w && y && y0 && A && B && C && C0))
		goto out;
	test_fill_uniform(x, nmax, -1, 1), test_fill_uniform(w, 4 * 4 * 9, -1, 1);
	for (int i = 0; i <= NCONV; i++) { /* shapes 0, 1, ..., NCONV - 1, then 0 again */
		conv_geom g = g0;
		g.H = g.W = g.P = g.Q = 6 + (i % NCONV);
		TEST_CHECK(dnn_conv_onednn_forward(i ? y : y0, x, w, &g, 0.0f) == 0, "oneDNN conv %dx%d did not run", g.H, g.W);
	}
	TEST_CHECK(test_same_bits("oneDNN conv cache: a shape after its entry's eviction", y, y0, (size_t)2 * 4 * 36),
		   "oneDNN conv cache: the re-created primitive gives other bits");
	test_fill_uniform(A, 64 * 64, -1, 1), test_fill_uniform(B, 64 * 64, -1, 1);
	for (int i = 0; i <= NMM; i++) { /* M = 4 + i: distinct shapes, then the first again */
		const int M = 4 + (i % NMM);
		TEST_CHECK(dnn_gemm_bf16(0, 0, M, 16, 32, 1.0f, A, 32, B, 16, 0.0f, i ? C : C0, 16) == 0,
			   "dnn_gemm_bf16 M=%d failed", M);
	}
	TEST_CHECK(test_same_bits("oneDNN matmul cache: a shape after its entry's eviction", C, C0, (size_t)4 * 16),
		   "oneDNN matmul cache: the re-created primitive gives other bits");
out:
	dnn_conv2d_onednn_release();
	dnn_gemm_bf16_release();
	free(x), free(w), free(y), free(y0), free(A), free(B), free(C), free(C0);
}

void h_extra_conv_out_bf16(void)
{
	each_path(conv_out_all);
	onednn_cache_case();
}

/* The writers and the other readers: batchnorm + relu (train, eval, --batchnorm global), relu and add.
 *   - A bf16 output is one rounding of the fp32 kernel's output (dnn_bf16_convert after the same fp32 loops):
 *     bit for bit the fp32 kernel's y rounded, and within relative 2^-8 of it (u, bf16's unit roundoff; the
 *     negative control: the fp32 tolerance of the harness's forward rows, relative 1e-5, must fail).
 *   - A backward that reads its relu mask from a bf16 y gives the bits of the one that reads the fp32 y
 *     (y > 0 is kept by the rounding; -0, +0 and NaN included); negative control: one positive element of
 *     the bf16 y set to zero must change dx.
 *   - add with a bf16 input: the fp32 sum of the widened values, bit for bit. */
static size_t differ(const float *a, const float *b, size_t n)
{
	size_t d = 0;
	for (size_t i = 0; i < n; i++)
		d += memcmp(&a[i], &b[i], 4) != 0;
	return d;
}

/* yh against y32: bits of dnn_bf16_convert(y32), the relative bound u and its negative control. */
static void check_rounded(const char *what, const uint16_t *yh, const float *y32, size_t n)
{
	uint16_t *r = malloc(n * 2);
	float *w = malloc(n * 4);
	if (!r || !w) {
		TEST_CHECK(0, "bf16 activations: out of memory");
		free(r), free(w);
		return;
	}
	dnn_bf16_convert(r, y32, n);
	TEST_CHECK(memcmp(r, yh, n * 2) == 0, "%s: the bf16 output is not the fp32 output rounded", what);
	dnn_bf16_widen(w, yh, n);
	TEST_CHECK(test_count_outside(what, w, y32, y32, ldexp(1.0, -8), 0.0, n, 1) == 0, "%s: outside relative 2^-8", what);
	TEST_CHECK(test_count_outside(what, w, y32, y32, 1e-5, 0.0, n, 0) > 0,
		   "%s: negative control: the bf16 output passed the fp32 tolerance", what);
	free(r), free(w);
}

static void bn_act_case(int N, int C, int HW)
{
	const size_t nx = (size_t)N * C * HW;
	dnn_batchnorm_args a = {.N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f, .relu = 1}, ah = a;
	ah.y_bf16 = 1;
	float *x = fill(nx, -2, 3), *dy = fill(nx, -1, 1), *gamma = fill(C, 0.5f, 1.5f), *beta = fill(C, -0.5f, 0.5f);
	float *run = fill(2 * (size_t)C, 0.5f, 1.5f), *y = malloc(nx * 4), *sv = malloc(12 * (size_t)C);
	float *svh = malloc(12 * (size_t)C), *dx = malloc(nx * 4), *dxh = malloc(nx * 4), *g = calloc(4 * (size_t)C, 4);
	double *sums = calloc(2 * (size_t)C, 8), *bs = calloc(4 * (size_t)C, 8);
	uint16_t *yh = malloc(nx * 2);
	char what[128];
	if (!x || !dy || !gamma || !beta || !run || !y || !sv || !svh || !dx || !dxh || !g || !sums || !bs || !yh) {
		TEST_CHECK(0, "bf16 activations: out of memory");
		goto out;
	}
	for (int simd = dnn_batchnorm_set_simd(1); simd >= 0; simd--) {
		dnn_batchnorm_set_simd(simd);
		const char *path = simd ? "avx2" : "portable";
		dnn_batchnorm_forward_train_cpu(y, sv, x, gamma, beta, &a);
		dnn_batchnorm_forward_train_cpu(yh, svh, x, gamma, beta, &ah);
		snprintf(what, sizeof(what), "bn+relu train -> bf16 N=%d C=%d HW=%d [%s]", N, C, HW, path);
		check_rounded(what, yh, y, nx);
		TEST_CHECK(memcmp(sv, svh, 12 * (size_t)C) == 0, "%s: the saved statistics differ", what);
		for (size_t i = 0; i < nx; i += 11) /* the mask's edge cases in both: -0, +0, NaN */
			y[i] = i % 3 == 0 ? -0.0f : i % 3 == 1 ? 0.0f : NAN;
		dnn_bf16_convert(yh, y, nx);
		for (int acc = 0; acc < 2; acc++) {
			a.accumulate_dx = ah.accumulate_dx = acc;
			memset(g, 0, 4 * (size_t)C * 4);
			memcpy(dx, dy, nx * 4), memcpy(dxh, dy, nx * 4);
			dnn_batchnorm_relu_backward_cpu(dx, g, g + C, x, gamma, sv, dy, y, &a);
			dnn_batchnorm_relu_backward_cpu(dxh, g + 2 * C, g + 3 * C, x, gamma, sv, dy, yh, &ah);
			snprintf(what, sizeof(what), "bn+relu bwd, bf16 y N=%d C=%d HW=%d%s [%s]", N, C, HW, acc ? " +=" : "",
				 path);
			TEST_CHECK(test_same_bits(what, dxh, dx, nx) && test_same_bits(what, g + 2 * C, g, 2 * (size_t)C),
				   "%s: not the fp32 y's bits", what);
		}
		size_t j = 0; /* negative control: one positive element of the bf16 y zeroed */
		while (j < nx && !(y[j] > 0.0f && dy[j] != 0.0f))
			j++;
		const uint16_t keep = yh[j];
		yh[j] = 0;
		memcpy(dxh, dy, nx * 4);
		dnn_batchnorm_relu_backward_cpu(dxh, g + 2 * C, g + 3 * C, x, gamma, sv, dy, yh, &ah);
		yh[j] = keep;
		printf("  %s: negative control: one mask element off changes %zu of %zu\n", what, differ(dxh, dx, nx), nx);
		TEST_CHECK(differ(dxh, dx, nx) > 0, "%s: negative control: a changed mask changed nothing", what);
	}
	a.accumulate_dx = ah.accumulate_dx = 0;
	dnn_batchnorm_forward_eval_cpu(y, x, gamma, beta, run, &a);
	dnn_batchnorm_forward_eval_cpu(yh, x, gamma, beta, run, &ah);
	snprintf(what, sizeof(what), "bn+relu eval -> bf16 N=%d C=%d HW=%d", N, C, HW);
	check_rounded(what, yh, y, nx);
	/* --batchnorm global: the forward from the sums, then the backward's sums and dx with the bf16 mask */
	a.global_n = ah.global_n = N;
	dnn_batchnorm_sums_fwd_cpu(sums, x, &a);
	dnn_batchnorm_forward_global_cpu(y, sv, x, gamma, beta, sums, &a);
	dnn_batchnorm_forward_global_cpu(yh, svh, x, gamma, beta, sums, &ah);
	snprintf(what, sizeof(what), "bn+relu global -> bf16 N=%d C=%d HW=%d", N, C, HW);
	check_rounded(what, yh, y, nx);
	memset(g, 0, 4 * (size_t)C * 4);
	dnn_batchnorm_sums_bwd_cpu(bs, g, g + C, x, sv, dy, y, &a);
	dnn_batchnorm_sums_bwd_cpu(bs + 2 * C, g + 2 * C, g + 3 * C, x, sv, dy, yh, &ah);
	dnn_batchnorm_backward_global_cpu(dx, x, gamma, sv, dy, y, bs, &a);
	dnn_batchnorm_backward_global_cpu(dxh, x, gamma, sv, dy, yh, bs + 2 * C, &ah);
	snprintf(what, sizeof(what), "bn+relu global bwd, bf16 y N=%d C=%d HW=%d", N, C, HW);
	TEST_CHECK(memcmp(bs, bs + 2 * C, 2 * (size_t)C * 8) == 0 && test_same_bits(what, g + 2 * C, g, 2 * (size_t)C) &&
			   test_same_bits(what, dxh, dx, nx),
		   "%s: not the fp32 y's bits", what);
	dnn_batchnorm_set_simd(1);
out:
	free(x), free(dy), free(gamma), free(beta), free(run), free(y), free(sv), free(svh), free(dx), free(dxh), free(g);
	free(sums), free(bs), free(yh);
}

/* Batch norm reading a bf16 x (a->x_bf16: its input stored in bf16, a conv's output). Every task that reads x
 * widens it exactly as it loads it (portable loops and AVX2 alike), the statistics and sums staying fp32/double in
 * their order, so each task on a 2-byte x handle gives bit for bit what the same task gives on the widened fp32 x:
 * local training forward (y and the saved statistics), eval, --batchnorm global's sums and apply tasks (forward
 * and backward), the local backward (dx, dgamma, dbeta), plain and fused with the relu (its y fp32 or bf16).
 * Negative control: one stored element of x one bf16 step away (its bits + 1) must change the forward's y and
 * statistics and the backward's dx. */
static starpu_data_handle_t reg_elems(void *p, size_t n, size_t elem)
{
	starpu_data_handle_t h;
	starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)p, n, elem);
	return h;
}

/* What bn_x_tasks writes: y of the training forward (y1), of eval (y2), of global's apply (y3), each nx elements
 * of ysz bytes; the saved statistics of the local and global forwards (3C each); the forward and backward sums
 * (2C doubles each); dx of the local and global backwards (nx each); dgamma, dbeta of the local backward and of
 * global's sums task (4C). */
typedef struct {
	unsigned char *y1, *y2, *y3;
	float *sv, *svg, *dx, *dxg, *dg;
	double *S, *T;
} bn_x_out;

static int bn_x_alloc(bn_x_out *o, size_t nx, int C, size_t ysz)
{
	o->y1 = malloc(nx * ysz), o->y2 = malloc(nx * ysz), o->y3 = malloc(nx * ysz);
	o->sv = malloc(12 * (size_t)C), o->svg = malloc(12 * (size_t)C);
	o->dx = malloc(nx * 4), o->dxg = malloc(nx * 4);
	o->dg = malloc(16 * (size_t)C), o->S = malloc(16 * (size_t)C), o->T = malloc(16 * (size_t)C);
	return o->y1 && o->y2 && o->y3 && o->sv && o->svg && o->dx && o->dxg && o->dg && o->S && o->T;
}

static void bn_x_free(bn_x_out *o)
{
	free(o->y1), free(o->y2), free(o->y3), free(o->sv), free(o->svg), free(o->dx), free(o->dxg), free(o->dg);
	free(o->S), free(o->T);
}

/* The seven batchnorm tasks on x (a->x_bf16 says its type) on the CPU worker, into o. */
static void bn_x_tasks(bn_x_out *o, const void *x, const dnn_batchnorm_args *a0, const float *gamma, const float *beta,
		       const float *run, const float *dy)
{
	dnn_batchnorm_args a = *a0;
	const int C = a.C, w = cpu_worker();
	const size_t nx = (size_t)a.N * C * a.HW, ysz = a.y_bf16 ? 2 : 4;
	float *dyc = malloc(nx * 4); /* the fused backward's dy is RW (CUDA masks it in place): a copy */
	if (!dyc) {
		TEST_CHECK(0, "bf16 x: out of memory");
		return;
	}
	memcpy(dyc, dy, nx * 4);
	memset(o->S, 0, 16 * (size_t)C), memset(o->T, 0, 16 * (size_t)C), memset(o->dg, 0, 16 * (size_t)C);
	starpu_data_handle_t hx = reg_elems((void *)x, nx, a.x_bf16 ? 2 : 4), hg = reg((float *)gamma, C);
	starpu_data_handle_t hb = reg((float *)beta, C), hr = reg((float *)run, 2 * (size_t)C), hdy = reg(dyc, nx);
	starpu_data_handle_t hy1 = reg_elems(o->y1, nx, ysz), hy2 = reg_elems(o->y2, nx, ysz);
	starpu_data_handle_t hy3 = reg_elems(o->y3, nx, ysz);
	starpu_data_handle_t hsv = reg(o->sv, 3 * (size_t)C), hsvg = reg(o->svg, 3 * (size_t)C);
	starpu_data_handle_t hS = reg_elems(o->S, 2 * (size_t)C, 8), hT = reg_elems(o->T, 2 * (size_t)C, 8);
	starpu_data_handle_t hdx = reg(o->dx, nx), hdxg = reg(o->dxg, nx);
	starpu_data_handle_t hdg = reg(o->dg, C), hdb = reg(o->dg + C, C), hdg2 = reg(o->dg + 2 * C, C);
	starpu_data_handle_t hdb2 = reg(o->dg + 3 * C, C);
	struct starpu_data_descr f[] = {{hx, STARPU_R}, {hg, STARPU_R}, {hb, STARPU_R}, {hy1, STARPU_W},
					{hsv, STARPU_W}};
	test_task(&cl_batchnorm_fwd_train, w, &a, sizeof a, f, 5, "bn_fwd_train bf16 x");
	struct starpu_data_descr e[] = {{hx, STARPU_R}, {hg, STARPU_R}, {hb, STARPU_R}, {hr, STARPU_R},
					{hy2, STARPU_W}};
	test_task(&cl_batchnorm_fwd_eval, w, &a, sizeof a, e, 5, "bn_fwd_eval bf16 x");
	struct starpu_data_descr b[] = {{hx, STARPU_R},	   {hg, STARPU_R},  {hsv, STARPU_R}, {hdy, STARPU_RW},
					{hdx, STARPU_W},   {hdg, STARPU_RW}, {hdb, STARPU_RW}, {hy1, STARPU_R}};
	test_task(&cl_batchnorm_bwd, w, &a, sizeof a, b, a.relu ? 8 : 7, "bn_bwd bf16 x");
	a.global_n = a.N;
	struct starpu_data_descr sf[] = {{hx, STARPU_R}, {hS, STARPU_RW}};
	test_task(&cl_batchnorm_sums_fwd, w, &a, sizeof a, sf, 2, "bn_sums_fwd bf16 x");
	struct starpu_data_descr fg[] = {{hx, STARPU_R}, {hg, STARPU_R},  {hb, STARPU_R},
					 {hS, STARPU_R}, {hy3, STARPU_W}, {hsvg, STARPU_W}};
	test_task(&cl_batchnorm_fwd_global, w, &a, sizeof a, fg, 6, "bn_fwd_global bf16 x");
	struct starpu_data_descr sb[] = {{hx, STARPU_R},	{hsvg, STARPU_R},  {hdy, STARPU_R}, {hT, STARPU_RW},
					 {hdg2, STARPU_RW}, {hdb2, STARPU_RW}, {hy3, STARPU_R}};
	test_task(&cl_batchnorm_sums_bwd, w, &a, sizeof a, sb, a.relu ? 7 : 6, "bn_sums_bwd bf16 x");
	struct starpu_data_descr bg[] = {{hx, STARPU_R}, {hg, STARPU_R},   {hsvg, STARPU_R}, {hdy, STARPU_R},
					 {hT, STARPU_R}, {hdxg, STARPU_W}, {hy3, STARPU_R}};
	test_task(&cl_batchnorm_bwd_global, w, &a, sizeof a, bg, a.relu ? 7 : 6, "bn_bwd_global bf16 x");
	starpu_task_wait_for_all();
	starpu_data_handle_t all[] = {hx, hg, hb, hr, hdy, hy1, hy2, hy3, hsv,
				      hsvg, hS, hT, hdx, hdxg, hdg, hdb, hdg2, hdb2};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		starpu_data_unregister(all[i]);
	free(dyc);
}

/* The outputs of two runs that differ (0: the same bits), named in `diff`. */
static int bn_x_differ(char *diff, size_t len, const bn_x_out *p, const bn_x_out *q, size_t nx, int C, size_t ysz)
{
	const struct {
		const char *name;
		const void *a, *b;
		size_t bytes;
	} parts[] = {{"train y", p->y1, q->y1, nx * ysz},	 {"eval y", p->y2, q->y2, nx * ysz},
		     {"global y", p->y3, q->y3, nx * ysz},	 {"saved", p->sv, q->sv, 12 * (size_t)C},
		     {"global saved", p->svg, q->svg, 12 * (size_t)C}, {"fwd sums", p->S, q->S, 16 * (size_t)C},
		     {"bwd sums", p->T, q->T, 16 * (size_t)C},	 {"dx", p->dx, q->dx, nx * 4},
		     {"global dx", p->dxg, q->dxg, nx * 4},	 {"dgamma, dbeta", p->dg, q->dg, 16 * (size_t)C}};
	int n = 0;
	diff[0] = 0;
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
		if (memcmp(parts[i].a, parts[i].b, parts[i].bytes) != 0) {
			snprintf(diff + strlen(diff), len - strlen(diff), "%s%s", n ? ", " : "", parts[i].name);
			n++;
		}
	return n;
}

static void bn_x_case(int N, int C, int HW, int relu, int y_bf16)
{
	const size_t nx = (size_t)N * C * HW, ysz = y_bf16 ? 2 : 4;
	dnn_batchnorm_args a = {.N = N, .C = C, .HW = HW, .eps = 1e-5f, .momentum = 0.1f, .relu = relu,
				.y_bf16 = y_bf16};
	float *x = fill(nx, -2, 3), *xw = malloc(nx * 4), *dy = fill(nx, -1, 1), *gamma = fill(C, 0.5f, 1.5f);
	float *beta = fill(C, -0.5f, 0.5f), *run = fill(2 * (size_t)C, 0.5f, 1.5f);
	uint16_t *xh = malloc(nx * 2);
	bn_x_out o16 = {0}, o32 = {0}, oneg = {0};
	char what[160], diff[200];
	if (!x || !xw || !dy || !gamma || !beta || !run || !xh || !bn_x_alloc(&o16, nx, C, ysz) ||
	    !bn_x_alloc(&o32, nx, C, ysz) || !bn_x_alloc(&oneg, nx, C, ysz)) {
		TEST_CHECK(0, "bf16 x: out of memory");
		goto out;
	}
	dnn_bf16_convert(xh, x, nx);
	dnn_bf16_widen(xw, xh, nx);
	for (int simd = dnn_batchnorm_set_simd(1); simd >= 0; simd--) {
		dnn_batchnorm_set_simd(simd);
		snprintf(what, sizeof(what), "bn tasks, bf16 x N=%d C=%d HW=%d%s%s [%s]", N, C, HW,
			 relu ? " +relu" : "", y_bf16 ? " (bf16 y)" : "", simd ? "avx2" : "portable");
		a.x_bf16 = 1;
		bn_x_tasks(&o16, xh, &a, gamma, beta, run, dy);
		a.x_bf16 = 0;
		bn_x_tasks(&o32, xw, &a, gamma, beta, run, dy);
		TEST_CHECK(bn_x_differ(diff, sizeof diff, &o16, &o32, nx, C, ysz) == 0,
			   "%s: not the widened x's bits: %s", what, diff);
		/* negative control: x[j] one bf16 step away, j an element whose relu output is positive (so that the
		 * fused backward's mask keeps it) */
		size_t j = nx / 2;
		for (size_t k = 0; k < nx; k++) {
			const float yv =
				y_bf16 ? dnn_bf16_to_f32(((const uint16_t *)o32.y1)[k]) : ((const float *)o32.y1)[k];
			if (yv > 0.5f) {
				j = k;
				break;
			}
		}
		const uint16_t keep = xh[j];
		xh[j] = (uint16_t)(keep + 1);
		a.x_bf16 = 1;
		bn_x_tasks(&oneg, xh, &a, gamma, beta, run, dy);
		xh[j] = keep;
		const int nd = bn_x_differ(diff, sizeof diff, &oneg, &o32, nx, C, ysz);
		printf("  %s: negative control: x[%zu] one bf16 step away changes %s\n", what, j, diff);
		TEST_CHECK(memcmp(oneg.sv, o32.sv, 12 * (size_t)C) != 0 && memcmp(oneg.y1, o32.y1, nx * ysz) != 0 &&
				   differ(oneg.dx, o32.dx, nx) > 0 && nd >= 3,
			   "%s: negative control: a changed x left the statistics, y or dx unchanged (%s)", what, diff);
	}
	dnn_batchnorm_set_simd(1);
out:
	bn_x_free(&o16), bn_x_free(&o32), bn_x_free(&oneg);
	free(x), free(xw), free(dy), free(gamma), free(beta), free(run), free(xh);
}

/* The AVX2 normalisation rounds a bf16 y in registers (dnn_bn_bf16_convert_avx2): the bits of dnn_bf16_convert on
 * every float near each bf16 value (its bits hi << 16 | lo for every hi and the low halves around the rounding's
 * edges: exact, below, at and above the tie, the largest; denormals, infinities and NaNs included), on both of
 * dnn_bf16_convert's paths (vcvtneps2bf16, which flushes denormals to zero, and dnn_f32_to_bf16, which does not);
 * negative control: truncation instead of rounding must differ. */
static void bn_round_case(void)
{
	static const uint16_t lo[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff, 0x1234};
	const size_t nl = sizeof lo / sizeof lo[0], n = 65536 * nl;
	float *f = malloc(n * 4);
	uint16_t *r = malloc(n * 2), *want = malloc(n * 2);
	if (!f || !r || !want) {
		TEST_CHECK(0, "bf16 rounding: out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const uint32_t u = (uint32_t)(i / nl) << 16 | lo[i % nl];
		memcpy(&f[i], &u, 4);
	}
	for (int path = dnn_gemm_bf16_simd(); path >= 0; path--) {
		dnn_gemm_bf16_set_simd(path);
		dnn_bf16_convert(want, f, n);
		dnn_bn_bf16_convert_avx2(r, f, n);
		size_t bad = 0;
		for (size_t i = 0; i < n; i++)
			bad += r[i] != want[i];
		TEST_CHECK(bad == 0, "bf16 rounding in registers [%s]: %zu of %zu differ from dnn_bf16_convert",
			   path ? "onednn path" : "dnn_f32_to_bf16 path", bad, n);
		size_t trunc = 0;
		for (size_t i = 0; i < n; i++) {
			uint32_t u;
			memcpy(&u, &f[i], 4);
			trunc += (uint16_t)(u >> 16) != want[i];
		}
		TEST_CHECK(trunc > 0, "bf16 rounding: negative control: truncation matched the rounding");
	}
	dnn_gemm_bf16_set_simd(1);
out:
	free(f), free(r), free(want);
}

static void relu_add_act_case(long n)
{
	float *x = fill((size_t)n, -1, 1), *b = fill((size_t)n, -1, 1), *dy = fill((size_t)n, -1, 1);
	float *y = malloc((size_t)n * 4), *yw = malloc((size_t)n * 4), *dx = malloc((size_t)n * 4), *dxh = malloc((size_t)n * 4);
	uint16_t *yh = malloc((size_t)n * 2), *bh = malloc((size_t)n * 2);
	char what[96];
	if (!x || !b || !dy || !y || !yw || !dx || !dxh || !yh || !bh) {
		TEST_CHECK(0, "bf16 activations: out of memory");
		goto out;
	}
	dnn_relu_forward_cpu(y, x, n);
	dnn_relu_forward_bf16_cpu(yh, x, n);
	snprintf(what, sizeof(what), "relu -> bf16 n=%ld", n);
	check_rounded(what, yh, y, (size_t)n);
	for (int acc = 0; acc < 2; acc++) {
		memcpy(dx, b, (size_t)n * 4), memcpy(dxh, b, (size_t)n * 4);
		dnn_relu_backward_cpu(dx, y, dy, n, acc);
		dnn_relu_backward_bf16_cpu(dxh, yh, dy, n, acc);
		snprintf(what, sizeof(what), "relu bwd, bf16 y n=%ld%s", n, acc ? " +=" : "");
		TEST_CHECK(test_same_bits(what, dxh, dx, (size_t)n), "%s: not the fp32 y's bits", what);
	}
	/* add: a bf16 first, second, or both */
	dnn_bf16_convert(bh, b, (size_t)n);
	dnn_bf16_widen(yw, yh, (size_t)n);
	float *bw = dxh;
	dnn_bf16_widen(bw, bh, (size_t)n);
	const void *ins[2][2] = {{x, yh}, {b, bh}};
	const float *wide[2][2] = {{x, yw}, {b, bw}};
	for (int m = 1; m < 4; m++) {
		dnn_add_forward_cpu(y, wide[0][m & 1], wide[1][m >> 1], n);
		dnn_add_forward_mixed_cpu(dx, ins[0][m & 1], m & 1, ins[1][m >> 1], m >> 1, n);
		snprintf(what, sizeof(what), "add, bf16 inputs %d n=%ld", m, n);
		TEST_CHECK(test_same_bits(what, dx, y, (size_t)n), "%s: not the widened values' sum", what);
	}
out:
	free(x), free(b), free(dy), free(y), free(yw), free(dx), free(dxh), free(yh), free(bh);
}

void h_extra_act_bf16(void)
{
	test_rng_seed(4506);
	bn_act_case(3, 5, 25);
	bn_act_case(2, 16, 196);  /* a ResNet-8 stage (14x14) */
	bn_act_case(1, 4, 2500);  /* planes longer than one bf16 block (DNN_BN_BF16_BLOCK) */
	bn_round_case();
	bn_x_case(3, 5, 25, 0, 0); /* odd sizes: tails, an odd N */
	bn_x_case(3, 5, 25, 1, 1);
	bn_x_case(2, 16, 64, 0, 0); /* ResNet-20 stage 3 (8x8) */
	bn_x_case(2, 16, 64, 1, 0);
	bn_x_case(2, 16, 64, 1, 1);
	bn_x_case(1, 4, 2500, 1, 1); /* planes longer than one bf16 block */
	relu_add_act_case(1000);
	relu_add_act_case(4099); /* blocks of 1024 and a tail */
}
