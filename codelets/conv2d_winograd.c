/* conv2d_winograd.c — Winograd F(2x2, 3x3) and F(4x4, 3x3) convs on the CPU (AVX2 + FMA; the GEMMs in AVX-512 where
 * the CPU has it): the forward pass (also used, with the flipped kernel, for backward data) and
 * the weight gradient.
 *
 * Each 2x2 block of output pixels ("tile") of each output channel k is
 *     Y = A^T [ sum_c (G g_kc G^T) .* (B^T d_c B) ] A
 * with d_c the 4x4 input patch of channel c under the tile and g_kc the 3x3 filter (Lavin and
 * Gray, "Fast Algorithms for Convolutional Neural Networks", 2016):
 *     B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],  G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1],
 *     A^T = [1 1 1 0; 0 1 -1 -1].
 * The sum over c, for each of the 16 positions xi of the 4x4 transformed tile, is a GEMM
 *     M[xi] (K, tiles) = U[xi] (K, C) @ V[xi] (C, tiles),
 * 16 GEMMs of 1/9 the size of the im2col GEMM for 4/9 as many pixels: 2.25x fewer
 * multiply-adds, plus the transforms.
 *
 * Layout and blocking:
 *   - filters: U (16, K, C), transformed once per call;
 *   - input: a zero-padded copy of one image split into even and odd columns (E, O), so that
 *     the 4 columns of tile j are E[j], O[j], E[j+1], O[j+1]: the input transform of 8 tiles of
 *     a row is plain 8-float vector arithmetic on 16 loads (rows 2i..2i+3), done rows first;
 *   - tiles are processed in chunks (tile rows of one image, or several whole images when an
 *     image has few tiles) sized so that V (16, C, cap) and M (16, K, cap) stay within
 *     WINO_BUDGET floats (256 KiB, half the L2), like the column buffer of the im2col path;
 *   - the 16 GEMMs are register-blocked AVX2 loops (4 output channels x 24 tiles: 12 FMA
 *     chains; on an AVX-512 CPU 512-bit ones, gemm512 and gemm_nt512, bit-identical), not
 *     OpenBLAS: their inner dimension is only C (16..64) and a chunk has a few dozen to a few
 *     hundred tiles, 16 calls per chunk, too small for sgemm's packing and call overhead to
 *     pay off (a choice by that reasoning; a cblas_sgemm version was not measured).
 *   - the weight gradient is the adjoint of the forward: dU[xi] (K, C) = sum over tiles of
 *     (A dY A^T)[xi] (K, tiles) @ V[xi] (C, tiles)^T, then dw += G^T dU G. Its GEMMs reduce
 *     over tiles: 4 x 3 (k, c) dot products of 8-lane FMA chains, summed across lanes at the
 *     end of each chunk, whose chunks are therefore longer (WINO_FILTER_BUDGET).
 * Accuracy: the transforms only add, subtract and halve, so the float result differs from the
 * direct sum by a few ulps of the partial sums (tests/unit_conv2d_winograd.c bounds it).
 *
 * F(4x4, 3x3) (dnn_wino4_forward; DNN_CONV_ALGO=winograd4; auto's WINO4_RULE, off for now, in
 * conv2d_algo.c): the same scheme on 4x4 output tiles, Y = A^T [sum_c (G g G^T) .* (B^T d B)] A
 * with d the 6x6 patch: 36 GEMMs of (K, C) @ (C, tiles) for 16 outputs per tile, 4x fewer
 * multiply-adds than the direct conv (F(2x2): 2.25x), i.e. 1.78x fewer GEMM flops than F(2x2),
 * for costlier transforms. Built on the points 0, 1, -1, 1/2, -2 and infinity (Lavin and Gray
 * use 0, +-1, +-2), scaled so that B^T has small integers:
 *     B^T = [2 -3 -4 3 2 0; 0 -2 1 5 2 0; 0 -2 5 -1 -2 0; 0 2 1 -2 -1 0; 0 1 -2 -1 2 0; 0 2 -3 -4 3 2],
 *     G = [1/2 0 0; 1/6 1/6 1/6; 1/6 -1/6 1/6; 2/15 1/15 1/30; 1/30 -1/15 2/15; 0 0 1/2],
 *     A^T = [1 1 1 8 1 0; 0 1 -1 4 -2 0; 0 1 1 2 4 0; 0 1 -1 1 -8 1].
 * Error bound: to first order |y~ - y| <= n eps |A^T| [sum_c (|G| |g_c| |G|^T) .* (|B^T| |d_c| |B|)] |A|
 * (n: the roundings along one path, mostly the C-long sum of the GEMM). With inputs and weights
 * of one magnitude, the bracket is at most 97.4 x sum |x w| (at a tile's corner outputs; 7.1
 * for F(2x2), 256 with Lavin's points, whose outputs in float are ~2x worse), so the rounding
 * error can be ~14x F(2x2)'s; measured 5-10x on the unit test's shapes, ~1e-6 of sum |x w| on
 * the ResNet stages. Only the filter constants 1/6, 1/15, 1/30 are inexact in float.
 *   - the image is split into its 4 column phases (padded column 4 j + k at phase k, index j),
 *     so that the 6 columns of tile j are phases 0..3 at j and phases 0, 1 at j + 1 (the
 *     F(2x2) even/odd split, with 4 phases);
 *   - images of 1, 2 or 4 tiles per row (up to 4, 8 or 16 output columns: the ResNets' 16x16,
 *     14x14, 8x8 and 7x7 stages) run as row groups: each 8-tile vector takes the tiles of 8 / tw
 *     consecutive tile rows of the chunk (several images' split copies), loaded as 8 / tw
 *     pieces, and its outputs are stored as pieces straight into y, masked at partial tiles (no
 *     copy, no empty lane: a row at a time, the vectors were 1/4 (8x8) or 1/2 (16x16) full);
 *   - other narrow images (fewer than 8 tiles per row) run as strips: the 6 input rows of every
 *     tile row of a chunk side by side in one long row, so that the 8-tile vectors are full;
 *     the last tile slot of each tile row straddles two and is computed and dropped (1 in
 *     tw + 1);
 *   - chunks of WINO4_BUDGET floats (4x F(2x2)'s, measured), the same GEMMs;
 *   - its transforms hold 36 vectors: where the CPU has AVX-512 they are compiled a second time
 *     for AVX-512 VL (32 registers), the same 8-float operations.
 * The weight gradient stays F(2x2).
 */
#include "conv2d_winograd.h"
#include "dnn_codelet.h"
#include "short_copy.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Floats of V + M per chunk of tiles. */
#define WINO_BUDGET (64 * 1024)
/* The same for F(4x4, 3x3), 4x larger (1 MiB, half this Xeon's L2): its chunks hold 2.25x
 * fewer tiles for the same floats, and on the ResNet shapes (16 images, dnn_op_bench, fwd ms
 * at 64K / 128K / 256K / 512K floats) 16x32x32: 0.45 / 0.41 / 0.44 / 0.53, 32x16x16: 0.68 /
 * 0.47 / 0.39 / 0.39, 64x8x8: 0.54 / 0.52 / 0.41 / 0.42 (loaded machine, +-10%; before the
 * row groups, with 32x16x16 as strips and 64x8x8 one tile row at a time). With the row groups,
 * at 128K / 256K / 512K, twice: 16x32x32 0.42 / 0.43-0.47 / 0.56, 32x16x16 0.28-0.29 / 0.30 /
 * 0.33, 64x8x8 0.35-0.36 / 0.30 / 0.29-0.32; ResNet-20's 21 convs 6.9 / 6.8-7.1 / 7.7-8.0. */
#define WINO4_BUDGET (256 * 1024)
/* Floats of V + D per chunk in the weight gradient: its GEMMs reduce over the tiles, and each
 * register block ends with horizontal sums, so longer chunks pay (they stream from L2/L3). */
#define WINO_FILTER_BUDGET (256 * 1024)
/* A chunk has at least this many tiles (one 24-tile register block). */
#define WINO_MIN_TILES 24

typedef struct {
	int m, nxi;   // output tile m x m (2 or 4), transformed tile (m + 2)^2 positions
	int th, tw;   // tiles per image: ceil(P/m) x ceil(Q/m)
	int hp, l;    // rows of the padded image (m th + 2), entries per phase row (tw + 1)
	size_t eo;    // floats of one image split into its m column phases: m C hp l
	int group;    // images per chunk (> 1 only when an image has fewer tiles than a chunk)
	int rows;     // tile rows per chunk (th when group > 1)
	size_t cap;   // tiles of the largest chunk + 7, rounded up to 8: row stride of V and M
	int twv;      // tw rounded up to 8
	int groups;   // F(4x4) on 4, 8 or 16 columns: vectors of 8 / tw tile rows (row groups)
	size_t eoall; // floats of the split images (groups: of the chunk's) or of the strips
	int strips;   // F(4x4) on other narrow images: the tile rows of a chunk side by side
	int slot;     // tiles per tile row in V: tw, or tw + 1 in strips (one unused slot)
	size_t sl;    // in strips: entries per phase row of the chunk's strips
} wino_plan;

static int imin(int a, int b) { return a < b ? a : b; }

static wino_plan plan_make(const dnn_wino_shape *s, size_t budget, int m)
{
	wino_plan pl;
	pl.m = m;
	pl.nxi = (m + 2) * (m + 2);
	pl.th = (s->P + m - 1) / m;
	pl.tw = (s->Q + m - 1) / m;
	pl.hp = m * pl.th + 2;
	pl.l = pl.tw + 1;
	pl.eo = (size_t)m * s->C * pl.hp * pl.l;
	pl.twv = (pl.tw + 7) / 8 * 8;
	/* Strips: with fewer than 8 tiles per row, F(4x4)'s 8-tile vectors would run mostly
	 * empty along a tile row (2 of 8 lanes on an 8x8 image); instead the 6 input rows of each
	 * tile row of a chunk are copied side by side into one long row of tw + 1 slots each (the
	 * last slot, which straddles two tile rows, is computed and thrown away). Whole tiles only. */
	pl.groups = m == 4 && (pl.tw == 1 || pl.tw == 2 || pl.tw == 4);
	pl.strips = m == 4 && !pl.groups && pl.tw < 8 && s->P % 4 == 0 && s->Q % 4 == 0;
	pl.slot = pl.tw + pl.strips;
	size_t tpi = (size_t)pl.th * pl.slot;
	size_t target = budget / ((size_t)pl.nxi * ((size_t)s->C + s->K));
	if (target < WINO_MIN_TILES)
		target = WINO_MIN_TILES;
	if (tpi >= target) {
		int rows = (int)(target / (size_t)pl.tw);
		rows = rows < 1 ? 1 : imin(rows, pl.th);
		int nblocks = (pl.th + rows - 1) / rows;
		pl.group = 1;
		pl.rows = (pl.th + nblocks - 1) / nblocks;
	} else {
		int group = imin((int)(target / tpi), s->N);
		int nblocks = (s->N + group - 1) / group;
		pl.group = (s->N + nblocks - 1) / nblocks;
		pl.rows = pl.th;
	}
	/* + 7: the transforms store whole 8-float vectors, up to 7 floats past a chunk's last tile. */
	pl.cap = ((size_t)pl.group * pl.rows * pl.slot + 7 + 7) / 8 * 8;
	pl.sl = pl.cap + 8;
	pl.eoall = pl.strips ? 4 * (size_t)s->C * 6 * pl.sl : pl.groups ? (size_t)pl.group * pl.eo : pl.eo;
	return pl;
}

/* U (nxi, K, C), the split image(s), V (nxi, C, cap), M (nxi, K, cap), m output rows of m twv
 * (in strips: 4 rows of 4 cap), and in row groups three size_t per tile row of a chunk. */
static size_t wino_work(const dnn_wino_shape *s, int m)
{
	wino_plan pl = plan_make(s, m == 4 ? WINO4_BUDGET : WINO_BUDGET, m);
	return (size_t)pl.nxi * s->K * s->C + pl.eoall + (size_t)pl.nxi * ((size_t)s->C + s->K) * pl.cap +
	       (pl.strips ? 16 * pl.cap : (size_t)m * m * pl.twv) +
	       3 * (size_t)pl.group * pl.rows * (sizeof(size_t) / sizeof(float)) + 2; // + 2: alignment
}

size_t dnn_wino_work(const dnn_wino_shape *s) { return wino_work(s, 2); }

size_t dnn_wino4_work(const dnn_wino_shape *s) { return wino_work(s, 4); }

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "simd_tail.h"

int dnn_wino_supported(void)
{
	static int cached = -1;
	if (cached < 0) {
		__builtin_cpu_init();
		cached = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	}
	return cached;
}

/* The 16 GEMMs' ISA: AVX-512 where the CPU has it (and the caller has not asked for AVX2). */
static int wino_avx512 = -1; // -1: not chosen yet, 0: AVX2, 1: AVX-512

int dnn_wino_set_avx512(int on)
{
	__builtin_cpu_init();
	wino_avx512 = on && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
	return wino_avx512;
}

int dnn_wino_avx512(void)
{
	if (wino_avx512 < 0)
		dnn_wino_set_avx512(1);
	return wino_avx512;
}

/* U (16, K, C) = G g G^T for every (k, c) of w (K, C, 3, 3): 8 filters f = k C + c at a time,
 * their 9 taps gathered (stride 9), each xi stored as 8 consecutive floats; the rest one by one. */
__attribute__((target("avx2,fma"))) static void filter_transform(float *restrict u,
								const float *restrict w, int K, int C)
{
	const size_t kc = (size_t)K * C;
	const __m256i idx = _mm256_setr_epi32(0, 9, 18, 27, 36, 45, 54, 63);
	const __m256 half = _mm256_set1_ps(0.5f);
	size_t f = 0;
	for (; f + 8 <= kc; f += 8) {
		__m256 g[9], t[4][3];
		for (int i = 0; i < 9; i++)
			g[i] = _mm256_i32gather_ps(w + f * 9 + i, idx, 4);
		for (int q = 0; q < 3; q++) { // t = G g
			t[0][q] = g[q];
			t[1][q] = _mm256_mul_ps(half, _mm256_add_ps(_mm256_add_ps(g[q], g[3 + q]), g[6 + q]));
			t[2][q] = _mm256_mul_ps(half, _mm256_add_ps(_mm256_sub_ps(g[q], g[3 + q]), g[6 + q]));
			t[3][q] = g[6 + q];
		}
		for (int a = 0; a < 4; a++) { // U = t G^T
			float *d = u + f + (size_t)(4 * a) * kc;
			_mm256_storeu_ps(d, t[a][0]);
			_mm256_storeu_ps(d + kc, _mm256_mul_ps(half, _mm256_add_ps(_mm256_add_ps(t[a][0], t[a][1]), t[a][2])));
			_mm256_storeu_ps(d + 2 * kc, _mm256_mul_ps(half, _mm256_add_ps(_mm256_sub_ps(t[a][0], t[a][1]), t[a][2])));
			_mm256_storeu_ps(d + 3 * kc, t[a][2]);
		}
	}
	for (; f < kc; f++) {
		const float *g = w + f * 9;
		float t[4][3];
		for (int s = 0; s < 3; s++) {
			t[0][s] = g[s];
			t[1][s] = 0.5f * (g[s] + g[3 + s] + g[6 + s]);
			t[2][s] = 0.5f * (g[s] - g[3 + s] + g[6 + s]);
			t[3][s] = g[6 + s];
		}
		float *d = u + f;
		for (int a = 0; a < 4; a++) {
			d[(a * 4 + 0) * kc] = t[a][0];
			d[(a * 4 + 1) * kc] = 0.5f * (t[a][0] + t[a][1] + t[a][2]);
			d[(a * 4 + 2) * kc] = 0.5f * (t[a][0] - t[a][1] + t[a][2]);
			d[(a * 4 + 3) * kc] = t[a][2];
		}
	}
}

/* Zero p[a..b): the padding columns of an E or O row (0 to pad + 1 floats), or a whole padding
 * row. Plain stores (short_copy.h), not a masked vector store: AVX2's vmaskmovps to memory is
 * microcoded on AMD Zen (perf on Zen 4 put ~40% of split_image's time on the instructions after
 * those stores; cheap on Intel); not a memset call per span either (as costly as the row copy). */
static inline void zero_span(float *p, int a, int b) { dnn_zero_floats(p + a, b - a); }

/* x (C, H, W) -> its zero-padded copy (C, hp, 2 l) split into even columns E (C, hp, l) and
 * odd columns O (C, hp, l), O right after E. Padded column pw + i holds x column i, so the
 * even columns of x go to O (pw odd) or E (pw even) from index pw / 2 on, the odd ones to the
 * other array from (pw + 1) / 2 on: each x row is deinterleaved straight into place, 16
 * floats at a time (no padded copy of the row: reading one back right after writing it
 * stalls on store forwarding). Only the padding is zeroed (a per-row memset of whole rows
 * cost as much as the copy). x is read once, in order; in a training step it has usually left
 * the core's caches since the task that wrote it, and that read is most of this function's
 * time there (software prefetching 4 or 48 rows ahead measured no different on the Xeon). */
__attribute__((target("avx2,fma"))) static void split_image(float *restrict eo, const float *restrict x,
							   const dnn_wino_shape *s, const wino_plan *pl)
{
	const int l = pl->l, H = s->H, W = s->W, pw = s->pad_w;
	float *e = eo, *o = eo + (size_t)s->C * pl->hp * l;
	const int ne = imin((W + 1) / 2, l - pw / 2), no = imin(W / 2, l - (pw + 1) / 2);
	/* the span of an E row and of an O row that x fills: [se, se + ce), [so, so + co) */
	const int se = pw % 2 ? (pw + 1) / 2 : pw / 2, ce = pw % 2 ? no : ne;
	const int so = pw % 2 ? pw / 2 : (pw + 1) / 2, co = pw % 2 ? ne : no;
	for (int c = 0; c < s->C; c++)
		for (int pr = 0; pr < pl->hp; pr++) {
			size_t off = ((size_t)c * pl->hp + pr) * l;
			int ih = pr - s->pad_h;
			if (ih < 0 || ih >= H) {
				zero_span(e + off, 0, l);
				zero_span(o + off, 0, l);
				continue;
			}
			zero_span(e + off, 0, se);
			zero_span(e + off, se + ce, l);
			zero_span(o + off, 0, so);
			zero_span(o + off, so + co, l);
			const float *restrict xr = x + ((size_t)c * H + ih) * W;
			float *restrict ev = (pw % 2 ? o : e) + off + pw / 2; // x columns 0, 2, 4, ...
			float *restrict od = (pw % 2 ? e : o) + off + (pw + 1) / 2; // x columns 1, 3, ...
			int m = 0;
			for (; m + 8 <= no && 2 * m + 16 <= W; m += 8) {
				__m256 a = _mm256_loadu_ps(xr + 2 * m), b = _mm256_loadu_ps(xr + 2 * m + 8);
				__m256 ve = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)); // a0 a2 b0 b2 | a4 a6 b4 b6
				__m256 vo = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
				_mm256_storeu_ps(ev + m, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ve), 0xd8)));
				_mm256_storeu_ps(od + m, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(vo), 0xd8)));
			}
			for (int q = m; q < ne; q++)
				ev[q] = xr[2 * q];
			for (int q = m; q < no; q++)
				od[q] = xr[2 * q + 1];
		}
}

/* Input transform of the tw tiles of tile row i of channel c: V[xi][t0 + j] = (B^T d B)[xi] of
 * tile j, xi = 4 u + v, for xi in 0..16 at v + xi * vs. e, o: row 2i of the channel in E, O. */
__attribute__((target("avx2,fma"))) static void input_row(float *restrict v, size_t vs,
							 const float *restrict e,
							 const float *restrict o, int l, int tw)
{
	/* Whole vectors even for the last, partial one: its extra lanes read past the row (within
	 * the scratch: E and O are followed by V) and store past the tile row, into the next tile
	 * row (written later) or the slack at the end of a V row (see wino_plan.cap). */
	for (int j = 0; j < tw; j += 8) {
		__m256 ej[4], ek[4], oj[4], ok[4]; // rows 0..3 at columns 2j, 2j+2 (E) and 2j+1, 2j+3 (O)
		for (int r = 0; r < 4; r++) {
			ej[r] = _mm256_loadu_ps(e + (size_t)r * l + j);
			ek[r] = _mm256_loadu_ps(e + (size_t)r * l + j + 1);
			oj[r] = _mm256_loadu_ps(o + (size_t)r * l + j);
			ok[r] = _mm256_loadu_ps(o + (size_t)r * l + j + 1);
		}
		/* Rows: B^T d. */
		__m256 tj[4], tk[4], sj[4], sk[4]; // transformed rows u of ej, ek, oj, ok
#define BT(dst, src)                                                                               \
	dst[0] = _mm256_sub_ps(src[0], src[2]);                                                    \
	dst[1] = _mm256_add_ps(src[1], src[2]);                                                    \
	dst[2] = _mm256_sub_ps(src[2], src[1]);                                                    \
	dst[3] = _mm256_sub_ps(src[1], src[3])
		BT(tj, ej);
		BT(tk, ek);
		BT(sj, oj);
		BT(sk, ok);
#undef BT
		/* Columns: (B^T d) B; the columns of tile j are (tj, sj, tk, sk). */
		for (int u = 0; u < 4; u++) {
			float *d = v + (size_t)(4 * u) * vs + j;
			_mm256_storeu_ps(d, _mm256_sub_ps(tj[u], tk[u]));
			_mm256_storeu_ps(d + vs, _mm256_add_ps(sj[u], tk[u]));
			_mm256_storeu_ps(d + 2 * vs, _mm256_sub_ps(tk[u], sj[u]));
			_mm256_storeu_ps(d + 3 * vs, _mm256_sub_ps(sj[u], sk[u]));
		}
	}
}

/* Output transform of the tw tiles at mm + xi * ms (xi in 0..16) into the 2 output rows
 * out0, out1 (2 twv floats each, interleaved: out0[2j + b] is column 2j + b). */
__attribute__((target("avx2,fma"))) static void output_row(float *restrict out0, float *restrict out1,
							  const float *restrict mm, size_t ms, int tw)
{
	/* Whole vectors: the last one's extra lanes read the next tiles of the chunk or the slack
	 * of the M row, and land in out0/out1 past the Q columns that are used. */
	for (int j = 0; j < tw; j += 8) {
		__m256 s0[4], s1[4];
		for (int u = 0; u < 4; u++) {
			const float *p = mm + (size_t)(4 * u) * ms + j;
			__m256 m0 = _mm256_loadu_ps(p), m1 = _mm256_loadu_ps(p + ms);
			__m256 m2 = _mm256_loadu_ps(p + 2 * ms), m3 = _mm256_loadu_ps(p + 3 * ms);
			s0[u] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2); // columns: M A
			s1[u] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
		}
		__m256 y00 = _mm256_add_ps(_mm256_add_ps(s0[0], s0[1]), s0[2]); // rows: A^T (M A)
		__m256 y01 = _mm256_add_ps(_mm256_add_ps(s1[0], s1[1]), s1[2]);
		__m256 y10 = _mm256_sub_ps(_mm256_sub_ps(s0[1], s0[2]), s0[3]);
		__m256 y11 = _mm256_sub_ps(_mm256_sub_ps(s1[1], s1[2]), s1[3]);
		/* Interleave (y00, y01) and (y10, y11) into output columns. */
		__m256 lo = _mm256_unpacklo_ps(y00, y01), hi = _mm256_unpackhi_ps(y00, y01);
		_mm256_storeu_ps(out0 + 2 * j, _mm256_permute2f128_ps(lo, hi, 0x20));
		_mm256_storeu_ps(out0 + 2 * j + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
		lo = _mm256_unpacklo_ps(y10, y11);
		hi = _mm256_unpackhi_ps(y10, y11);
		_mm256_storeu_ps(out1 + 2 * j, _mm256_permute2f128_ps(lo, hi, 0x20));
		_mm256_storeu_ps(out1 + 2 * j + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
	}
}

/* m (KB, 8 NV) at ldm = u (KB, C) at ldu @ v (C, 8 NV) at ldv: KB x NV FMA chains. */
static inline __attribute__((always_inline, target("avx2,fma"))) void
gemm_block(float *m, size_t ldm, const float *u, int ldu, const float *v, size_t ldv, int C,
	   const int KB, const int NV)
{
	__m256 acc[4][3];
	for (int kb = 0; kb < KB; kb++)
		for (int n = 0; n < NV; n++)
			acc[kb][n] = _mm256_setzero_ps();
	for (int c = 0; c < C; c++) {
		__m256 x[3];
		for (int n = 0; n < NV; n++)
			x[n] = _mm256_loadu_ps(v + (size_t)c * ldv + 8 * n);
		for (int kb = 0; kb < KB; kb++) {
			const __m256 b = _mm256_broadcast_ss(u + (size_t)kb * ldu + c);
			for (int n = 0; n < NV; n++)
				acc[kb][n] = _mm256_fmadd_ps(b, x[n], acc[kb][n]);
		}
	}
	for (int kb = 0; kb < KB; kb++)
		for (int n = 0; n < NV; n++)
			_mm256_storeu_ps(m + (size_t)kb * ldm + 8 * n, acc[kb][n]);
}

/* M (K, nt) at ld = U (K, C) @ V (C, nt) at ld, nt a multiple of 8. */
__attribute__((target("avx2,fma"))) static void gemm(float *m, const float *u, const float *v,
						    size_t ld, int K, int C, int nt)
{
	for (int t0 = 0; t0 < nt; t0 += 24) {
		const int nv = imin(3, (nt - t0) / 8);
		for (int k0 = 0; k0 < K;) {
			const int kb = imin(4, K - k0);
			float *mb = m + (size_t)k0 * ld + t0;
			const float *ub = u + (size_t)k0 * C, *vb = v + t0;
#define GEMM_CASE(KB_)                                                                             \
	case KB_:                                                                                  \
		if (nv == 3)                                                                       \
			gemm_block(mb, ld, ub, C, vb, ld, C, KB_, 3);                              \
		else if (nv == 2)                                                                  \
			gemm_block(mb, ld, ub, C, vb, ld, C, KB_, 2);                              \
		else                                                                               \
			gemm_block(mb, ld, ub, C, vb, ld, C, KB_, 1);                              \
		break
			switch (kb) {
				GEMM_CASE(4);
				GEMM_CASE(3);
				GEMM_CASE(2);
				GEMM_CASE(1);
			}
#undef GEMM_CASE
			k0 += kb;
		}
	}
}

/* The AVX-512 forward GEMM: gemm_block with 16-float vectors, up to 8 output channels x 48
 * tiles (24 FMA chains). On a core with two 512-bit FMA ports (Intel's AVX-512 server cores)
 * an AVX2 loop reaches at most half the FMA rate that sgemm runs at; on a core that splits
 * 512-bit operations in two (AMD Zen 4) both loops have the same peak. Each output element is
 * the same chain of FMAs over c, in the same order, as in gemm_block: bit-identical results.
 * The last vector of a block may hold 8 tiles (nt is a multiple of 8): masked load and store. */
static inline __attribute__((always_inline, target("avx512f,avx512dq,avx2,fma"))) void
gemm_block512(float *m, size_t ldm, const float *u, int ldu, const float *v, size_t ldv, int C,
	      const int KB, const int NV, __mmask16 last)
{
	__m512 acc[8][3];
	for (int kb = 0; kb < KB; kb++)
		for (int n = 0; n < NV; n++)
			acc[kb][n] = _mm512_setzero_ps();
	for (int c = 0; c < C; c++) {
		__m512 x[3];
		for (int n = 0; n < NV; n++)
			x[n] = n == NV - 1 ? _mm512_maskz_loadu_ps(last, v + (size_t)c * ldv + 16 * n)
					   : _mm512_loadu_ps(v + (size_t)c * ldv + 16 * n);
		for (int kb = 0; kb < KB; kb++) {
			const __m512 b = _mm512_set1_ps(u[(size_t)kb * ldu + c]);
			for (int n = 0; n < NV; n++)
				acc[kb][n] = _mm512_fmadd_ps(b, x[n], acc[kb][n]);
		}
	}
	for (int kb = 0; kb < KB; kb++)
		for (int n = 0; n < NV; n++) {
			float *d = m + (size_t)kb * ldm + 16 * n;
			if (n == NV - 1)
				_mm512_mask_storeu_ps(d, last, acc[kb][n]);
			else
				_mm512_storeu_ps(d, acc[kb][n]);
		}
}

/* gemm on gemm_block512: M (K, nt) at ld = U (K, C) @ V (C, nt) at ld, nt a multiple of 8. */
__attribute__((target("avx512f,avx512dq,avx2,fma"))) static void gemm512(float *m, const float *u,
									const float *v, size_t ld, int K,
									int C, int nt)
{
	for (int t0 = 0; t0 < nt; t0 += 48) {
		const int r = imin(48, nt - t0), nv = (r + 15) / 16;
		const __mmask16 last = r % 16 ? 0x00ff : 0xffff;
		for (int k0 = 0; k0 < K;) {
			const int left = K - k0, kb = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
			float *mb = m + (size_t)k0 * ld + t0;
			const float *ub = u + (size_t)k0 * C, *vb = v + t0;
#define GEMM512_CASE(KB_)                                                                          \
	case KB_:                                                                                  \
		if (nv == 3)                                                                       \
			gemm_block512(mb, ld, ub, C, vb, ld, C, KB_, 3, last);                     \
		else if (nv == 2)                                                                  \
			gemm_block512(mb, ld, ub, C, vb, ld, C, KB_, 2, last);                     \
		else                                                                               \
			gemm_block512(mb, ld, ub, C, vb, ld, C, KB_, 1, last);                     \
		break
			switch (kb) {
				GEMM512_CASE(8);
				GEMM512_CASE(4);
				GEMM512_CASE(2);
				GEMM512_CASE(1);
			}
#undef GEMM512_CASE
			k0 += kb;
		}
	}
}

/* ------------------------------------------------------------------ F(4x4, 3x3)
 * The same scheme on 4x4 output tiles: 6x6 input patches, 36 GEMMs, and the image split into
 * its 4 column phases (padded column 4 j + k at phase k, index j) so that the 6 columns of tile
 * j are phases 0..3 at j and phases 0, 1 at j + 1. */

/* (o0..o5) = G (g0, g1, g2), G = [1/2 0 0; 1/6 1/6 1/6; 1/6 -1/6 1/6; 2/15 1/15 1/30;
 * 1/30 -1/15 2/15; 0 0 1/2] (the points 0, 1, -1, 1/2, -2 and infinity; see the header). */
static inline __attribute__((always_inline, target("avx2,fma"))) void g4(__m256 o[6], __m256 g0, __m256 g1, __m256 g2)
{
	const __m256 c2 = _mm256_set1_ps(1.0f / 2), c6 = _mm256_set1_ps(1.0f / 6);
	const __m256 c15 = _mm256_set1_ps(1.0f / 15), c30 = _mm256_set1_ps(1.0f / 30);
	const __m256 a = _mm256_add_ps(g0, g2);
	o[0] = _mm256_mul_ps(g0, c2);
	o[1] = _mm256_mul_ps(_mm256_add_ps(a, g1), c6);
	o[2] = _mm256_mul_ps(_mm256_sub_ps(a, g1), c6);
	o[3] = _mm256_fmadd_ps(g2, c30, _mm256_mul_ps(_mm256_fmadd_ps(g0, _mm256_set1_ps(2.0f), g1), c15));
	o[4] = _mm256_fmadd_ps(g0, c30, _mm256_mul_ps(_mm256_fmsub_ps(g2, _mm256_set1_ps(2.0f), g1), c15));
	o[5] = _mm256_mul_ps(g2, c2);
}

/* U (36, K, C) = G g G^T for every (k, c) of w (K, C, 3, 3): 8 filters f = k C + c at a time,
 * their 9 taps gathered (stride 9, the last group masked), each xi stored as 8 floats. */
__attribute__((target("avx2,fma"))) static void filter_transform4(float *restrict u,
								 const float *restrict w, int K, int C)
{
	const size_t kc = (size_t)K * C;
	const __m256i idx = _mm256_setr_epi32(0, 9, 18, 27, 36, 45, 54, 63);
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	for (size_t f = 0; f < kc; f += 8) {
		const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(kc - f < 8 ? kc - f : 8)), lane);
		__m256 g[9], t[6][3], r[6];
		for (int i = 0; i < 9; i++)
			g[i] = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), w + f * 9 + i, idx,
							_mm256_castsi256_ps(mask), 4);
		for (int q = 0; q < 3; q++) { // t = G g, column q
			g4(r, g[q], g[3 + q], g[6 + q]);
			for (int a = 0; a < 6; a++)
				t[a][q] = r[a];
		}
		for (int a = 0; a < 6; a++) { // U = t G^T, row a
			g4(r, t[a][0], t[a][1], t[a][2]);
			for (int b = 0; b < 6; b++)
				dnn_store_first_ps(u + f + (size_t)(6 * a + b) * kc, r[b], (int)(kc - f));
		}
	}
}

/* One row of x (W floats at xr, or none: a padding row) -> its zero-padded copy split into its
 * 4 column phases, l entries each at ph + k phs: phase k index j holds padded column 4 j + k,
 * x column 4 j + k - pw. 8 indices of the 4 phases at a time: 32 consecutive x columns in 4
 * masked loads (the lanes outside the row read nothing and give 0), a 4x4 transposition within
 * each 128-bit lane, then a lane permutation; masked stores end each phase row at l. */
static inline __attribute__((always_inline, target("avx2,fma"))) void
split_row4(float *ph, size_t phs, const float *xr, int W, int pw, int l)
{
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	const __m256i wv = _mm256_set1_epi32(W), neg = _mm256_set1_epi32(-1);
	if (!xr) {
		for (int k = 0; k < 4; k++)
			zero_span(ph + k * phs, 0, l);
		return;
	}
	for (int j = 0; j < l; j += 8) {
		const int base = 4 * j - pw; // x column of phase 0, index j
		__m256 a[4];
		for (int v = 0; v < 4; v++) {
			__m256i col = _mm256_add_epi32(_mm256_set1_epi32(base + 8 * v), lane);
			__m256i m = _mm256_and_si256(_mm256_cmpgt_epi32(col, neg), _mm256_cmpgt_epi32(wv, col));
			/* Masked-off lanes are not accessed, even before xr or past its row. */
			a[v] = _mm256_maskload_ps((const float *)((uintptr_t)xr + (intptr_t)(base + 8 * v) * (intptr_t)sizeof(float)), m);
		}
		__m256 t0 = _mm256_unpacklo_ps(a[0], a[1]), t1 = _mm256_unpacklo_ps(a[2], a[3]);
		__m256 t2 = _mm256_unpackhi_ps(a[0], a[1]), t3 = _mm256_unpackhi_ps(a[2], a[3]);
		__m256 r[4] = {_mm256_shuffle_ps(t0, t1, 0x44), _mm256_shuffle_ps(t0, t1, 0xee),
			       _mm256_shuffle_ps(t2, t3, 0x44), _mm256_shuffle_ps(t2, t3, 0xee)};
		for (int k = 0; k < 4; k++)
			dnn_store_first_ps(ph + k * phs + j, _mm256_permutevar8x32_ps(r[k], perm), l - j);
	}
}

/* x (C, H, W) -> its zero-padded copy (C, hp, 4 l) split into its 4 column phases (C, hp, l),
 * one after the other. */
__attribute__((target("avx2,fma"))) static void split_image4(float *restrict ph, const float *restrict x,
							    const dnn_wino_shape *s, const wino_plan *pl)
{
	const size_t phs = (size_t)s->C * pl->hp * pl->l;
	for (int c = 0; c < s->C; c++)
		for (int pr = 0; pr < pl->hp; pr++) {
			const int ih = pr - s->pad_h;
			split_row4(ph + ((size_t)c * pl->hp + pr) * pl->l, phs,
				   ih < 0 || ih >= s->H ? NULL : x + ((size_t)c * s->H + ih) * s->W, s->W,
				   s->pad_w, pl->l);
		}
}

/* Strips: the images n0.. n0 + ng - 1, tile rows i0..i1 - 1 of x -> for each channel c and
 * input row q of a tile (0..5), the 4 phases of padded row 4 i + q of every (image, tile row)
 * one after the other, slot entries each, at ph + k phs + (6 c + q) sl, phs = 6 C sl; nt =
 * ng (i1 - i0) slot entries in all, then zeros to sl (the vector reads past the last slot). */
__attribute__((target("avx2,fma"))) static void split_strips4(float *restrict ph, const float *restrict x,
							     const dnn_wino_shape *s, const wino_plan *pl,
							     int ng, int i0, int i1)
{
	const size_t phs = 6 * (size_t)s->C * pl->sl, hw = (size_t)s->H * s->W;
	const int nt = ng * (i1 - i0) * pl->slot;
	for (int c = 0; c < s->C; c++)
		for (int q = 0; q < 6; q++) {
			float *row = ph + (6 * (size_t)c + q) * pl->sl;
			for (int g = 0; g < ng; g++)
				for (int i = i0; i < i1; i++) {
					const int ih = 4 * i + q - s->pad_h;
					const float *xr = ih < 0 || ih >= s->H ? NULL
						: x + ((size_t)g * s->C + c) * hw + (size_t)ih * s->W;
					split_row4(row + (size_t)(g * (i1 - i0) + i - i0) * pl->slot, phs, xr,
						   s->W, s->pad_w, pl->slot);
				}
			for (int k = 0; k < 4; k++)
				zero_span(row + k * phs, nt, (int)pl->sl);
		}
}

/* (r0..r5) = B^T (x0..x5), B^T = [2 -3 -4 3 2 0; 0 -2 1 5 2 0; 0 -2 5 -1 -2 0; 0 2 1 -2 -1 0;
 * 0 1 -2 -1 2 0; 0 2 -3 -4 3 2]. */
static inline __attribute__((always_inline, target("avx2,fma"))) void bt4(__m256 r[6], const __m256 x[6])
{
	const __m256 c2 = _mm256_set1_ps(2.0f), c3 = _mm256_set1_ps(3.0f), c5 = _mm256_set1_ps(5.0f);
	const __m256 a = _mm256_sub_ps(x[1], x[3]), b = _mm256_sub_ps(x[2], x[4]);
	const __m256 t0 = _mm256_fnmadd_ps(c2, x[2], _mm256_add_ps(x[0], x[4])); // x0 - 2 x2 + x4
	const __m256 t5 = _mm256_fnmadd_ps(c2, x[3], _mm256_add_ps(x[1], x[5])); // x1 - 2 x3 + x5
	r[0] = _mm256_fnmadd_ps(c3, a, _mm256_add_ps(t0, t0));
	r[1] = _mm256_fmadd_ps(c2, _mm256_sub_ps(x[4], x[1]), _mm256_fmadd_ps(c5, x[3], x[2]));
	r[2] = _mm256_fnmadd_ps(c2, _mm256_add_ps(x[1], x[4]), _mm256_fmsub_ps(c5, x[2], x[3]));
	r[3] = _mm256_fmadd_ps(c2, a, b);
	r[4] = _mm256_fnmadd_ps(c2, b, a);
	r[5] = _mm256_fnmadd_ps(c3, b, _mm256_add_ps(t5, t5));
}

/* Input transform of the tw tiles of tile row i of channel c: V[xi][j] = (B^T d B)[xi] of tile
 * j, xi = 6 u + v, at v + xi * vs. ph: row 4i of the channel in phase 0; phase k at + k phs.
 * Whole vectors past the row's end, as input_row. */
static inline __attribute__((always_inline, target("avx2,fma"))) void
input_row4(float *restrict v, size_t vs, const float *restrict ph, size_t phs, int l, int tw)
{
	for (int j = 0; j < tw; j += 8) {
		__m256 t[6][6], x[6], r[6]; // t[u][col] = (B^T d)[u][col]
		for (int col = 0; col < 6; col++) {
			const float *p = ph + (size_t)(col & 3) * phs + j + (col >> 2);
			for (int q = 0; q < 6; q++)
				x[q] = _mm256_loadu_ps(p + (size_t)q * l);
			bt4(r, x);
			for (int u = 0; u < 6; u++)
				t[u][col] = r[u];
		}
		for (int u = 0; u < 6; u++) { // (B^T d) B, row u
			bt4(r, t[u]);
			for (int b = 0; b < 6; b++)
				_mm256_storeu_ps(v + (size_t)(6 * u + b) * vs + j, r[b]);
		}
	}
}

/* (o0..o3) = A^T (m0..m5), A^T = [1 1 1 8 1 0; 0 1 -1 4 -2 0; 0 1 1 2 4 0; 0 1 -1 1 -8 1]. */
static inline __attribute__((always_inline, target("avx2,fma"))) void at4(__m256 o[4], const __m256 m[6])
{
	const __m256 c2 = _mm256_set1_ps(2.0f), c4 = _mm256_set1_ps(4.0f), c8 = _mm256_set1_ps(8.0f);
	const __m256 s12 = _mm256_add_ps(m[1], m[2]), d12 = _mm256_sub_ps(m[1], m[2]);
	o[0] = _mm256_fmadd_ps(c8, m[3], _mm256_add_ps(_mm256_add_ps(m[0], s12), m[4]));
	o[1] = _mm256_fmadd_ps(c4, m[3], _mm256_fnmadd_ps(c2, m[4], d12));
	o[2] = _mm256_fmadd_ps(c2, m[3], _mm256_fmadd_ps(c4, m[4], s12));
	o[3] = _mm256_fnmadd_ps(c8, m[4], _mm256_add_ps(_mm256_add_ps(d12, m[3]), m[5]));
}

/* Output transform of the tw tiles at mm + xi * ms (xi in 0..36) into the 4 output rows
 * out[0..3] (4 twv floats each: out[r][4j + b] is column 4j + b). Whole vectors, as output_row. */
static inline __attribute__((always_inline, target("avx2,fma"))) void
output_row4(float *const out[4], const float *restrict mm, size_t ms, int tw)
{
	for (int j = 0; j < tw; j += 8) {
		__m256 s[6][6], x[6], o[4]; // s[c][u] = (M A)[u][c]
		for (int u = 0; u < 6; u++) {
			for (int b = 0; b < 6; b++)
				x[b] = _mm256_loadu_ps(mm + (size_t)(6 * u + b) * ms + j);
			at4(o, x);
			for (int c = 0; c < 4; c++)
				s[c][u] = o[c];
		}
		__m256 y[4][4]; // y[r][c] = (A^T M A)[r][c]
		for (int c = 0; c < 4; c++) {
			at4(o, s[c]);
			for (int r = 0; r < 4; r++)
				y[r][c] = o[r];
		}
		for (int r = 0; r < 4; r++) { // 8 tiles x 4 columns -> 32 consecutive output columns
			__m256 t0 = _mm256_unpacklo_ps(y[r][0], y[r][1]), t1 = _mm256_unpackhi_ps(y[r][0], y[r][1]);
			__m256 t2 = _mm256_unpacklo_ps(y[r][2], y[r][3]), t3 = _mm256_unpackhi_ps(y[r][2], y[r][3]);
			__m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xee);
			__m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xee);
			float *d = out[r] + 4 * j;
			_mm256_storeu_ps(d, _mm256_permute2f128_ps(s0, s1, 0x20));
			_mm256_storeu_ps(d + 8, _mm256_permute2f128_ps(s2, s3, 0x20));
			_mm256_storeu_ps(d + 16, _mm256_permute2f128_ps(s0, s1, 0x31));
			_mm256_storeu_ps(d + 24, _mm256_permute2f128_ps(s2, s3, 0x31));
		}
	}
}

/* input_row4 and output_row4 hold 36 vectors in flight, more than AVX2's 16 registers: where
 * the CPU has AVX-512, the same 8-float code compiled for AVX-512 VL also gets ymm16..31
 * (fewer spills; the same operations, bit-identical). */
__attribute__((target("avx2,fma"))) static void input_row4_avx2(float *restrict v, size_t vs,
							       const float *restrict ph, size_t phs,
							       int l, int tw)
{
	input_row4(v, vs, ph, phs, l, tw);
}

__attribute__((target("avx512f,avx512vl,avx2,fma"))) static void
input_row4_avx512(float *restrict v, size_t vs, const float *restrict ph, size_t phs, int l, int tw)
{
	input_row4(v, vs, ph, phs, l, tw);
}

__attribute__((target("avx2,fma"))) static void output_row4_avx2(float *const out[4],
								const float *restrict mm, size_t ms,
								int tw)
{
	output_row4(out, mm, ms, tw);
}

__attribute__((target("avx512f,avx512vl,avx2,fma"))) static void
output_row4_avx512(float *const out[4], const float *restrict mm, size_t ms, int tw)
{
	output_row4(out, mm, ms, tw);
}

/* Row groups: images of 4, 8 or 16 columns (tw = 1, 2 or 4 tiles per row) fill the 8 lanes of a
 * vector with the tiles of 8 / tw consecutive tile rows of the chunk ("segments"), loaded as
 * 8 / tw pieces of tw floats from the whole-image phase split: no copy of the input rows, no
 * wasted lane. Segment s of the chunk is tile row i of image g: its input rows start at
 * segoff[s] (g eo + 4 i l) past channel c's in the split images, its output rows at yoff[s]
 * (g K P Q + 4 i Q) past channel k's in y. */
static inline __attribute__((always_inline, target("avx2,fma"))) __m256
seg_load(const float *const b[8], size_t off, const int tw)
{
	if (tw == 4)
		return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(b[0] + off)), _mm_loadu_ps(b[1] + off), 1);
	if (tw == 2) {
		__m128 lo = _mm_loadh_pi(_mm_loadl_pi(_mm_setzero_ps(), (const __m64 *)(b[0] + off)), (const __m64 *)(b[1] + off));
		__m128 hi = _mm_loadh_pi(_mm_loadl_pi(_mm_setzero_ps(), (const __m64 *)(b[2] + off)), (const __m64 *)(b[3] + off));
		return _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
	}
	return _mm256_setr_ps(b[0][off], b[1][off], b[2][off], b[3][off], b[4][off], b[5][off], b[6][off], b[7][off]);
}

/* V[xi][t] for the nseg tw tiles of the chunk, channel c: base = the split images + c hp l. */
static inline __attribute__((always_inline, target("avx2,fma"))) void
input_group4(float *restrict v, size_t vs, const float *base, const size_t *segoff, int nseg, size_t phs,
	     int l, const int tw)
{
	const int spv = 8 / tw;
	for (int s0 = 0; s0 < nseg; s0 += spv) {
		const float *b[8];
		for (int s = 0; s < spv; s++) // past the last segment: repeat it (lanes dropped later)
			b[s] = base + segoff[imin(s0 + s, nseg - 1)];
		__m256 t[6][6], x[6], r[6];
		for (int col = 0; col < 6; col++) {
			const size_t off = (size_t)(col & 3) * phs + (col >> 2);
			for (int q = 0; q < 6; q++)
				x[q] = seg_load(b, off + (size_t)q * l, tw);
			bt4(r, x);
			for (int u = 0; u < 6; u++)
				t[u][col] = r[u];
		}
		for (int u = 0; u < 6; u++) {
			bt4(r, t[u]);
			for (int c = 0; c < 6; c++)
				_mm256_storeu_ps(v + (size_t)(6 * u + c) * vs + (size_t)s0 * tw, r[c]);
		}
	}
}

/* The first n (> 0) of the 8 floats of v into d, or added to d (beta != 0). */
static inline __attribute__((always_inline, target("avx2,fma"))) void seg_store(float *d, __m256 v, int n,
										 float beta)
{
	if (n >= 8) {
		_mm256_storeu_ps(d, beta != 0.0f ? _mm256_add_ps(_mm256_loadu_ps(d), v) : v);
		return;
	}
	const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	dnn_store_first_ps(d, beta != 0.0f ? _mm256_add_ps(_mm256_maskload_ps(d, m), v) : v, n);
}

/* The same for the first n (> 0) of the 4 floats of v. */
static inline __attribute__((always_inline, target("avx2,fma"))) void seg_store4(float *d, __m128 v, int n,
										  float beta)
{
	if (n >= 4) {
		_mm_storeu_ps(d, beta != 0.0f ? _mm_add_ps(_mm_loadu_ps(d), v) : v);
		return;
	}
	const __m128i m = _mm_cmpgt_epi32(_mm_set1_epi32(n), _mm_setr_epi32(0, 1, 2, 3));
	dnn_store_first_ps128(d, beta != 0.0f ? _mm_add_ps(_mm_maskload_ps(d, m), v) : v, n);
}

/* y (of channel k: ybase) = or += the output transform of the chunk's nseg tw tiles at mm; the
 * output rows of segment s are the first yrows[s] of its 4, their first Q of 4 tw columns. */
static inline __attribute__((always_inline, target("avx2,fma"))) void
output_group4(float *ybase, const size_t *yoff, const size_t *yrows, int nseg, const float *restrict mm,
	      size_t ms, int Q, float beta, const int tw)
{
	const int spv = 8 / tw;
	for (int s0 = 0; s0 < nseg; s0 += spv) {
		const float *p = mm + (size_t)s0 * tw;
		__m256 s[4][6], x[6], o[4], y[4][4];
		for (int u = 0; u < 6; u++) {
			for (int b = 0; b < 6; b++)
				x[b] = _mm256_loadu_ps(p + (size_t)(6 * u + b) * ms);
			at4(o, x);
			for (int c = 0; c < 4; c++)
				s[c][u] = o[c];
		}
		for (int c = 0; c < 4; c++) {
			at4(o, s[c]);
			for (int r = 0; r < 4; r++)
				y[r][c] = o[r];
		}
		const int ns = imin(spv, nseg - s0);
		for (int r = 0; r < 4; r++) { // tiles (0, 1), (2, 3), (4, 5), (6, 7): 4 columns each
			__m256 t0 = _mm256_unpacklo_ps(y[r][0], y[r][1]), t1 = _mm256_unpackhi_ps(y[r][0], y[r][1]);
			__m256 t2 = _mm256_unpacklo_ps(y[r][2], y[r][3]), t3 = _mm256_unpackhi_ps(y[r][2], y[r][3]);
			__m256 a0 = _mm256_shuffle_ps(t0, t2, 0x44), a1 = _mm256_shuffle_ps(t0, t2, 0xee);
			__m256 a2 = _mm256_shuffle_ps(t1, t3, 0x44), a3 = _mm256_shuffle_ps(t1, t3, 0xee);
			const __m256 pr[4] = {_mm256_permute2f128_ps(a0, a1, 0x20), _mm256_permute2f128_ps(a2, a3, 0x20),
					      _mm256_permute2f128_ps(a0, a1, 0x31), _mm256_permute2f128_ps(a2, a3, 0x31)};
			for (int sg = 0; sg < ns; sg++) {
				if ((size_t)r >= yrows[s0 + sg])
					continue;
				float *d = ybase + yoff[s0 + sg] + (size_t)r * Q;
				if (tw == 4) {
					seg_store(d, pr[2 * sg], Q, beta);
					if (Q > 8)
						seg_store(d + 8, pr[2 * sg + 1], Q - 8, beta);
				} else if (tw == 2) {
					seg_store(d, pr[sg], Q, beta);
				} else {
					seg_store4(d, sg % 2 ? _mm256_extractf128_ps(pr[sg / 2], 1) : _mm256_castps256_ps128(pr[sg / 2]), Q, beta);
				}
			}
		}
	}
}

#define GROUP_WRAPPERS(SUFFIX, TARGET) \
	__attribute__((target(TARGET))) static void input_group4_##SUFFIX( \
		float *restrict v, size_t vs, const float *base, const size_t *segoff, int nseg, size_t phs, \
		int l, int tw) \
	{ \
		if (tw == 4) \
			input_group4(v, vs, base, segoff, nseg, phs, l, 4); \
		else if (tw == 2) \
			input_group4(v, vs, base, segoff, nseg, phs, l, 2); \
		else \
			input_group4(v, vs, base, segoff, nseg, phs, l, 1); \
	} \
	__attribute__((target(TARGET))) static void output_group4_##SUFFIX( \
		float *ybase, const size_t *yoff, const size_t *yrows, int nseg, const float *restrict mm, \
		size_t ms, int Q, float beta, int tw) \
	{ \
		if (tw == 4) \
			output_group4(ybase, yoff, yrows, nseg, mm, ms, Q, beta, 4); \
		else if (tw == 2) \
			output_group4(ybase, yoff, yrows, nseg, mm, ms, Q, beta, 2); \
		else \
			output_group4(ybase, yoff, yrows, nseg, mm, ms, Q, beta, 1); \
	}
GROUP_WRAPPERS(avx2, "avx2,fma")
GROUP_WRAPPERS(avx512, "avx512f,avx512vl,avx2,fma")
#undef GROUP_WRAPPERS

/* Rows rows[0..nrows) (Q floats each) into y0's rows (stride Q): copied, or added (beta != 0). */
static void put_rows(float *y0, size_t Q, float *const rows[4], int nrows, float beta)
{
	for (int r = 0; r < nrows; r++) {
		float *yr = y0 + (size_t)r * Q;
		if (beta != 0.0f)
			for (size_t q = 0; q < Q; q++)
				yr[q] += rows[r][q];
		else
			dnn_copy_floats(yr, rows[r], (long)Q);
	}
}

/* The forward pass on m x m output tiles (m = 2: F(2x2, 3x3), m = 4: F(4x4, 3x3)): the same
 * chunks and GEMMs, the transforms of the tile size. */
static void wino_forward(float *y, const float *x, const float *w, const dnn_wino_shape *s, float beta,
			 float *work, int m)
{
	const int C = s->C, K = s->K, P = s->P, Q = s->Q;
	const wino_plan pl = plan_make(s, m == 4 ? WINO4_BUDGET : WINO_BUDGET, m);
	const int tw = pl.tw, l = pl.l, nxi = pl.nxi, slot = pl.slot;
	const size_t chw = (size_t)C * s->H * s->W, kpq = (size_t)K * P * Q, cap = pl.cap;
	const size_t vs = (size_t)C * cap, ms = (size_t)K * cap; // floats per xi of V and M
	/* floats per column phase: of the split image, or of the strips */
	const size_t phs = pl.strips ? 6 * (size_t)C * pl.sl : (size_t)C * pl.hp * l;
	float *u = work;                          // (nxi, K, C)
	float *eo = u + (size_t)nxi * K * C;      // the m column phases of one image, or the strips
	float *v = eo + pl.eoall;                 // (nxi, C, cap)
	float *mm = v + (size_t)nxi * vs;         // (nxi, K, cap)
	float *outb = mm + (size_t)nxi * ms;      // m rows of m twv (strips: 4 rows of 4 cap)
	const size_t outs = pl.strips ? 4 * cap : (size_t)m * pl.twv;
	size_t *segoff = (size_t *)(((uintptr_t)(outb + (pl.strips ? 4 : m) * outs) + 7) & ~(uintptr_t)7); // row groups
	size_t *yoff = segoff + (size_t)pl.group * pl.rows;
	size_t *yrows = yoff + (size_t)pl.group * pl.rows;
	const int avx512 = dnn_wino_avx512();
	/* The output transforms write m twv floats per output row: straight into y when that is Q
	 * (Q a multiple of 8 m) and every tile row has all its m rows (P a multiple of m),
	 * overwriting (beta = 0); else through outb (small images, odd sizes, backward data's
	 * accumulate). */
	const int direct = !pl.strips && !pl.groups && beta == 0.0f && Q % (8 * m) == 0 && P % m == 0;

	(m == 2 ? filter_transform : filter_transform4)(u, w, K, C);
	for (int n0 = 0; n0 < s->N; n0 += pl.group) {
		const int ng = imin(pl.group, s->N - n0);
		for (int i0 = 0; i0 < pl.th; i0 += pl.rows) {
			const int i1 = imin(i0 + pl.rows, pl.th), per = (i1 - i0) * slot;
			const int nt = ng * per, ntp = (nt + 7) / 8 * 8;
			if (pl.strips) {
				split_strips4(eo, x + (size_t)n0 * chw, s, &pl, ng, i0, i1);
				for (int c = 0; c < C; c++)
					(avx512 ? input_row4_avx512 : input_row4_avx2)(v + (size_t)c * cap, vs,
						eo + 6 * (size_t)c * pl.sl, phs, (int)pl.sl, nt);
			}
			const int nseg = ng * (i1 - i0);
			if (pl.groups) {
				for (int g = 0; g < ng; g++) {
					if (i0 == 0)
						split_image4(eo + g * pl.eo, x + (size_t)(n0 + g) * chw, s, &pl);
					for (int i = i0; i < i1; i++) {
						segoff[g * (i1 - i0) + i - i0] = g * pl.eo + 4 * (size_t)i * l;
						yoff[g * (i1 - i0) + i - i0] = (size_t)(n0 + g) * kpq + 4 * (size_t)i * Q;
						yrows[g * (i1 - i0) + i - i0] = (size_t)imin(4, P - 4 * i);
					}
				}
				for (int c = 0; c < C; c++)
					(avx512 ? input_group4_avx512 : input_group4_avx2)(v + (size_t)c * cap, vs,
						eo + (size_t)c * pl.hp * l, segoff, nseg, phs, l, tw);
			}
			for (int g = 0; g < ng && !pl.strips && !pl.groups; g++) {
				const float *xi = x + (size_t)(n0 + g) * chw;
				if (i0 == 0)
					(m == 2 ? split_image : split_image4)(eo, xi, s, &pl);
				for (int c = 0; c < C; c++)
					for (int i = i0; i < i1; i++) {
						const size_t off = ((size_t)c * pl.hp + (size_t)m * i) * l;
						float *dst = v + (size_t)c * cap + (size_t)g * per + (size_t)(i - i0) * tw;
						if (m == 2)
							input_row(dst, vs, eo + off, eo + phs + off, l, tw);
						else
							(avx512 ? input_row4_avx512 : input_row4_avx2)(dst, vs, eo + off, phs, l, tw);
					}
			}
			if (ntp > nt)
				for (int xi = 0; xi < nxi; xi++)
					for (int c = 0; c < C; c++)
						dnn_zero_floats(v + xi * vs + (size_t)c * cap + nt, (long)(ntp - nt));
			for (int xi = 0; xi < nxi; xi++)
				(avx512 ? gemm512 : gemm)(mm + xi * ms, u + xi * (size_t)K * C, v + xi * vs, cap,
							  K, C, ntp);
			float *rows[4];
			for (int r = 0; r < m; r++)
				rows[r] = outb + r * outs;
			for (int k = 0; k < K && pl.strips; k++) { // all the chunk's slots at once
				(avx512 ? output_row4_avx512 : output_row4_avx2)(rows, mm + (size_t)k * cap, ms, nt);
				for (int g = 0; g < ng; g++)
					for (int i = i0; i < i1; i++) {
						const size_t t0 = 4 * (size_t)(g * (i1 - i0) + i - i0) * slot;
						float *st[4] = {rows[0] + t0, rows[1] + t0, rows[2] + t0, rows[3] + t0};
						put_rows(y + (size_t)(n0 + g) * kpq + ((size_t)k * P + 4 * (size_t)i) * Q, Q,
							 st, 4, beta);
					}
			}
			for (int k = 0; k < K && pl.groups; k++)
				(avx512 ? output_group4_avx512 : output_group4_avx2)(y + (size_t)k * P * Q, yoff, yrows, nseg,
					mm + (size_t)k * cap, ms, Q, beta, tw);
			for (int g = 0; g < ng && !pl.strips && !pl.groups; g++)
				for (int k = 0; k < K; k++)
					for (int i = i0; i < i1; i++) {
						const float *mt = mm + (size_t)k * cap + (size_t)g * per + (size_t)(i - i0) * tw;
						float *y0 = y + (size_t)(n0 + g) * kpq + ((size_t)k * P + (size_t)m * i) * Q;
						for (int r = 0; r < m && direct; r++)
							rows[r] = y0 + (size_t)r * Q;
						if (m == 2)
							output_row(rows[0], rows[1], mt, ms, tw);
						else
							(avx512 ? output_row4_avx512 : output_row4_avx2)(rows, mt, ms, tw);
						if (!direct)
							put_rows(y0, Q, rows, imin(m, P - m * i), beta);
					}
		}
	}
}

void dnn_wino_forward(float *y, const float *x, const float *w, const dnn_wino_shape *s, float beta,
		      float *work)
{
	wino_forward(y, x, w, s, beta, work, 2);
}

void dnn_wino4_forward(float *y, const float *x, const float *w, const dnn_wino_shape *s, float beta,
		       float *work)
{
	wino_forward(y, x, w, s, beta, work, 4);
}

/* Adjoint of the output transform for the tw tiles of tile row i of one channel of dy:
 * D[xi][j] = (A dY A^T)[xi] of tile j (dY its 2x2 block of dy, zero outside), xi at d + xi * ds.
 * e, o: row 2i of the channel in the even/odd split of dy; row 2i + 1 follows at + l. */
__attribute__((target("avx2,fma"))) static void grad_row(float *restrict d, size_t ds,
							const float *restrict e, const float *restrict o,
							int l, int tw)
{
	const __m256 zero = _mm256_setzero_ps();
	for (int j = 0; j < tw; j += 8) {
		__m256 e0 = _mm256_loadu_ps(e + j), e1 = _mm256_loadu_ps(e + l + j);
		__m256 o0 = _mm256_loadu_ps(o + j), o1 = _mm256_loadu_ps(o + l + j);
		/* Rows: A dY = (dY0, dY0 + dY1, dY0 - dY1, -dY1), for the even and odd columns. */
		__m256 eu[4] = {e0, _mm256_add_ps(e0, e1), _mm256_sub_ps(e0, e1), _mm256_sub_ps(zero, e1)};
		__m256 ou[4] = {o0, _mm256_add_ps(o0, o1), _mm256_sub_ps(o0, o1), _mm256_sub_ps(zero, o1)};
		for (int u = 0; u < 4; u++) { // columns: (e, e + o, e - o, -o)
			float *p = d + (size_t)(4 * u) * ds + j;
			_mm256_storeu_ps(p, eu[u]);
			_mm256_storeu_ps(p + ds, _mm256_add_ps(eu[u], ou[u]));
			_mm256_storeu_ps(p + 2 * ds, _mm256_sub_ps(eu[u], ou[u]));
			_mm256_storeu_ps(p + 3 * ds, _mm256_sub_ps(zero, ou[u]));
		}
	}
}

__attribute__((target("avx2"))) static inline float hsum(__m256 v)
{
	__m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	a = _mm_hadd_ps(a, a);
	a = _mm_hadd_ps(a, a);
	return _mm_cvtss_f32(a);
}

/* du (KB, CB) at lddu += d (KB, nt) @ v (CB, nt)^T, rows at ld: KB x CB dot products, each an
 * 8-lane FMA chain over the tiles, summed across lanes at the end. */
static inline __attribute__((always_inline, target("avx2,fma"))) void
dot_block(float *du, int lddu, const float *d, const float *v, size_t ld, int nt, const int KB,
	  const int CB)
{
	__m256 acc[4][3];
	for (int kb = 0; kb < KB; kb++)
		for (int cb = 0; cb < CB; cb++)
			acc[kb][cb] = _mm256_setzero_ps();
	for (int t = 0; t < nt; t += 8) {
		__m256 x[3];
		for (int cb = 0; cb < CB; cb++)
			x[cb] = _mm256_loadu_ps(v + (size_t)cb * ld + t);
		for (int kb = 0; kb < KB; kb++) {
			const __m256 a = _mm256_loadu_ps(d + (size_t)kb * ld + t);
			for (int cb = 0; cb < CB; cb++)
				acc[kb][cb] = _mm256_fmadd_ps(a, x[cb], acc[kb][cb]);
		}
	}
	for (int kb = 0; kb < KB; kb++)
		for (int cb = 0; cb < CB; cb++)
			du[(size_t)kb * lddu + cb] += hsum(acc[kb][cb]);
}

/* dU (K, C) += D (K, nt) @ V (C, nt)^T, rows at ld, nt a multiple of 8. */
__attribute__((target("avx2,fma"))) static void gemm_nt(float *du, const float *d, const float *v,
						       size_t ld, int K, int C, int nt)
{
	for (int k0 = 0; k0 < K;) {
		const int kb = imin(4, K - k0);
		for (int c0 = 0; c0 < C;) {
			const int cb = imin(3, C - c0);
			float *dub = du + (size_t)k0 * C + c0;
			const float *db = d + (size_t)k0 * ld, *vb = v + (size_t)c0 * ld;
#define NT_CASE(KB_)                                                                               \
	case KB_:                                                                                  \
		if (cb == 3)                                                                       \
			dot_block(dub, C, db, vb, ld, nt, KB_, 3);                                 \
		else if (cb == 2)                                                                  \
			dot_block(dub, C, db, vb, ld, nt, KB_, 2);                                 \
		else                                                                               \
			dot_block(dub, C, db, vb, ld, nt, KB_, 1);                                 \
		break
			switch (kb) {
				NT_CASE(4);
				NT_CASE(3);
				NT_CASE(2);
				NT_CASE(1);
			}
#undef NT_CASE
			c0 += cb;
		}
		k0 += kb;
	}
}

/* The AVX-512 weight-gradient GEMM. Each 512-bit accumulator holds two of dot_block's 8-lane
 * chains, (k, c) in its low half and (k + 1, c) in its high half: D's rows k and k + 1 side by
 * side times V's row c broadcast to both halves. Every chain sees the same FMAs in the same
 * order as in dot_block and ends with the same hsum: bit-identical results. Up to 4 row pairs
 * x 6 columns (24 accumulators, twice dot_block's 12). */
static inline __attribute__((always_inline, target("avx512f,avx512dq,avx2,fma"))) void
dot_block512(float *du, int lddu, const float *d, const float *v, size_t ld, int nt, const int KP,
	     const int CB)
{
	__m512 acc[4][6];
	for (int p = 0; p < KP; p++)
		for (int cb = 0; cb < CB; cb++)
			acc[p][cb] = _mm512_setzero_ps();
	for (int t = 0; t < nt; t += 8) {
		__m512 a[4];
		for (int p = 0; p < KP; p++)
			a[p] = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(d + (size_t)(2 * p) * ld + t)),
						  _mm256_loadu_ps(d + (size_t)(2 * p + 1) * ld + t), 1);
		for (int cb = 0; cb < CB; cb++) {
			const __m512 x = _mm512_broadcast_f32x8(_mm256_loadu_ps(v + (size_t)cb * ld + t));
			for (int p = 0; p < KP; p++)
				acc[p][cb] = _mm512_fmadd_ps(a[p], x, acc[p][cb]);
		}
	}
	for (int p = 0; p < KP; p++)
		for (int cb = 0; cb < CB; cb++) {
			du[(size_t)(2 * p) * lddu + cb] += hsum(_mm512_castps512_ps256(acc[p][cb]));
			du[(size_t)(2 * p + 1) * lddu + cb] += hsum(_mm512_extractf32x8_ps(acc[p][cb], 1));
		}
}

/* gemm_nt on dot_block512 (a last odd row of D on gemm_nt): dU (K, C) += D (K, nt) @ V (C, nt)^T. */
__attribute__((target("avx512f,avx512dq,avx2,fma"))) static void gemm_nt512(float *du, const float *d,
									   const float *v, size_t ld, int K,
									   int C, int nt)
{
	int k0 = 0;
	for (; k0 + 2 <= K;) {
		const int pairs = (K - k0) / 2, kp = pairs >= 4 ? 4 : pairs >= 2 ? 2 : 1;
		for (int c0 = 0; c0 < C;) {
			const int cb = imin(6, C - c0);
			float *dub = du + (size_t)k0 * C + c0;
			const float *db = d + (size_t)k0 * ld, *vb = v + (size_t)c0 * ld;
#define NT512_CB(KP_, CB_)                                                                         \
	case CB_:                                                                                  \
		dot_block512(dub, C, db, vb, ld, nt, KP_, CB_);                                    \
		break
#define NT512_CASE(KP_)                                                                            \
	case KP_:                                                                                  \
		switch (cb) {                                                                      \
			NT512_CB(KP_, 6);                                                          \
			NT512_CB(KP_, 5);                                                          \
			NT512_CB(KP_, 4);                                                          \
			NT512_CB(KP_, 3);                                                          \
			NT512_CB(KP_, 2);                                                          \
			NT512_CB(KP_, 1);                                                          \
		}                                                                                  \
		break
			switch (kp) {
				NT512_CASE(4);
				NT512_CASE(2);
				NT512_CASE(1);
			}
#undef NT512_CASE
#undef NT512_CB
			c0 += cb;
		}
		k0 += 2 * kp;
	}
	if (k0 < K)
		gemm_nt(du + (size_t)k0 * C, d + (size_t)k0 * ld, v, ld, K - k0, C, nt);
}

/* dw (K, C, 3, 3) += G^T dU G for every (k, c), the adjoint of filter_transform; 8 filters at a
 * time as there, their 9 taps added into dw through a small transposition buffer. */
__attribute__((target("avx2,fma"))) static void filter_transform_adjoint(float *restrict dw,
									const float *restrict du,
									int K, int C)
{
	const size_t kc = (size_t)K * C;
	const __m256 half = _mm256_set1_ps(0.5f);
	float tmp[9][8];
	size_t f = 0;
	for (; f + 8 <= kc; f += 8) {
		__m256 t[4][3]; // dU G
		for (int r = 0; r < 4; r++) {
			const float *a = du + f + (size_t)(4 * r) * kc;
			__m256 x0 = _mm256_loadu_ps(a), x1 = _mm256_loadu_ps(a + kc);
			__m256 x2 = _mm256_loadu_ps(a + 2 * kc), x3 = _mm256_loadu_ps(a + 3 * kc);
			__m256 hs = _mm256_mul_ps(half, _mm256_add_ps(x1, x2));
			t[r][0] = _mm256_add_ps(x0, hs);
			t[r][1] = _mm256_mul_ps(half, _mm256_sub_ps(x1, x2));
			t[r][2] = _mm256_add_ps(hs, x3);
		}
		for (int q = 0; q < 3; q++) { // G^T (dU G)
			__m256 hs = _mm256_mul_ps(half, _mm256_add_ps(t[1][q], t[2][q]));
			_mm256_storeu_ps(tmp[q], _mm256_add_ps(t[0][q], hs));
			_mm256_storeu_ps(tmp[3 + q], _mm256_mul_ps(half, _mm256_sub_ps(t[1][q], t[2][q])));
			_mm256_storeu_ps(tmp[6 + q], _mm256_add_ps(hs, t[3][q]));
		}
		for (int i = 0; i < 8; i++)
			for (int j = 0; j < 9; j++)
				dw[(f + i) * 9 + j] += tmp[j][i];
	}
	for (; f < kc; f++) {
		const float *a = du + f;
		float t[4][3];
		for (int r = 0; r < 4; r++) {
			float x0 = a[(4 * r) * kc], x1 = a[(4 * r + 1) * kc];
			float x2 = a[(4 * r + 2) * kc], x3 = a[(4 * r + 3) * kc];
			t[r][0] = x0 + 0.5f * (x1 + x2);
			t[r][1] = 0.5f * (x1 - x2);
			t[r][2] = 0.5f * (x1 + x2) + x3;
		}
		float *g = dw + f * 9;
		for (int q = 0; q < 3; q++) {
			g[q] += t[0][q] + 0.5f * (t[1][q] + t[2][q]);
			g[3 + q] += 0.5f * (t[1][q] - t[2][q]);
			g[6 + q] += 0.5f * (t[1][q] + t[2][q]) + t[3][q];
		}
	}
}

size_t dnn_wino_filter_work(const dnn_wino_shape *s)
{
	wino_plan pl = plan_make(s, WINO_FILTER_BUDGET, 2);
	return 16 * (size_t)s->K * s->C + pl.eo + 2 * (size_t)s->K * pl.hp * pl.l +
	       16 * ((size_t)s->C + s->K) * pl.cap;
}

void dnn_wino_backward_filter(float *dw, const float *x, const float *dy, const dnn_wino_shape *s,
			      float *work)
{
	const int C = s->C, K = s->K, P = s->P, Q = s->Q;
	const wino_plan pl = plan_make(s, WINO_FILTER_BUDGET, 2);
	const int tw = pl.tw, l = pl.l;
	const size_t chw = (size_t)C * s->H * s->W, kpq = (size_t)K * P * Q, cap = pl.cap;
	const size_t vs = (size_t)C * cap, ds = (size_t)K * cap;
	/* dy as an image of K channels, P x Q, unpadded, split into even/odd columns like x. */
	const dnn_wino_shape sy = {.N = s->N, .C = K, .H = P, .W = Q, .K = C, .P = P, .Q = Q};
	const size_t eoy = 2 * (size_t)K * pl.hp * l;
	float *du = work;                    // (16, K, C)
	float *eo = du + 16 * (size_t)K * C; // E, O of one image of x
	float *eod = eo + pl.eo;             // E, O of one image of dy
	float *v = eod + eoy;                // (16, C, cap)
	float *d = v + 16 * vs;              // (16, K, cap)
	const float *e = eo, *o = eo + pl.eo / 2, *ey = eod, *oy = eod + eoy / 2;
	const int avx512 = dnn_wino_avx512();

	memset(du, 0, 16 * (size_t)K * C * sizeof(float));
	for (int n0 = 0; n0 < s->N; n0 += pl.group) {
		const int ng = imin(pl.group, s->N - n0);
		for (int i0 = 0; i0 < pl.th; i0 += pl.rows) {
			const int i1 = imin(i0 + pl.rows, pl.th), per = (i1 - i0) * tw;
			const int nt = ng * per, ntp = (nt + 7) / 8 * 8;
			for (int m = 0; m < ng; m++) {
				if (i0 == 0) {
					split_image(eo, x + (size_t)(n0 + m) * chw, s, &pl);
					split_image(eod, dy + (size_t)(n0 + m) * kpq, &sy, &pl);
				}
				const size_t t0 = (size_t)m * per;
				for (int c = 0; c < C; c++)
					for (int i = i0; i < i1; i++) {
						size_t off = ((size_t)c * pl.hp + 2 * i) * l;
						input_row(v + (size_t)c * cap + t0 + (size_t)(i - i0) * tw, vs,
							  e + off, o + off, l, tw);
					}
				for (int k = 0; k < K; k++)
					for (int i = i0; i < i1; i++) {
						size_t off = ((size_t)k * pl.hp + 2 * i) * l;
						grad_row(d + (size_t)k * cap + t0 + (size_t)(i - i0) * tw, ds,
							 ey + off, oy + off, l, tw);
					}
			}
			/* Tiles [nt, ntp) enter the dot products: zero in both operands. */
			if (ntp > nt)
				for (int xi = 0; xi < 16; xi++) {
					for (int c = 0; c < C; c++)
						dnn_zero_floats(v + xi * vs + (size_t)c * cap + nt, (long)(ntp - nt));
					for (int k = 0; k < K; k++)
						dnn_zero_floats(d + xi * ds + (size_t)k * cap + nt, (long)(ntp - nt));
				}
			for (int xi = 0; xi < 16; xi++)
				(avx512 ? gemm_nt512 : gemm_nt)(du + xi * (size_t)K * C, d + xi * ds, v + xi * vs,
								cap, K, C, ntp);
		}
	}
	filter_transform_adjoint(dw, du, K, C);
}

#else
int dnn_wino_supported(void) { return 0; }

int dnn_wino_set_avx512(int on)
{
	(void)on;
	return 0;
}

int dnn_wino_avx512(void) { return 0; }

size_t dnn_wino_filter_work(const dnn_wino_shape *s)
{
	(void)s;
	return 0;
}

void dnn_wino_backward_filter(float *dw, const float *x, const float *dy, const dnn_wino_shape *s,
			      float *work)
{
	(void)dw, (void)x, (void)dy, (void)s, (void)work;
	/* Unreachable: dnn_wino_supported() is 0 on this CPU, and the choice requires it. */
	dnn_worker_error("conv2d: the Winograd path needs an x86-64 CPU with AVX2 and FMA");
}

void dnn_wino_forward(float *y, const float *x, const float *w, const dnn_wino_shape *s, float beta,
		      float *work)
{
	(void)y, (void)x, (void)w, (void)s, (void)beta, (void)work;
	/* Unreachable: dnn_wino_supported() is 0 on this CPU, and the choice requires it. */
	dnn_worker_error("conv2d: the Winograd path needs an x86-64 CPU with AVX2 and FMA");
}

void dnn_wino4_forward(float *y, const float *x, const float *w, const dnn_wino_shape *s, float beta,
		       float *work)
{
	dnn_wino_forward(y, x, w, s, beta, work);
}
#endif
