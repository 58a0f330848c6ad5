/* conv2d_winograd.c — what the Winograd convs on the CPU share: F(2x2, 3x3) (conv2d_winograd_f2.c:
 * forward, also used with the flipped kernel for backward data, and the weight gradient) and
 * F(4x4, 3x3) (conv2d_winograd_f4.c: forward). Both compute each output tile of each output
 * channel k as
 *     Y = A^T [ sum_c (G g_kc G^T) .* (B^T d_c B) ] A
 * (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016), the sum over c,
 * for each position xi of the transformed tile, as a GEMM
 *     M[xi] (K, tiles) = U[xi] (K, C) @ V[xi] (C, tiles).
 * This file holds what does not depend on the tile size:
 *   - the plan (dnn_wino_plan_make): tiles are processed in chunks (tile rows of one image, or
 *     several whole images when an image has few tiles) sized so that V (nxi, C, cap) and
 *     M (nxi, K, cap) stay within a budget of floats (WINO_BUDGET: 256 KiB, half the L2, like
 *     the column buffer of the im2col path; F(4x4) and the weight gradient have their own);
 *   - the forward pass's scratch layout (dnn_wino_work, dnn_wino4_work, dnn_wino_bufs);
 *   - the forward GEMMs (dnn_wino_gemms): register-blocked AVX2 loops (4 output channels x 24
 *     tiles: 12 FMA chains; on an AVX-512 CPU 512-bit ones, gemm512, bit-identical), not
 *     OpenBLAS: their inner dimension is only C (16..64) and a chunk has a few dozen to a few
 *     hundred tiles, 16 or 36 calls per chunk, too small for sgemm's packing and call overhead
 *     to pay off (a choice by that reasoning; a cblas_sgemm version was not measured);
 *   - the ISA choice (dnn_wino_supported, dnn_wino_set_avx512) and the portable stubs.
 * Under --precision bf16 (s->bf16) U[xi] and V[xi] are rounded to bf16 values in place, then the
 * same GEMMs run: products of bf16 values, exact in fp32, summed in fp32 (gemm_bf16.h's arithmetic)
 * at fp32's speed. Measured before choosing (docs/studies/2026-12-07-conv-bf16.md): dnn_gemm_bf16
 * (oneDNN's brgemm on bf16 copies) per xi made ResNet-20's Winograd convs 1.2-2.1x slower than
 * these loops (0.04-0.3 MFLOP per call: its call, the copies and its K-long blocks cost more than
 * its 2x rate gains).
 */
#include "conv2d_winograd_impl.h"
#include "dnn_codelet.h"
#include "gemm_bf16.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

wino_plan dnn_wino_plan_make(const dnn_wino_shape *s, size_t budget, int m)
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
	pl.bf16 = s->bf16;
	return pl;
}

/* U (nxi, K, C), the split image(s), V (nxi, C, cap), M (nxi, K, cap), m output rows of m twv
 * (in strips: 4 rows of 4 cap), and in row groups three size_t per tile row of a chunk. */
static size_t wino_work(const dnn_wino_shape *s, int m)
{
	wino_plan pl = dnn_wino_plan_make(s, m == 4 ? WINO4_BUDGET : WINO_BUDGET, m);
	return (size_t)pl.nxi * s->K * s->C + pl.eoall + (size_t)pl.nxi * ((size_t)s->C + s->K) * pl.cap +
	       (pl.strips ? 16 * pl.cap : (size_t)m * m * pl.twv) +
	       3 * (size_t)pl.group * pl.rows * (sizeof(size_t) / sizeof(float)) + 2 + // + 2: alignment
	       (s->bf16 ? (size_t)pl.nxi * s->K * ((s->C + 1) / 2) + 16 : 0) + // bf16: U in pairs (+ 16: alignment)
	       (s->y_bf16 ? (size_t)pl.group * s->K * s->P * s->Q + 16 : 0);     // bf16 y: a chunk's fp32 outputs
}

size_t dnn_wino_work(const dnn_wino_shape *s) { return wino_work(s, 2); }

size_t dnn_wino4_work(const dnn_wino_shape *s) { return wino_work(s, 4); }

wino_bufs dnn_wino_bufs(const dnn_wino_shape *s, const wino_plan *pl, float *work)
{
	const int m = pl->m, nxi = pl->nxi, C = s->C, K = s->K;
	const size_t cap = pl->cap;
	wino_bufs b;
	b.vs = (size_t)C * cap, b.ms = (size_t)K * cap;
	b.phs = pl->strips ? 6 * (size_t)C * pl->sl : (size_t)C * pl->hp * pl->l;
	b.u = work;                          // (nxi, K, C)
	b.eo = b.u + (size_t)nxi * K * C;    // the m column phases of one image, or the strips
	b.v = b.eo + pl->eoall;              // (nxi, C, cap)
	b.mm = b.v + (size_t)nxi * b.vs;     // (nxi, K, cap)
	b.outb = b.mm + (size_t)nxi * b.ms;  // m rows of m twv (strips: 4 rows of 4 cap)
	b.outs = pl->strips ? 4 * cap : (size_t)m * pl->twv;
	b.segoff = (size_t *)(((uintptr_t)(b.outb + (pl->strips ? 4 : m) * b.outs) + 7) & ~(uintptr_t)7); // row groups
	b.yoff = b.segoff + (size_t)pl->group * pl->rows;
	b.yrows = b.yoff + (size_t)pl->group * pl->rows;
	b.ub = (uint32_t *)(((uintptr_t)(b.yrows + (size_t)pl->group * pl->rows) + 63) & ~(uintptr_t)63);
	b.ystage = s->y_bf16 ? (float *)(((uintptr_t)(b.ub + (s->bf16 ? (size_t)nxi * K * ((C + 1) / 2) : 0)) + 63) &
					 ~(uintptr_t)63)
			     : NULL;
	return b;
}

void dnn_wino_round_chunk(uint16_t *y, const float *stage, const dnn_wino_shape *s, int n0, int ng, int r0, int r1)
{
	const size_t pq = (size_t)s->P * s->Q, kpq = (size_t)s->K * pq;
	for (int g = 0; g < ng; g++)
		for (int k = 0; k < s->K; k++) {
			const size_t off = (size_t)k * pq + (size_t)r0 * s->Q;
			dnn_bf16_convert_rows_bias(y + (size_t)(n0 + g) * kpq + off, 0, stage + (size_t)g * kpq + off, 0, 1,
						   (r1 - r0) * s->Q, s->bias ? s->bias + k : NULL, 1);
		}
}

/* Rows rows[0..nrows) (Q floats each) into y0's rows (stride Q): copied, or added (beta != 0). */
void dnn_wino_put_rows(float *y0, size_t Q, float *const *rows, int nrows, float beta)
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

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

int dnn_wino_supported(void)
{
	static int cached = -1;
	if (cached < 0) {
		__builtin_cpu_init();
		cached = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	}
	return cached;
}

/* The 16 GEMMs' ISA: AVX-512 where the CPU has it (and the caller has not asked for AVX2). The AVX-512 kernels use
 * F and DQ, and BW and VL where they store under a mask (output_row_y) or read 16-bit elements (a bf16 x in
 * split_image512); every AVX-512 CPU since Skylake-SP has all four. */
static int wino_avx512 = -1; // -1: not chosen yet, 0: AVX2, 1: AVX-512

int dnn_wino_set_avx512(int on)
{
	__builtin_cpu_init();
	wino_avx512 = on && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
		      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
	return wino_avx512;
}

int dnn_wino_avx512(void)
{
	if (wino_avx512 < 0)
		dnn_wino_set_avx512(1);
	return wino_avx512;
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

/* The dispatch of gemm512 and gemm_bf16 (one macro for both micro-kernels): a block of kb (8, 4, 2 or 1) output
 * channels x nv (3, 2 or 1) vectors of 16 tiles calls BLOCK (gemm_block512, gemm_block_bf16) with both as constants,
 * so that its accumulators unroll into registers. n: U's row length and the inner length (C floats, c2n pairs);
 * mb, ld, ub, vb, kb, nv and last are the caller's. */
#define GEMM512_CASE(BLOCK, n, KB_)                                                                \
	case KB_:                                                                                  \
		if (nv == 3)                                                                       \
			BLOCK(mb, ld, ub, n, vb, ld, n, KB_, 3, last);                             \
		else if (nv == 2)                                                                  \
			BLOCK(mb, ld, ub, n, vb, ld, n, KB_, 2, last);                             \
		else                                                                               \
			BLOCK(mb, ld, ub, n, vb, ld, n, KB_, 1, last);                             \
		break
#define GEMM512_DISPATCH(BLOCK, n)                                                                 \
	switch (kb) {                                                                              \
		GEMM512_CASE(BLOCK, n, 8);                                                         \
		GEMM512_CASE(BLOCK, n, 4);                                                         \
		GEMM512_CASE(BLOCK, n, 2);                                                         \
		GEMM512_CASE(BLOCK, n, 1);                                                         \
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
			GEMM512_DISPATCH(gemm_block512, C);
			k0 += kb;
		}
	}
}

/* ------------------------------------------------------------------ bf16: vdpbf16ps
 * Under --precision bf16 on an AVX512_BF16 CPU, M[xi] = U[xi] V[xi] runs on bf16 pairs: each 32-bit
 * lane of V holds the bf16 values of channels 2j and 2j + 1 for one tile (F(2x2)'s input transform writes them so,
 * dnn_wino_gemms_vpairs; F(4x4)'s fp32 V is packed in place, V's row j taking the pairs of rows 2j, 2j + 1 once
 * they are read), U's pairs (dnn_wino_pack_u) are
 * broadcast, and one vdpbf16ps adds both products (exact in fp32) to a tile's fp32 sum, in a fixed
 * order: 32 multiply-adds per instruction against the fp32 loops' 16, half the bytes of V to read. */
#define WINO_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512dq,avx2,fma")))

void dnn_wino_pack_u(const wino_plan *pl, const wino_bufs *b, int K, int C)
{
	const int c2n = (C + 1) / 2;
	for (size_t r = 0; r < (size_t)pl->nxi * K; r++) {
		const float *u = b->u + r * C;
		uint32_t *ub = b->ub + r * c2n;
		for (int j = 0; j < c2n; j++)
			ub[j] = dnn_f32_to_bf16(u[2 * j]) |
				(2 * j + 1 < C ? (uint32_t)dnn_f32_to_bf16(u[2 * j + 1]) << 16 : 0u);
	}
}

/* V (C, ntp) at ld floats -> its channel pairs (ceil(C / 2), ntp) of uint32 at ld, in place. */
WINO_BF16_TARGET static void pack_v(float *v, size_t ld, int C, int ntp)
{
	/* cvtne2ps gives row 2j's 16 values then row 2j + 1's; the permutation interleaves them */
	const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
					     21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
	for (int j = 0; j < (C + 1) / 2; j++) {
		const float *r0 = v + (size_t)(2 * j) * ld, *r1 = v + (size_t)(2 * j + 1) * ld;
		float *dst = v + (size_t)j * ld;
		for (int t = 0; t < ntp; t += 16) {
			const __mmask16 m = ntp - t >= 16 ? 0xffff : 0x00ff; // ntp is a multiple of 8
			const __m512 a = _mm512_maskz_loadu_ps(m, r0 + t);
			const __m512 h = 2 * j + 1 < C ? _mm512_maskz_loadu_ps(m, r1 + t) : _mm512_setzero_ps();
			const __m512i p = _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(h, a));
			_mm512_mask_storeu_epi32(dst + t, m, p);
		}
	}
}

/* gemm_block512 on pairs: M (KB, 16 NV) = sum over j of U pairs (KB, c2n) x V pairs (c2n, 16 NV). */
static inline __attribute__((always_inline)) WINO_BF16_TARGET void
gemm_block_bf16(float *m, size_t ldm, const uint32_t *u, int ldu, const float *v, size_t ldv, int c2n, const int KB,
		const int NV, __mmask16 last)
{
	__m512 acc[8][3];
	for (int kb = 0; kb < KB; kb++)
		for (int n = 0; n < NV; n++)
			acc[kb][n] = _mm512_setzero_ps();
	for (int j = 0; j < c2n; j++) {
		__m512bh x[3];
		for (int n = 0; n < NV; n++)
			x[n] = (__m512bh)(n == NV - 1 ? _mm512_maskz_loadu_epi32(last, v + (size_t)j * ldv + 16 * n)
						      : _mm512_loadu_si512(v + (size_t)j * ldv + 16 * n));
		for (int kb = 0; kb < KB; kb++) {
			const __m512bh a = (__m512bh)_mm512_set1_epi32((int)u[(size_t)kb * ldu + j]);
			for (int n = 0; n < NV; n++)
				acc[kb][n] = _mm512_dpbf16_ps(acc[kb][n], a, x[n]);
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

/* gemm512's blocking on gemm_block_bf16: M (K, nt) at ld = U pairs (K, c2n) @ V pairs (c2n, nt) at ld. */
WINO_BF16_TARGET static void gemm_bf16(float *m, const uint32_t *u, const float *v, size_t ld, int K, int c2n, int nt)
{
	for (int t0 = 0; t0 < nt; t0 += 48) {
		const int r = imin(48, nt - t0), nv = (r + 15) / 16;
		const __mmask16 last = r % 16 ? 0x00ff : 0xffff;
		for (int k0 = 0; k0 < K;) {
			const int left = K - k0, kb = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
			float *mb = m + (size_t)k0 * ld + t0;
			const uint32_t *ub = u + (size_t)k0 * c2n;
			const float *vb = v + t0;
			GEMM512_DISPATCH(gemm_block_bf16, c2n);
			k0 += kb;
		}
	}
}

#undef GEMM512_DISPATCH
#undef GEMM512_CASE

void dnn_wino_gemms_vpairs(const wino_plan *pl, const wino_bufs *b, int K, int C, int nt)
{
	const int c2n = (C + 1) / 2, ntp = (nt + 7) / 8 * 8;
	const size_t cap = pl->cap, vs = b->vs, ms = b->ms;
	for (int xi = 0; xi < pl->nxi; xi++) {
		uint32_t *v = (uint32_t *)b->v + xi * vs;
		if (ntp > nt)
			for (int j = 0; j < c2n; j++)
				dnn_zero_floats((float *)(v + (size_t)j * cap + nt), (long)(ntp - nt));
		gemm_bf16(b->mm + xi * ms, b->ub + xi * (size_t)K * c2n, (const float *)v, cap, K, c2n, ntp);
	}
}

void dnn_wino_gemms(const wino_plan *pl, const wino_bufs *b, int K, int C, int nt, int avx512)
{
	const int nxi = pl->nxi, ntp = (nt + 7) / 8 * 8;
	const size_t cap = pl->cap, vs = b->vs, ms = b->ms;
	float *v = b->v, *mm = b->mm;
	const float *u = b->u;
	if (ntp > nt)
		for (int xi = 0; xi < nxi; xi++)
			for (int c = 0; c < C; c++)
				dnn_zero_floats(v + xi * vs + (size_t)c * cap + nt, (long)(ntp - nt));
	if (pl->bf16 && avx512 && dnn_cpu_has_bf16()) { // vdpbf16ps on pairs (above)
		const int c2n = (C + 1) / 2;
		for (int xi = 0; xi < nxi; xi++) {
			pack_v(v + xi * vs, cap, C, ntp);
			gemm_bf16(mm + xi * ms, b->ub + xi * (size_t)K * c2n, v + xi * vs, cap, K, c2n, ntp);
		}
		return;
	}
	if (pl->bf16) { // U and V rounded in place (rounding U again per chunk changes nothing)
		dnn_bf16_round_floats(b->u, (size_t)nxi * K * C);
		for (int xi = 0; xi < nxi; xi++)
			for (int c = 0; c < C; c++)
				dnn_bf16_round_floats(v + xi * vs + (size_t)c * cap, (size_t)ntp);
	}
	for (int xi = 0; xi < nxi; xi++)
		(avx512 ? gemm512 : gemm)(mm + xi * ms, u + xi * (size_t)K * C, v + xi * vs, cap, K, C, ntp);
}

#else
int dnn_wino_supported(void) { return 0; }

int dnn_wino_set_avx512(int on)
{
	(void)on;
	return 0;
}

int dnn_wino_avx512(void) { return 0; }

void dnn_wino_gemms(const wino_plan *pl, const wino_bufs *b, int K, int C, int nt, int avx512)
{
	(void)pl, (void)b, (void)K, (void)C, (void)nt, (void)avx512;
}

void dnn_wino_pack_u(const wino_plan *pl, const wino_bufs *b, int K, int C) { (void)pl, (void)b, (void)K, (void)C; }

void dnn_wino_gemms_vpairs(const wino_plan *pl, const wino_bufs *b, int K, int C, int nt)
{
	(void)pl, (void)b, (void)K, (void)C, (void)nt;
}
#endif
