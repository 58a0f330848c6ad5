/* conv2d_winograd_f2.c — Winograd F(2x2, 3x3) convs on the CPU (AVX2 + FMA; the GEMMs in AVX-512 where the
 * CPU has it): the forward pass (also used, with the flipped kernel, for backward data) and the
 * weight gradient. What it shares with F(4x4, 3x3) (conv2d_winograd_f4.c) is in
 * conv2d_winograd.c: the chunk plan, the scratch layout and the forward GEMMs.
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
 *     the split is AVX-512 permutes on images of up to 32 columns (split_image512) where the GEMMs
 *     are AVX-512, else AVX2 shuffles (split_image): the same floats;
 *   - tiles are processed in chunks (tile rows of one image, or several whole images when an
 *     image has few tiles) sized so that V (16, C, cap) and M (16, K, cap) stay within
 *     WINO_BUDGET floats (256 KiB, half the L2), like the column buffer of the im2col path;
 *   - the 16 GEMMs are conv2d_winograd.c's (dnn_wino_gemms: register-blocked AVX2 loops, or
 *     AVX-512 ones, bit-identical; that file says why not OpenBLAS);
 *   - the weight gradient is the adjoint of the forward: dU[xi] (K, C) = sum over tiles of
 *     (A dY A^T)[xi] (K, tiles) @ V[xi] (C, tiles)^T, then dw += G^T dU G. Its GEMMs reduce
 *     over tiles: 4 x 3 (k, c) dot products of 8-lane FMA chains, summed across lanes at the
 *     end of each chunk, whose chunks are therefore longer (WINO_FILTER_BUDGET).
 * Accuracy: the transforms only add, subtract and halve, so the float result differs from the
 * direct sum by a few ulps of the partial sums (tests/unit_conv2d_winograd.c bounds it).
 */
#include "conv2d_winograd_impl.h"
#include "conv2d_bnfuse.h"
#include "dnn_codelet.h"
#include "gemm_bf16.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

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
			if (s->bn_in) { /* batch norm + relu on the way in (conv2d_bnfuse.h), the row in L1 */
				dnn_bn_relu_row(s->bn_row, xr, W, s->bn_in[c], s->bn_in[s->C + c], s->bn_in[2 * s->C + c]);
				xr = s->bn_row;
			}
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

/* split_image on AVX-512 for images of at most 32 columns whose E and O rows hold at most 32 floats (every
 * ResNet shape here): each x row is two masked loads, and each E or O row one or two vpermt2ps of those 32
 * floats (lane q of E: x column 2q - pw, of O: 2q + 1 - pw; the padding lanes zeroed by the permute's mask),
 * stored whole under a mask of l lanes. split_image pays per row four zero spans, the shuffle loop and the
 * scalar tails, a fixed cost that dominates on short rows: perf put split_image at 19-25% of a 64x8x8 pass
 * and 13-29% of the 16x32x32 ones (forward, weight gradient; AMD Zen 5), and on 8-column rows its vector
 * loop never runs. The same floats (a copy). */
#define SPLIT512_MAX_W 32
__attribute__((target("avx512f,avx512dq,avx2,fma"))) static void split_image512(float *restrict eo,
									       const float *restrict x,
									       const dnn_wino_shape *s,
									       const wino_plan *pl)
{
	const int l = pl->l, H = s->H, W = s->W, pw = s->pad_w, nh = (l + 15) / 16;
	float *e = eo, *o = eo + (size_t)s->C * pl->hp * l;
	/* per half h of a row: the permute indices and zero masks of E and O, and the store mask */
	__m512i ie[2], io[2];
	__mmask16 ke[2] = {0, 0}, ko[2] = {0, 0}, st[2] = {0, 0};
	for (int h = 0; h < 2; h++) {
		int32_t xe[16], xo[16];
		for (int q = 0; q < 16; q++) {
			const int qq = 16 * h + q, ce = 2 * qq - pw, co = ce + 1;
			xe[q] = ce >= 0 && ce < W ? ce : 0;
			xo[q] = co >= 0 && co < W ? co : 0;
			if (qq < l) {
				st[h] |= (__mmask16)(1u << q);
				ke[h] |= (__mmask16)((ce >= 0 && ce < W) << q);
				ko[h] |= (__mmask16)((co >= 0 && co < W) << q);
			}
		}
		ie[h] = _mm512_loadu_si512(xe);
		io[h] = _mm512_loadu_si512(xo);
	}
	const __mmask16 la = (__mmask16)(W >= 16 ? 0xffffu : (1u << W) - 1);
	const __mmask16 lb = (__mmask16)(W >= 32 ? 0xffffu : W > 16 ? (1u << (W - 16)) - 1 : 0u);
	const __m512 zero = _mm512_setzero_ps();
	const float *xend = x + (size_t)s->C * H * W;
	for (int c = 0; c < s->C; c++)
		for (int pr = 0; pr < pl->hp; pr++) {
			const size_t off = ((size_t)c * pl->hp + pr) * l;
			const int ih = pr - s->pad_h;
			if (ih < 0 || ih >= H) {
				for (int h = 0; h < nh; h++) {
					_mm512_mask_storeu_ps(e + off + 16 * h, st[h], zero);
					_mm512_mask_storeu_ps(o + off + 16 * h, st[h], zero);
				}
				continue;
			}
			const float *restrict xr = x + ((size_t)c * H + ih) * W;
			if (s->bn_in) { /* batch norm + relu on the way in (conv2d_bnfuse.h), the row in L1 */
				dnn_bn_relu_row(s->bn_row, xr, W, s->bn_in[c], s->bn_in[s->C + c], s->bn_in[2 * s->C + c]);
				xr = s->bn_row;
			}
			/* Plain loads where 16 or 32 floats from the row's start stay within the image (the lanes past W
			 * are never selected): a masked load that misses the caches cost Zen 5 about 20% of the
			 * 16x32x32 weight gradient (x cold in cache, as in a training step); masked at the image's
			 * end and on bn_row (W floats, in L1). */
			const long avail = s->bn_in ? 0 : (long)(xend - xr);
			const __m512 a = avail >= 16 ? _mm512_loadu_ps(xr) : _mm512_maskz_loadu_ps(la, xr);
			const __m512 b = W <= 16     ? zero
					 : avail >= 32 ? _mm512_loadu_ps(xr + 16)
						       : _mm512_maskz_loadu_ps(lb, xr + 16);
			for (int h = 0; h < nh; h++) {
				_mm512_mask_storeu_ps(e + off + 16 * h, st[h], _mm512_maskz_permutex2var_ps(ke[h], a, ie[h], b));
				_mm512_mask_storeu_ps(o + off + 16 * h, st[h], _mm512_maskz_permutex2var_ps(ko[h], a, io[h], b));
			}
		}
}

/* split_image's AVX-512 form where it applies (with the AVX-512 GEMMs: dnn_wino_avx512). */
static void split(float *restrict eo, const float *restrict x, const dnn_wino_shape *s, const wino_plan *pl,
		  int avx512)
{
	if (avx512 && s->W <= SPLIT512_MAX_W && pl->l <= 32)
		split_image512(eo, x, s, pl);
	else
		split_image(eo, x, s, pl);
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

/* Output transform of the 8 tiles j .. j + 7 at mm + xi * ms (xi in 0..16): r[0], r[1] the 16 floats of output
 * row 0 (columns 2j .. 2j + 15, interleaved: column 2j + b is tile j's b), r[2], r[3] those of row 1. */
static inline __attribute__((always_inline, target("avx2,fma"))) void
output_tiles(__m256 r[4], const float *restrict mm, size_t ms, int j)
{
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
	r[0] = _mm256_permute2f128_ps(lo, hi, 0x20);
	r[1] = _mm256_permute2f128_ps(lo, hi, 0x31);
	lo = _mm256_unpacklo_ps(y10, y11);
	hi = _mm256_unpackhi_ps(y10, y11);
	r[2] = _mm256_permute2f128_ps(lo, hi, 0x20);
	r[3] = _mm256_permute2f128_ps(lo, hi, 0x31);
}

/* Output transform of the tw tiles at mm + xi * ms (xi in 0..16) into the 2 output rows
 * out0, out1 (2 twv floats each, interleaved: out0[2j + b] is column 2j + b). */
__attribute__((target("avx2,fma"))) static void output_row(float *restrict out0, float *restrict out1,
							  const float *restrict mm, size_t ms, int tw)
{
	/* Whole vectors: the last one's extra lanes read the next tiles of the chunk or the slack
	 * of the M row, and land in out0/out1 past the Q columns that are used. */
	for (int j = 0; j < tw; j += 8) {
		__m256 r[4];
		output_tiles(r, mm, ms, j);
		_mm256_storeu_ps(out0 + 2 * j, r[0]);
		_mm256_storeu_ps(out0 + 2 * j + 8, r[1]);
		_mm256_storeu_ps(out1 + 2 * j, r[2]);
		_mm256_storeu_ps(out1 + 2 * j + 8, r[3]);
	}
}

/* output_row straight into y's rows y0 and y1 (y1 NULL: P odd, the last tile row's second row is past the image),
 * exactly their Q floats: the last vector of a row under an AVX-512 mask. For the images whose rows are not
 * whole vectors (Q not a multiple of 16: 16x16, 14x14, 8x8 and 7x7 in the ResNets), which otherwise go through
 * outb and dnn_wino_put_rows' copy (perf: 4% of a 64x8x8 forward). The same floats. */
__attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma"))) static void
output_row_y(float *restrict y0, float *restrict y1, const float *restrict mm, size_t ms, int tw, int Q)
{
	for (int j = 0; j < tw; j += 8) {
		__m256 r[4];
		output_tiles(r, mm, ms, j);
		for (int h = 0; h < 2; h++) {
			const int off = 2 * j + 8 * h, n = Q - off;
			if (n >= 8) {
				_mm256_storeu_ps(y0 + off, r[h]);
				if (y1)
					_mm256_storeu_ps(y1 + off, r[2 + h]);
			} else if (n > 0) {
				const __mmask8 k = (__mmask8)((1u << n) - 1);
				_mm256_mask_storeu_ps(y0 + off, k, r[h]);
				if (y1)
					_mm256_mask_storeu_ps(y1 + off, k, r[2 + h]);
			}
		}
	}
}

/* The forward pass, one image's tile rows at a time (a chunk: tile rows of one image, or several
 * whole images): split the image into its even and odd columns, input transforms into V, the 16
 * GEMMs, output transforms. */
void dnn_wino_forward(float *y, const float *x, const float *w, const dnn_wino_shape *s, float beta,
		      float *work)
{
	const int C = s->C, K = s->K, P = s->P, Q = s->Q;
	const wino_plan pl = dnn_wino_plan_make(s, WINO_BUDGET, 2);
	const wino_bufs b = dnn_wino_bufs(s, &pl, work);
	const int tw = pl.tw, l = pl.l;
	const size_t chw = (size_t)C * s->H * s->W, kpq = (size_t)K * P * Q, cap = pl.cap;
	const size_t vs = b.vs, ms = b.ms, phs = b.phs;
	float *eo = b.eo, *v = b.v, *mm = b.mm;
	const int avx512 = dnn_wino_avx512();
	/* The output transform writes 2 twv floats per output row: straight into y when that is Q
	 * (Q a multiple of 16) and every tile row has both its rows (P even), overwriting (beta = 0);
	 * else through outb (small images, odd sizes, backward data's accumulate). */
	const int direct = beta == 0.0f && Q % 16 == 0 && P % 2 == 0;
	/* Other overwrites on AVX-512: straight into y too, the rows' ends under a mask (output_row_y). */
	const int exact = !direct && beta == 0.0f && avx512;

	filter_transform(b.u, w, K, C);
	if (pl.bf16)
		dnn_wino_pack_u(&pl, &b, K, C);
	for (int n0 = 0; n0 < s->N; n0 += pl.group) {
		const int ng = imin(pl.group, s->N - n0);
		for (int i0 = 0; i0 < pl.th; i0 += pl.rows) {
			const int i1 = imin(i0 + pl.rows, pl.th), per = (i1 - i0) * tw;
			for (int g = 0; g < ng; g++) {
				if (i0 == 0)
					split(eo, x + (size_t)(n0 + g) * chw, s, &pl, avx512);
				for (int c = 0; c < C; c++)
					for (int i = i0; i < i1; i++) {
						const size_t off = ((size_t)c * pl.hp + 2 * (size_t)i) * l;
						input_row(v + (size_t)c * cap + (size_t)g * per + (size_t)(i - i0) * tw, vs,
							  eo + off, eo + phs + off, l, tw);
					}
			}
			dnn_wino_gemms(&pl, &b, K, C, ng * per, avx512);
			float *rows[2] = {b.outb, b.outb + b.outs};
			for (int g = 0; g < ng; g++)
				for (int k = 0; k < K; k++)
					for (int i = i0; i < i1; i++) {
						const float *mt = mm + (size_t)k * cap + (size_t)g * per + (size_t)(i - i0) * tw;
						float *y0 = y + (size_t)(n0 + g) * kpq + ((size_t)k * P + 2 * (size_t)i) * Q;
						if (exact) {
							output_row_y(y0, 2 * i + 1 < P ? y0 + Q : NULL, mt, ms, tw, Q);
							continue;
						}
						if (direct)
							rows[0] = y0, rows[1] = y0 + Q;
						output_row(rows[0], rows[1], mt, ms, tw);
						if (!direct)
							dnn_wino_put_rows(y0, Q, rows, imin(2, P - 2 * i), beta);
					}
		}
	}
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
	wino_plan pl = dnn_wino_plan_make(s, WINO_FILTER_BUDGET, 2);
	return 16 * (size_t)s->K * s->C + pl.eo + 2 * (size_t)s->K * pl.hp * pl.l +
	       16 * ((size_t)s->C + s->K) * pl.cap;
}

void dnn_wino_backward_filter(float *dw, const float *x, const float *dy, const dnn_wino_shape *s,
			      float *work)
{
	const int C = s->C, K = s->K, P = s->P, Q = s->Q;
	const wino_plan pl = dnn_wino_plan_make(s, WINO_FILTER_BUDGET, 2);
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
					split(eo, x + (size_t)(n0 + m) * chw, s, &pl, avx512);
					split(eod, dy + (size_t)(n0 + m) * kpq, &sy, &pl, avx512);
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
			if (s->bf16) // D and V rounded to bf16 values: bf16 products, the same fp32 sums
				for (int xi = 0; xi < 16; xi++) {
					for (int c = 0; c < C; c++)
						dnn_bf16_round_floats(v + xi * vs + (size_t)c * cap, (size_t)ntp);
					for (int k = 0; k < K; k++)
						dnn_bf16_round_floats(d + xi * ds + (size_t)k * cap, (size_t)ntp);
				}
			for (int xi = 0; xi < 16; xi++)
				(avx512 ? gemm_nt512 : gemm_nt)(du + xi * (size_t)K * C, d + xi * ds, v + xi * vs,
								cap, K, C, ntp);
		}
	}
	filter_transform_adjoint(dw, du, K, C);
}

#else
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
#endif
