/* conv2d_winograd_f4.c — Winograd F(4x4, 3x3) convs on the CPU (AVX2 + FMA; the GEMMs in AVX-512 where the
 * CPU has it): the forward pass (also used, with the flipped kernel, for backward data). What it
 * shares with F(2x2, 3x3) (conv2d_winograd_f2.c, whose header explains the scheme) is in
 * conv2d_winograd.c: the chunk plan, the scratch layout and the forward GEMMs.
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
 * The weight gradient stays F(2x2) (conv2d_winograd_f2.c).
 * The plan (dnn_wino_plan_make) picks the layout from the tiles per row; each has its own forward
 * function: forward_rows (wide images, tile rows of one image at a time, as F(2x2)),
 * forward_groups (row groups) and forward_strips (strips).
 */
#include "conv2d_winograd_impl.h"
#include "dnn_codelet.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "simd_tail.h"

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

typedef void (*row_in_fn)(float *restrict, size_t, const float *restrict, size_t, int, int);
typedef void (*row_out_fn)(float *const[4], const float *restrict, size_t, int);

/* Wide images (8 tiles per row or more) and the other shapes that neither row groups nor strips
 * take: as F(2x2)'s forward, one image's tile rows at a time. The output transform writes 4 twv
 * floats per output row: straight into y when that is Q (Q a multiple of 32) and every tile row
 * has all its 4 rows (P a multiple of 4), overwriting (beta = 0); else through outb. */
static void forward_rows(float *y, const float *x, const dnn_wino_shape *s, float beta, const wino_plan *pl,
			 const wino_bufs *b, int avx512)
{
	const int C = s->C, K = s->K, P = s->P, Q = s->Q, tw = pl->tw, l = pl->l;
	const size_t chw = (size_t)C * s->H * s->W, kpq = (size_t)K * P * Q, cap = pl->cap;
	const row_in_fn input_row = avx512 ? input_row4_avx512 : input_row4_avx2;
	const row_out_fn output_row = avx512 ? output_row4_avx512 : output_row4_avx2;
	const int direct = beta == 0.0f && Q % 32 == 0 && P % 4 == 0;
	for (int n0 = 0; n0 < s->N; n0 += pl->group) {
		const int ng = imin(pl->group, s->N - n0);
		float *yc = b->ystage ? b->ystage : y + (size_t)n0 * kpq; /* the chunk's fp32 outputs */
		for (int i0 = 0; i0 < pl->th; i0 += pl->rows) {
			const int i1 = imin(i0 + pl->rows, pl->th), per = (i1 - i0) * tw;
			for (int g = 0; g < ng; g++) {
				if (i0 == 0)
					split_image4(b->eo, x + (size_t)(n0 + g) * chw, s, pl);
				for (int c = 0; c < C; c++)
					for (int i = i0; i < i1; i++) {
						const size_t off = ((size_t)c * pl->hp + 4 * (size_t)i) * l;
						input_row(b->v + (size_t)c * cap + (size_t)g * per + (size_t)(i - i0) * tw, b->vs,
							  b->eo + off, b->phs, l, tw);
					}
			}
			dnn_wino_gemms(pl, b, K, C, ng * per, avx512);
			float *rows[4];
			for (int r = 0; r < 4; r++)
				rows[r] = b->outb + r * b->outs;
			for (int g = 0; g < ng; g++)
				for (int k = 0; k < K; k++)
					for (int i = i0; i < i1; i++) {
						const float *mt = b->mm + (size_t)k * cap + (size_t)g * per + (size_t)(i - i0) * tw;
						float *y0 = yc + (size_t)g * kpq + ((size_t)k * P + 4 * (size_t)i) * Q;
						for (int r = 0; r < 4 && direct; r++)
							rows[r] = y0 + (size_t)r * Q;
						output_row(rows, mt, b->ms, tw);
						if (!direct)
							dnn_wino_put_rows(y0, Q, rows, imin(4, P - 4 * i), beta);
					}
			if (b->ystage)
				dnn_wino_round_chunk((uint16_t *)y, b->ystage, s, n0, ng, 4 * i0, imin(4 * i1, P));
		}
	}
}

/* Row groups (tw = 1, 2 or 4): the chunk's images split whole, each vector of V the tiles of
 * 8 / tw tile rows (segments), the outputs stored as pieces straight into y. */
static void forward_groups(float *y, const float *x, const dnn_wino_shape *s, float beta, const wino_plan *pl,
			   const wino_bufs *b, int avx512)
{
	const int C = s->C, K = s->K, P = s->P, Q = s->Q, tw = pl->tw, l = pl->l;
	const size_t chw = (size_t)C * s->H * s->W, kpq = (size_t)K * P * Q, cap = pl->cap;
	for (int n0 = 0; n0 < s->N; n0 += pl->group) {
		const int ng = imin(pl->group, s->N - n0);
		float *yc = b->ystage ? b->ystage : y + (size_t)n0 * kpq; /* the chunk's fp32 outputs */
		for (int i0 = 0; i0 < pl->th; i0 += pl->rows) {
			const int i1 = imin(i0 + pl->rows, pl->th), nseg = ng * (i1 - i0);
			for (int g = 0; g < ng; g++) {
				if (i0 == 0)
					split_image4(b->eo + g * pl->eo, x + (size_t)(n0 + g) * chw, s, pl);
				for (int i = i0; i < i1; i++) {
					b->segoff[g * (i1 - i0) + i - i0] = g * pl->eo + 4 * (size_t)i * l;
					b->yoff[g * (i1 - i0) + i - i0] = (size_t)g * kpq + 4 * (size_t)i * Q;
					b->yrows[g * (i1 - i0) + i - i0] = (size_t)imin(4, P - 4 * i);
				}
			}
			for (int c = 0; c < C; c++)
				(avx512 ? input_group4_avx512 : input_group4_avx2)(b->v + (size_t)c * cap, b->vs,
					b->eo + (size_t)c * pl->hp * l, b->segoff, nseg, b->phs, l, tw);
			dnn_wino_gemms(pl, b, K, C, nseg * tw, avx512);
			for (int k = 0; k < K; k++)
				(avx512 ? output_group4_avx512 : output_group4_avx2)(yc + (size_t)k * P * Q, b->yoff, b->yrows,
					nseg, b->mm + (size_t)k * cap, b->ms, Q, beta, tw);
			if (b->ystage)
				dnn_wino_round_chunk((uint16_t *)y, b->ystage, s, n0, ng, 4 * i0, imin(4 * i1, P));
		}
	}
}

/* Strips: the 6 input rows of every tile row of the chunk side by side (split_strips4), one
 * transform over all the chunk's slots at once, the last slot of each tile row dropped. */
static void forward_strips(float *y, const float *x, const dnn_wino_shape *s, float beta, const wino_plan *pl,
			   const wino_bufs *b, int avx512)
{
	const int C = s->C, K = s->K, P = s->P, Q = s->Q, slot = pl->slot;
	const size_t chw = (size_t)C * s->H * s->W, kpq = (size_t)K * P * Q, cap = pl->cap;
	const row_in_fn input_row = avx512 ? input_row4_avx512 : input_row4_avx2;
	const row_out_fn output_row = avx512 ? output_row4_avx512 : output_row4_avx2;
	for (int n0 = 0; n0 < s->N; n0 += pl->group) {
		const int ng = imin(pl->group, s->N - n0);
		float *yc = b->ystage ? b->ystage : y + (size_t)n0 * kpq; /* the chunk's fp32 outputs */
		for (int i0 = 0; i0 < pl->th; i0 += pl->rows) {
			const int i1 = imin(i0 + pl->rows, pl->th), nt = ng * (i1 - i0) * slot;
			split_strips4(b->eo, x + (size_t)n0 * chw, s, pl, ng, i0, i1);
			for (int c = 0; c < C; c++)
				input_row(b->v + (size_t)c * cap, b->vs, b->eo + 6 * (size_t)c * pl->sl, b->phs, (int)pl->sl, nt);
			dnn_wino_gemms(pl, b, K, C, nt, avx512);
			float *rows[4];
			for (int r = 0; r < 4; r++)
				rows[r] = b->outb + r * b->outs;
			for (int k = 0; k < K; k++) {
				output_row(rows, b->mm + (size_t)k * cap, b->ms, nt);
				for (int g = 0; g < ng; g++)
					for (int i = i0; i < i1; i++) {
						const size_t t0 = 4 * (size_t)(g * (i1 - i0) + i - i0) * slot;
						float *st[4] = {rows[0] + t0, rows[1] + t0, rows[2] + t0, rows[3] + t0};
						dnn_wino_put_rows(yc + (size_t)g * kpq + ((size_t)k * P + 4 * (size_t)i) * Q, Q,
								  st, 4, beta);
					}
			}
			if (b->ystage)
				dnn_wino_round_chunk((uint16_t *)y, b->ystage, s, n0, ng, 4 * i0, imin(4 * i1, P));
		}
	}
}

void dnn_wino4_forward(float *y, const float *x, const float *w, const dnn_wino_shape *s, float beta,
		       float *work)
{
	const wino_plan pl = dnn_wino_plan_make(s, WINO4_BUDGET, 4);
	const wino_bufs b = dnn_wino_bufs(s, &pl, work);
	const int avx512 = dnn_wino_avx512();
	filter_transform4(b.u, w, s->K, s->C);
	if (pl.bf16)
		dnn_wino_pack_u(&pl, &b, s->K, s->C);
	if (pl.groups)
		forward_groups(y, x, s, beta, &pl, &b, avx512);
	else if (pl.strips)
		forward_strips(y, x, s, beta, &pl, &b, avx512);
	else
		forward_rows(y, x, s, beta, &pl, &b, avx512);
}

#else
void dnn_wino4_forward(float *y, const float *x, const float *w, const dnn_wino_shape *s, float beta,
		       float *work)
{
	dnn_wino_forward(y, x, w, s, beta, work);
}
#endif
