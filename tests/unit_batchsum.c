/* unit_batchsum — the exact batch sums of codelets/batchsum.h give a conv's weight gradient the
 * same bits however the batch is cut into chunks, and are the correctly rounded sum of the
 * images' own gradients.
 *
 * Why: with Winograd F(4x4) in DNN_CONV_ALGO=auto, resnet8 with global batch norm over 4 ranks
 * x 4 chunks ends 3.58e-5 from one process with one chunk after 20 steps (mpi_bn_global's bound:
 * 1e-5), because the float sums over the batch, the weight gradient's above all, round otherwise
 * when the batch is cut otherwise (docs/studies/2026-12-07-f4-default.md).
 *
 * 1. The accumulator alone: a float in the grid's range comes back from add + round unchanged;
 *    values below the grid are truncated toward zero the same way wherever they are added; inf,
 *    NaN and |x| >= 2^32 are counted, not added; the sum of many floats is the same bits in any
 *    order and grouping (forward, reverse, pairs); the AVX-512 loop gives the scalar loop's
 *    integers (where the CPU has AVX-512).
 * 2. The weight gradient of ResNet-8's and ResNet-20's conv shapes (3x3 stride 1 and 2, 1x1
 *    stride 2, the stems), under auto, im2col and Winograd F(2x2): a batch of 24 images cut into
 *    K = 1, 2, 3, 4, 5, 6, 8 and 12 contiguous chunks (the first B mod K one image more, as the
 *    runtime cuts), each chunk's exact sum from its own images, the chunks' sums added by the
 *    chunk tree (graph/chunksum.c's pairs) or in reverse, rounded once: the same bits as K = 1.
 *    With blocks of 2 and 3 images (each block's gradient from the batched kernel), every K whose
 *    chunks are whole blocks: the same bits as that block size in 1 chunk.
 *    Negative control: the float path (each chunk's batched dnn_conv2d_backward_filter_cpu, the
 *    chunk partials added by the same tree) must differ from its K = 1 bits for some shape and K,
 *    or the check above would prove nothing.
 * 3. Accuracy, with a derived bound: the result y is the sum S of the 24 per-image float
 *    gradients dw_n rounded once to nearest, so |y - S| <= 2^-24 |S| (half an ulp; the grid's
 *    truncation, below 2^-80 per term, is far under it for these O(1e-3..1e2) sums). S is taken
 *    in double, s: |s - S| <= d = 23 * 2^-53 * sum |dw_n| (23 additions). Checked:
 *    |y - s| <= 2^-24 (|s| + d) + d + 24 * 2^-80. Negative control: the plain float sum of the
 *    same dw_n, image after image (23 roundings), must break that bound on some element.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batchsum.h"
#include "conv2d.h"
#include "conv2d_winograd.h"
#include "test_util.h"

#define B 24

static int float_path_differs, exact_cases, bound_broken_by_float;

/* 1. The accumulator on its own. */
static void check_accumulator(void)
{
	dnn_bsum acc[8] = {0};
	const float x[8] = {1.0f, -3.25e-5f, 0x1p-57f, 0x1.fffffep31f, -0x1.234568p-40f, 0.0f, -0.0f, 7.5e10f / 64};
	TEST_CHECK(dnn_bsum_add_f32(acc, x, 8) == 0, "in-range floats counted as bad");
	float y[8];
	dnn_bsum_round(y, acc, 8);
	for (int i = 0; i < 8; i++)
		TEST_CHECK(y[i] == x[i], "x[%d] = %a comes back as %a", i, (double)x[i], (double)y[i]);
	/* Below the grid: truncated toward zero, symmetric in sign. */
	memset(acc, 0, sizeof(acc));
	const float t[4] = {0x1.8p-80f, -0x1.8p-80f, 0x1p-81f, 0x1.fffffep-58f};
	dnn_bsum_add_f32(acc, t, 4);
	TEST_CHECK(acc[0] == 1 && acc[1] == -1 && acc[2] == 0 && acc[3] == 0x7fffff,
		   "below the grid: %lld %lld %lld", (long long)acc[0], (long long)acc[1], (long long)acc[2]);
	const float bad[4] = {INFINITY, NAN, -0x1p32f, 0x1p40f};
	memset(acc, 0, sizeof(acc));
	TEST_CHECK(dnn_bsum_add_f32(acc, bad, 4) == 4, "inf, NaN, |x| >= 2^32 not all counted");
	TEST_CHECK(acc[0] == 0 && acc[1] == 0 && acc[2] == 0 && acc[3] == 0, "a bad value was added");
	/* Many floats of wide range: the same bits in any order. */
	enum { M = 4096 };
	float *v = alloc_f(M);
	for (int i = 0; i < M; i++)
		v[i] = test_rng_uniform(-1, 1) * ldexpf(1.0f, test_rng_int(-50, 20));
	dnn_bsum fwd = 0, rev = 0, pair[M / 64] = {0};
	for (int i = 0; i < M; i++)
		dnn_bsum_add_f32(&fwd, &v[i], 1);
	for (int i = M - 1; i >= 0; i--)
		dnn_bsum_add_f32(&rev, &v[i], 1);
	for (int i = 0; i < M; i++)
		dnn_bsum_add_f32(&pair[i % (M / 64)], &v[i], 1);
	for (int s = 1; s < M / 64; s *= 2)
		for (int c = 0; c + s < M / 64; c += 2 * s)
			dnn_bsum_merge(&pair[c], &pair[c + s], 1);
	TEST_CHECK(fwd == rev && fwd == pair[0], "the sum of %d floats depends on the order", M);
	/* The AVX-512 loop against the scalar one: the same integers, from accumulators that start
	 * near carries (low halves close to 2^64, both signs), over floats of every kind (zeros,
	 * subnormals, in range, below the grid, out of range), at lengths with a scalar tail. */
	if (dnn_bsum_set_simd(1)) {
		for (int i = 0; i < M; i++) {
			const int kind = test_rng_int(0, 9);
			const float r = test_rng_uniform(-1, 1);
			v[i] = kind == 0 ? 0.0f : kind == 1 ? r * 0x1p-130f : kind == 2 ? r * 0x1p-70f
			     : kind == 3 ? r * 0x1p33f : kind == 4 ? (r < 0 ? -INFINITY : NAN)
						   : r * ldexpf(1.0f, test_rng_int(-60, 31));
		}
		dnn_bsum *as = malloc(M * sizeof(dnn_bsum)), *av = malloc(M * sizeof(dnn_bsum));
		for (int i = 0; i < M; i++)
			as[i] = av[i] = (dnn_bsum)test_rng_int(-3, 3) * ((dnn_bsum)1 << 64) - test_rng_int(0, 1 << 20);
		size_t bv = 0, bs = 0;
		for (int rep = 0; rep < 3; rep++) {
			bv += dnn_bsum_add_f32(av, v, M - 5); /* a tail of 3 */
			dnn_bsum_set_simd(0);
			bs += dnn_bsum_add_f32(as, v, M - 5);
			dnn_bsum_set_simd(1);
		}
		TEST_CHECK(bv == bs, "AVX-512 counted %zu values out of range, scalar %zu", bv, bs);
		TEST_CHECK(memcmp(as, av, M * sizeof(dnn_bsum)) == 0, "the AVX-512 loop gives other integers than the scalar one");
		free(as);
		free(av);
	}
	free(v);
}

/* Chunk c of K over B images: [*lo, *hi), the first B mod K chunks one image more. */
static void chunk_range(int c, int K, int *lo, int *hi)
{
	const int q = B / K, r = B % K;
	*lo = c * q + (c < r ? c : r);
	*hi = *lo + q + (c < r);
}

/* The chunk tree of graph/chunksum.c over K partials (p[0] gets the sum), or reverse order. */
static void tree_f(float *p, size_t n, int K)
{
	for (int s = 1; s < K; s *= 2)
		for (int c = 0; c + s < K; c += 2 * s)
			for (size_t i = 0; i < n; i++)
				p[(size_t)c * n + i] += p[(size_t)(c + s) * n + i];
}
static void tree_x(dnn_bsum *p, size_t n, int K, int reverse)
{
	if (reverse) {
		for (int c = K - 2; c >= 0; c--)
			dnn_bsum_merge(&p[(size_t)c * n], &p[(size_t)(c + 1) * n], n);
		return;
	}
	for (int s = 1; s < K; s *= 2)
		for (int c = 0; c + s < K; c += 2 * s)
			dnn_bsum_merge(&p[(size_t)c * n], &p[(size_t)(c + s) * n], n);
}

/* One cut of the batch into KC chunks with blocks of `block` images: the exact sums added by
 * the chunk tree and in reverse, rounded, against ref (K = 1, block 1: set by the first call);
 * the float path against fref (block 1 only: fref non-NULL). */
static void check_chunking(const dnn_conv2d_args *a, const float *x, const float *dy, size_t nx, size_t ny, size_t nw,
			   int block, int KC, const char *what, dnn_bsum *part, float *fpart, float *work, float *y,
			   float *fref, float *ref)
{
	memset(part, 0, 8 * nw * sizeof(dnn_bsum));
	memset(fpart, 0, 12 * nw * sizeof(float));
	for (int c = 0; c < KC; c++) {
		int lo, hi;
		chunk_range(c, KC, &lo, &hi);
		dnn_conv2d_args ac = *a;
		ac.N = hi - lo;
		/* Chunk c's exact sum goes to part[c mod 8], merged there: integer adds, any order. */
		dnn_bsum *pc = &part[(size_t)(c % 8) * nw], *tmp = calloc(nw, sizeof(dnn_bsum));
		size_t nbad = dnn_conv2d_backward_filter_bsum_cpu(tmp, x + lo * nx, dy + lo * ny, &ac, block, work);
		TEST_CHECK(nbad == 0, "%s: %zu values out of the grid's range", what, nbad);
		dnn_bsum_merge(pc, tmp, nw);
		free(tmp);
		if (fref)
			dnn_conv2d_backward_filter_cpu(&fpart[c * nw], x + lo * nx, dy + lo * ny, &ac);
	}
	const int np = KC < 8 ? KC : 8;
	if (fref) {
		tree_f(fpart, nw, KC);
		if (KC == 1)
			memcpy(fref, fpart, nw * sizeof(float));
		else if (memcmp(fref, fpart, nw * sizeof(float)) != 0)
			float_path_differs++;
	}
	dnn_bsum *copy = malloc(8 * nw * sizeof(dnn_bsum));
	for (int reverse = 0; reverse <= (np > 2); reverse++) {
		memcpy(copy, part, (size_t)np * nw * sizeof(dnn_bsum));
		tree_x(copy, nw, np, reverse);
		dnn_bsum_round(y, copy, nw);
		if (KC == 1 && block == 1) {
			memcpy(ref, y, nw * sizeof(float));
			continue;
		}
		char name[160];
		snprintf(name, sizeof(name), "%s, %d chunks, blocks of %d (%s) vs 1 chunk", what, KC, block,
			 reverse ? "reverse" : "tree");
		TEST_CHECK(block > 1 || test_same_bits(name, y, ref, nw), "%s: other bits", name);
		if (block > 1) { /* blocks of 2 or 3: the same bits as the same blocks in 1 chunk */
			if (KC == 1)
				memcpy(work + nw, y, nw * sizeof(float));
			else
				TEST_CHECK(test_same_bits(name, y, work + nw, nw), "%s: other bits", name);
		}
		exact_cases++;
	}
	free(copy);
}

static const char *algo_name(int algo)
{
	return algo == DNN_CONV_ALGO_IM2COL ? "im2col" : algo == DNN_CONV_ALGO_WINOGRAD ? "F2" : "auto";
}

/* 2 and 3 for one conv shape and algorithm. */
static void check_conv(int algo, int C, int H, int K, int k, int stride)
{
	dnn_conv2d_args a = conv_shape(B, C, H, H, K, k, k, stride, k / 2, 1);
	a.algo = algo;
	char what[96];
	snprintf(what, sizeof(what), "%s C%d %dx%d K%d k%d s%d", algo_name(algo), C, H, H, K, k, stride);
	if (dnn_conv2d_args_finish(&a) != 0) {
		TEST_CHECK(0, "%s: args rejected", what);
		return;
	}
	const size_t nx = (size_t)C * H * H, ny = (size_t)K * a.P * a.Q, nw = (size_t)K * C * k * k;
	float *x = alloc_f(B * nx), *dy = alloc_f(B * ny), *work = alloc_f(2 * nw), *ref = alloc_f(nw), *y = alloc_f(nw);
	float *fpart = alloc_f(12 * nw), *fref = alloc_f(nw), *dwn = alloc_f(B * nw);
	dnn_bsum *part = calloc(8 * nw, sizeof(dnn_bsum));
	test_fill_uniform(x, B * nx, -1, 1);
	test_fill_uniform(dy, B * ny, -1, 1);
	static const int chunkings[] = {1, 2, 3, 4, 5, 6, 8, 12};
	for (int block = 1; block <= 3; block++)
		for (size_t kc = 0; kc < sizeof(chunkings) / sizeof(*chunkings); kc++) {
			const int KC = chunkings[kc];
			int fits = 1;
			for (int c = 0; c < KC; c++) {
				int lo, hi;
				chunk_range(c, KC, &lo, &hi);
				fits &= lo % block == 0 && (hi % block == 0 || hi == B);
			}
			if (!fits)
				continue; /* a cut the block size refuses */
			check_chunking(&a, x, dy, nx, ny, nw, block, KC, what, part, fpart, work, y, block == 1 ? fref : NULL,
				       ref);
		}
	/* 3. Accuracy of ref (K = 1) against the per-image gradients summed in double. */
	dnn_conv2d_args one = a;
	one.N = 1;
	memset(dwn, 0, B * nw * sizeof(float));
	for (int n = 0; n < B; n++)
		dnn_conv2d_backward_filter_cpu(dwn + n * nw, x + n * nx, dy + n * ny, &one);
	int bad = 0, fbad = 0;
	for (size_t i = 0; i < nw; i++) {
		double s = 0, sa = 0;
		float f = 0;
		for (int n = 0; n < B; n++) {
			s += dwn[n * nw + i];
			sa += fabs(dwn[n * nw + i]);
			f += dwn[n * nw + i];
		}
		const double d = 23 * 0x1p-53 * sa, bound = 0x1p-24 * (fabs(s) + d) + d + B * 0x1p-80;
		bad += fabs(ref[i] - s) > bound;
		fbad += fabs(f - s) > bound;
	}
	TEST_CHECK(bad == 0, "%s: %d of %zu elements farther than half an ulp from the per-image sum", what, bad, nw);
	bound_broken_by_float += fbad > 0;
	free(x);
	free(dy);
	free(work);
	free(ref);
	free(y);
	free(fpart);
	free(fref);
	free(dwn);
	free(part);
}

int main(void)
{
	test_rng_seed(7);
	check_accumulator();
	const int algos[] = {DNN_CONV_ALGO_AUTO, DNN_CONV_ALGO_IM2COL, DNN_CONV_ALGO_WINOGRAD};
	int nshapes = 0;
	for (size_t i = 0; i < sizeof(algos) / sizeof(*algos); i++) {
		if (algos[i] == DNN_CONV_ALGO_WINOGRAD && !test_winograd_runs_here())
			continue;
		check_conv(algos[i], 1, 28, 16, 3, 1);  /* ResNet-8's stem */
		check_conv(algos[i], 16, 28, 16, 3, 1); /* ResNet-8's first stage */
		check_conv(algos[i], 16, 28, 32, 3, 2); /* stride-2 3x3 */
		check_conv(algos[i], 16, 28, 32, 1, 2); /* 1x1 stride-2 projection */
		check_conv(algos[i], 32, 14, 32, 3, 1); /* partial Winograd tiles */
		check_conv(algos[i], 64, 7, 64, 3, 1);
		check_conv(algos[i], 3, 32, 16, 3, 1);  /* ResNet-20's RGB stem */
		check_conv(algos[i], 64, 8, 64, 3, 1);  /* ResNet-20's last stage */
		nshapes += 8;
	}
	TEST_CHECK(float_path_differs > 0, "negative control: the float chunk sums gave the bits of 1 chunk in every case");
	TEST_CHECK(bound_broken_by_float > 0, "negative control: the image-by-image float sum met the half-ulp bound everywhere");
	printf("unit_batchsum: %d (shape, algorithm) pairs, %d chunkings bit-identical to 1 chunk; float path: %d chunkings "
	       "differ, %d shapes break the half-ulp bound\n",
	       nshapes, exact_cases, float_path_differs, bound_broken_by_float);
	return test_report("unit_batchsum");
}
