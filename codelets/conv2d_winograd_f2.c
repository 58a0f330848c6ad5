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
 *     end of each chunk, whose chunks are therefore longer (WINO_FILTER_BUDGET); with AVX-512,
 *     D's transform reads dy in place (grad_row_direct), and under --precision bf16 the GEMMs run
 *     on vdpbf16ps over tile pairs (dot_block_bf16, "bf16 weight gradient" below), which the
 *     transforms write directly where a tile row has an even number of tiles;
 *   - under --precision bf16 the forward's input transform writes V's bf16 channel pairs, the operand of
 *     dnn_wino_gemms' vdpbf16ps kernel, directly (input_row_cpairs), and a bf16 x (a stored activation) is
 *     widened in registers by the AVX-512 split (split_image512), not copied to fp32 first (x_for_path).
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
 * time there (software prefetching 4 or 48 rows ahead measured no different on the Xeon). fp32 x only (a bf16 x
 * is widened by the caller where split_image512 does not apply: dnn_wino_reads_bf16). */
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
 * loop never runs. The same floats (a copy).
 * A bf16 x (s->x_bf16, a stored relu output): each row is two 16-element loads of 16-bit values widened in
 * registers (zero-extended and shifted into the high half: exact), the same floats as the widened fp32 copy that
 * conv2d_algo.c's x_for_path made before, without writing and reading back that copy (N C H W floats). */
#define SPLIT512_MAX_W 32
static inline __attribute__((always_inline, target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma"))) __m512
widen16(__m256i h)
{
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma"))) static void
split_image512(float *restrict eo, const void *restrict xv, const dnn_wino_shape *s, const wino_plan *pl)
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
	const size_t chw = (size_t)s->C * H * W;
	const float *x = xv, *xend = x + chw;
	const uint16_t *xh = xv, *xhend = xh + chw; // s->x_bf16
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
			/* Plain loads where 16 or 32 values from the row's start stay within the image (the lanes
			 * past W are never selected): a masked load that misses the caches cost Zen 5 about 20% of
			 * the 16x32x32 weight gradient (x cold in cache, as in a training step); masked at the
			 * image's end and on bn_row (W floats, in L1). */
			__m512 a, b;
			if (s->x_bf16) { /* bf16 values widened in registers (no bn_in: dnn_wino_reads_bf16) */
				const uint16_t *restrict xr = xh + ((size_t)c * H + ih) * W;
				const long avail = (long)(xhend - xr);
				a = widen16(avail >= 16 ? _mm256_loadu_si256((const __m256i *)xr)
							: _mm256_maskz_loadu_epi16(la, xr));
				b = W <= 16 ? zero
					    : widen16(avail >= 32 ? _mm256_loadu_si256((const __m256i *)(xr + 16))
								  : _mm256_maskz_loadu_epi16(lb, xr + 16));
			} else {
				const float *restrict xr = x + ((size_t)c * H + ih) * W;
				if (s->bn_in) { /* batch norm + relu on the way in (conv2d_bnfuse.h), the row in L1 */
					dnn_bn_relu_row(s->bn_row, xr, W, s->bn_in[c], s->bn_in[s->C + c],
							s->bn_in[2 * s->C + c]);
					xr = s->bn_row;
				}
				const long avail = s->bn_in ? 0 : (long)(xend - xr);
				a = avail >= 16 ? _mm512_loadu_ps(xr) : _mm512_maskz_loadu_ps(la, xr);
				b = W <= 16	? zero
				    : avail >= 32 ? _mm512_loadu_ps(xr + 16)
						  : _mm512_maskz_loadu_ps(lb, xr + 16);
			}
			for (int h = 0; h < nh; h++) {
				_mm512_mask_storeu_ps(e + off + 16 * h, st[h], _mm512_maskz_permutex2var_ps(ke[h], a, ie[h], b));
				_mm512_mask_storeu_ps(o + off + 16 * h, st[h], _mm512_maskz_permutex2var_ps(ko[h], a, io[h], b));
			}
		}
}

/* Whether split_image512 applies: with the AVX-512 GEMMs (dnn_wino_avx512), on images of at most 32 columns. */
static int split512_applies(const dnn_wino_shape *s, int l, int avx512)
{
	return avx512 && s->W <= SPLIT512_MAX_W && l <= 32;
}

int dnn_wino_reads_bf16(const dnn_wino_shape *s)
{
	return !s->bn_in && split512_applies(s, (s->Q + 1) / 2 + 1, dnn_wino_avx512()); // l = tw + 1 (plan_make)
}

/* Image n of x (fp32, or bf16 values when s->x_bf16). */
static const void *image_of(const float *x, const dnn_wino_shape *s, int n)
{
	return (const char *)x + (size_t)n * s->C * s->H * s->W * (s->x_bf16 ? sizeof(uint16_t) : sizeof(float));
}

/* A bf16 x where the split cannot read it (the caller should have widened it): a worker error, 1. */
static int bf16_x_refused(const dnn_wino_shape *s)
{
	if (!s->x_bf16 || dnn_wino_reads_bf16(s))
		return 0;
	dnn_worker_error("conv2d: Winograd F(2x2) given a bf16 x it cannot read (W %d, Q %d): widen it first", s->W,
			 s->Q);
	return 1;
}

/* split_image's AVX-512 form where it applies; a bf16 x only there (dnn_wino_reads_bf16). */
static void split(float *restrict eo, const void *restrict x, const dnn_wino_shape *s, const wino_plan *pl,
		  int avx512)
{
	if (split512_applies(s, pl->l, avx512))
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

/* Whether the bf16 forward writes V's channel pairs from its input transform (input_row_cpairs): 1 by default, 0
 * (dnn_wino_set_vpairs) keeps the former fp32 V + pack_v as the tests' control. */
static int wino_vpairs = 1;

int dnn_wino_set_vpairs(int on)
{
	wino_vpairs = on != 0;
	return wino_vpairs;
}

/* input_row for two channels c and c + 1 at once, writing V's bf16 channel pairs straight into the layout of
 * dnn_wino_gemms' vdpbf16ps kernel (bf16 forward, AVX512_BF16): lane t of pair row c / 2 holds tile t's bf16 of
 * channel c (low half) and c + 1 (high half). Each xi of both channels rounded by one vcvtne2ps2bf16 and interleaved
 * by one 16-bit permutation: the fp32 values input_row writes, rounded as pack_v rounds them (the same bits),
 * without fp32 V's store and the packing pass's read and write of it. 16 tiles at a time, 8 where at most 8 are
 * left (tile rows of 8 tiles or fewer, the 16x16 and 8x8 images: 16-tile vectors there left 8 or 12 lanes of 16
 * idle and measured 0.95-0.97x the former path on 8x8). e0, o0 and e1, o1: row 2i of channels c and c + 1 in the
 * split image (E, O); e1 NULL: c is the last of an odd C (its high halves zero, as pack_v's). Computed per xi row u
 * of the tile (the two rows it needs of each phase), not the whole 4 x 4 of both channels at once, which would hold
 * 64 vectors. The last vector's loads read past the row, within the scratch (E and O are followed by V); its
 * stores stop at the tile row's end (a mask: a pair row is cap lanes, and 16 lanes past its last tile could reach
 * the next xi's row). */
#define CPAIRS_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512dq,avx2,fma")))
/* One vector of tiles j.. of both channels: VT the float vector, P the intrinsics' prefix, MT the store's mask. */
#define CPAIRS_STEP(VT, P, CVT, MT, IDX)                                                                           \
	do {                                                                                                       \
		static const int ra[4] = {0, 1, 2, 1}, rb[4] = {2, 2, 1, 3}; /* B^T row u: ra - rb, u = 1: + */   \
		const MT st = (MT)(tw - j >= (int)(sizeof(VT) / 4) ? ~0u : (1u << (tw - j)) - 1);                  \
		for (int u = 0; u < 4; u++) {                                                                      \
			VT r[2][4]; /* channel, column xi = 4 u + (0..3) */                                        \
			for (int ch = 0; ch < 2; ch++) {                                                           \
				const float *e = ch ? e1 : e0, *o = ch ? o1 : o0;                                  \
				if (!e) {                                                                          \
					for (int q = 0; q < 4; q++)                                                \
						r[ch][q] = P##_setzero_ps();                                       \
					continue;                                                                  \
				}                                                                                  \
				const size_t a = (size_t)ra[u] * l + j, b = (size_t)rb[u] * l + j;                 \
				/* row u of B^T d at columns 2j, 2j + 2 (E) and 2j + 1, 2j + 3 (O) */              \
				VT tj, tk, sj, sk;                                                                 \
				if (u == 1) {                                                                      \
					tj = P##_add_ps(P##_loadu_ps(e + a), P##_loadu_ps(e + b));                 \
					tk = P##_add_ps(P##_loadu_ps(e + a + 1), P##_loadu_ps(e + b + 1));         \
					sj = P##_add_ps(P##_loadu_ps(o + a), P##_loadu_ps(o + b));                 \
					sk = P##_add_ps(P##_loadu_ps(o + a + 1), P##_loadu_ps(o + b + 1));         \
				} else {                                                                           \
					tj = P##_sub_ps(P##_loadu_ps(e + a), P##_loadu_ps(e + b));                 \
					tk = P##_sub_ps(P##_loadu_ps(e + a + 1), P##_loadu_ps(e + b + 1));         \
					sj = P##_sub_ps(P##_loadu_ps(o + a), P##_loadu_ps(o + b));                 \
					sk = P##_sub_ps(P##_loadu_ps(o + a + 1), P##_loadu_ps(o + b + 1));         \
				}                                                                                  \
				r[ch][0] = P##_sub_ps(tj, tk); /* columns: (B^T d) B, as input_row */              \
				r[ch][1] = P##_add_ps(sj, tk);                                                     \
				r[ch][2] = P##_sub_ps(tk, sj);                                                     \
				r[ch][3] = P##_sub_ps(sj, sk);                                                     \
			}                                                                                          \
			for (int q = 0; q < 4; q++)                                                                \
				P##_mask_storeu_epi32(v + (size_t)(4 * u + q) * vs + j, st,                        \
						      P##_permutexvar_epi16(IDX, CVT(r[1][q], r[0][q])));          \
		}                                                                                                  \
	} while (0)

CPAIRS_TARGET static void input_row_cpairs(uint32_t *restrict v, size_t vs, const float *restrict e0,
					   const float *restrict o0, const float *restrict e1, const float *restrict o1,
					   int l, int tw)
{
	/* cvtne2ps gives channel c's values then channel c + 1's; the permutation interleaves them (pack_v's) */
	const __m512i idx16 = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
					       22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
	const __m256i idx8 = _mm256_set_epi16(15, 7, 14, 6, 13, 5, 12, 4, 11, 3, 10, 2, 9, 1, 8, 0);
#define CVT512(h, a) ((__m512i)_mm512_cvtne2ps_pbh(h, a))
#define CVT256(h, a) ((__m256i)_mm256_cvtne2ps_pbh(h, a))
	for (int j = 0; j < tw;) {
		if (tw - j > 8) {
			CPAIRS_STEP(__m512, _mm512, CVT512, __mmask16, idx16);
			j += 16;
		} else {
			CPAIRS_STEP(__m256, _mm256, CVT256, __mmask8, idx8);
			j += 8;
		}
	}
#undef CVT512
#undef CVT256
}
#undef CPAIRS_STEP
#undef CPAIRS_TARGET

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

/* output_row_y for a bf16 y (dnn_wino_shape.y_bf16): each 8 floats of a row, plus the bias bk (NULL: none), rounded
 * by vcvtneps2bf16 in the register and stored as 8 bf16 values, the row's end under a mask: the bits of
 * dnn_bf16_convert of output_row_y's floats plus the bias (when dnn_bf16_convert_hw says it rounds so), with no
 * fp32 copy of y written or read back. */
__attribute__((target("avx512f,avx512vl,avx512bw,avx512bf16,avx512dq,avx2,fma"))) static void
output_row_y_bf16(uint16_t *restrict y0, uint16_t *restrict y1, const float *restrict mm, size_t ms, int tw, int Q,
		  const float *bk)
{
	const __m256 b = _mm256_set1_ps(bk ? *bk : 0.0f);
	for (int j = 0; j < tw; j += 8) {
		__m256 r[4];
		output_tiles(r, mm, ms, j);
		if (bk) /* the bias added as bias.h's pass adds it to an fp32 y; without one nothing (-0 stays -0) */
			for (int h = 0; h < 4; h++)
				r[h] = _mm256_add_ps(r[h], b);
		/* a row's 16 floats (r[0], r[1]; row 1: r[2], r[3]) as one 512-bit vector: one conversion and one store */
		const int off = 2 * j, n = Q - off;
		const __mmask16 k = (__mmask16)(n >= 16 ? 0xffff : n > 0 ? (1u << n) - 1 : 0);
		if (!k)
			continue;
		_mm256_mask_storeu_epi16(y0 + off, k,
					 (__m256i)_mm512_cvtneps_pbh(_mm512_insertf32x8(_mm512_castps256_ps512(r[0]), r[1], 1)));
		if (y1)
			_mm256_mask_storeu_epi16(
				y1 + off, k, (__m256i)_mm512_cvtneps_pbh(_mm512_insertf32x8(_mm512_castps256_ps512(r[2]), r[3], 1)));
	}
}

/* Whether 16 tiles of one 512-bit vector cover whole tile rows of an image (tw 4 or 8, their 2 tw-column output rows
 * back to back in y or dy) or a part of one (tw a multiple of 16), every tile with both its rows (P even) and no
 * column past the image (Q = 2 tw): ResNet's 8x8, 16x16 and 32x32 images. There F(2x2)'s bf16 transforms that touch
 * y or dy (output_rows_y_bf16, grad_rows_pairs) take 32 tiles at a time. */
static int groups16_apply(int P, int Q, int tw)
{
	return P % 2 == 0 && Q == 2 * tw && (tw == 4 || tw == 8 || tw % 16 == 0);
}

/* Whether the bf16 y's output transform stores 32 tiles' rows at a time (output_rows_y_bf16): 1 by default, 0
 * (dnn_wino_set_ygroups) keeps output_row_y_bf16 per tile row as the tests' control (the same bits). */
static int wino_ygroups = 1;

int dnn_wino_set_ygroups(int on)
{
	wino_ygroups = on != 0;
	return wino_ygroups;
}

/* output_tiles on 16 tiles t .. t + 15 in 512-bit vectors, the same additions in the same order per tile; the two
 * columns of each tile interleaved by one permutation per half: r[0] (tiles t .. t + 7) and r[1] (t + 8 .. t + 15)
 * of output row 0, r[2], r[3] of row 1. */
static inline __attribute__((always_inline, target("avx512f,avx512dq,avx2,fma"))) void
output_tiles16(__m512 r[4], const float *restrict mm, size_t ms, int t)
{
	__m512 s0[4], s1[4];
	for (int u = 0; u < 4; u++) {
		const float *p = mm + (size_t)(4 * u) * ms + t;
		__m512 m0 = _mm512_loadu_ps(p), m1 = _mm512_loadu_ps(p + ms);
		__m512 m2 = _mm512_loadu_ps(p + 2 * ms), m3 = _mm512_loadu_ps(p + 3 * ms);
		s0[u] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2); // columns: M A
		s1[u] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
	}
	__m512 y00 = _mm512_add_ps(_mm512_add_ps(s0[0], s0[1]), s0[2]); // rows: A^T (M A)
	__m512 y01 = _mm512_add_ps(_mm512_add_ps(s1[0], s1[1]), s1[2]);
	__m512 y10 = _mm512_sub_ps(_mm512_sub_ps(s0[1], s0[2]), s0[3]);
	__m512 y11 = _mm512_sub_ps(_mm512_sub_ps(s1[1], s1[2]), s1[3]);
	const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
	const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
	r[0] = _mm512_permutex2var_ps(y00, lo, y01), r[1] = _mm512_permutex2var_ps(y00, hi, y01);
	r[2] = _mm512_permutex2var_ps(y10, lo, y11), r[3] = _mm512_permutex2var_ps(y10, hi, y11);
}

/* output_row_y_bf16 for the tile rows [i0, i1) of one channel (y: its P x Q bf16 values; mt: its chunk tiles in M),
 * where P is even, Q = 2 tw and tw is 4, 8 or a multiple of 16 (groups16_apply's shapes): 16 tiles at a time, whose
 * 64 outputs are 32 consecutive values of y twice (tw 16m: one tile row's two output rows; tw 8: two tile rows'
 * four rows; tw 4: four tile rows' eight rows, regrouped by a 128-bit shuffle), each rounded by one vcvtne2ps2bf16
 * into one 512-bit store: a quarter of output_row_y_bf16's conversions and stores on 8x8 images, half on 16x16 and
 * 32x32, and no masks. The same floats plus the same bias, the same rounding: the same bits. Tile rows that do not
 * fill 16 tiles at the end go to output_row_y_bf16. */
__attribute__((target("avx512f,avx512vl,avx512bw,avx512bf16,avx512dq,avx2,fma"))) static void
output_rows_y_bf16(uint16_t *restrict y, const float *restrict mt, size_t ms, int P, int Q, int tw, int i0, int i1,
		   const float *bk)
{
	const __m512 b = _mm512_set1_ps(bk ? *bk : 0.0f);
	const int n16 = (i1 - i0) * tw / 16;
	for (int g = 0; g < n16; g++) {
		const int t = 16 * g, i = i0 + t / tw, j = t % tw;
		__m512 r[4];
		output_tiles16(r, mt, ms, t);
		if (bk) /* as output_row_y_bf16 */
			for (int h = 0; h < 4; h++)
				r[h] = _mm512_add_ps(r[h], b);
		uint16_t *h0 = y + (size_t)2 * i * Q + 2 * j;
		__m512 a0, a1, c0, c1; // h0[0 .. 32): bf16(a1, a0); h1[0 .. 32): bf16(c1, c0)
		uint16_t *h1;
		if (tw == 4) { // r[0] = rows 2i, 2i + 2; r[1] = 2i + 4, 2i + 6; r[2], r[3]: the odd rows
			a0 = _mm512_shuffle_f32x4(r[0], r[2], 0x44), a1 = _mm512_shuffle_f32x4(r[0], r[2], 0xee);
			c0 = _mm512_shuffle_f32x4(r[1], r[3], 0x44), c1 = _mm512_shuffle_f32x4(r[1], r[3], 0xee);
			h1 = h0 + 4 * (size_t)Q;
		} else if (tw == 8) { // r[0] = row 2i, r[1] = row 2i + 2, r[2] = 2i + 1, r[3] = 2i + 3
			a0 = r[0], a1 = r[2], c0 = r[1], c1 = r[3];
			h1 = h0 + 2 * (size_t)Q;
		} else { // row 2i's 32 columns, then row 2i + 1's
			a0 = r[0], a1 = r[1], c0 = r[2], c1 = r[3];
			h1 = h0 + Q;
		}
		_mm512_storeu_si512(h0, (__m512i)_mm512_cvtne2ps_pbh(a1, a0));
		_mm512_storeu_si512(h1, (__m512i)_mm512_cvtne2ps_pbh(c1, c0));
	}
	for (int i = i0 + 16 * n16 / tw; i < i1; i++) {
		uint16_t *h0 = y + (size_t)2 * i * Q;
		output_row_y_bf16(h0, 2 * i + 1 < P ? h0 + Q : NULL, mt + (size_t)(i - i0) * tw, ms, tw, Q, bk);
	}
}

/* The forward pass, one image's tile rows at a time (a chunk: tile rows of one image, or several
 * whole images): split the image into its even and odd columns, input transforms into V, the 16
 * GEMMs, output transforms. A bf16 y (s->y_bf16): output_row_y_bf16 where the CPU rounds as dnn_bf16_convert does
 * with vcvtneps2bf16, else the chunk's outputs through b.ystage, rounded per chunk (dnn_wino_round_chunk). */
void dnn_wino_forward(float *y, const float *x, const float *w, const dnn_wino_shape *s, float beta,
		      float *work)
{
	if (bf16_x_refused(s))
		return;
	const int C = s->C, K = s->K, P = s->P, Q = s->Q;
	const wino_plan pl = dnn_wino_plan_make(s, WINO_BUDGET, 2);
	const wino_bufs b = dnn_wino_bufs(s, &pl, work);
	const int tw = pl.tw, l = pl.l;
	const size_t kpq = (size_t)K * P * Q, cap = pl.cap;
	const size_t vs = b.vs, ms = b.ms, phs = b.phs;
	float *eo = b.eo, *v = b.v, *mm = b.mm;
	const int avx512 = dnn_wino_avx512();
	/* The output transform writes 2 twv floats per output row: straight into y when that is Q
	 * (Q a multiple of 16) and every tile row has both its rows (P even), overwriting (beta = 0);
	 * else through outb (small images, odd sizes, backward data's accumulate). */
	const int direct = beta == 0.0f && Q % 16 == 0 && P % 2 == 0;
	/* Other overwrites on AVX-512: straight into y too, the rows' ends under a mask (output_row_y). */
	const int exact = !direct && beta == 0.0f && avx512;
	/* bf16 y, rounded in the output transform's registers; else (s->y_bf16) fp32 into the chunk's stage */
	const int ybf = s->y_bf16 && beta == 0.0f && avx512 && dnn_bf16_convert_hw();
	float *const stage = s->y_bf16 && !ybf ? b.ystage : NULL;
	/* ... 32 tiles at a time where the image allows (output_rows_y_bf16) */
	const int ygroups = ybf && dnn_cpu_has_bf16() && wino_ygroups && groups16_apply(P, Q, tw);

	/* bf16 on vdpbf16ps: V written as channel pairs by the input transform (input_row_cpairs) */
	const int vpairs = pl.bf16 && avx512 && dnn_cpu_has_bf16() && wino_vpairs;

	filter_transform(b.u, w, K, C);
	if (pl.bf16)
		dnn_wino_pack_u(&pl, &b, K, C);
	for (int n0 = 0; n0 < s->N; n0 += pl.group) {
		const int ng = imin(pl.group, s->N - n0);
		for (int i0 = 0; i0 < pl.th; i0 += pl.rows) {
			const int i1 = imin(i0 + pl.rows, pl.th), per = (i1 - i0) * tw;
			for (int g = 0; g < ng; g++) {
				if (i0 == 0)
					split(eo, image_of(x, s, n0 + g), s, &pl, avx512);
				if (vpairs) {
					for (int c = 0; c < C; c += 2) {
						const size_t off = (size_t)c * pl.hp * l, off1 = off + (size_t)pl.hp * l;
						uint32_t *vc = (uint32_t *)v + (size_t)(c / 2) * cap + (size_t)g * per;
						for (int i = i0; i < i1; i++) {
							const size_t r = 2 * (size_t)i * l; // row 2i of channels c, c + 1
							input_row_cpairs(vc + (size_t)(i - i0) * tw, vs, eo + off + r,
									 eo + phs + off + r, c + 1 < C ? eo + off1 + r : NULL,
									 eo + phs + off1 + r, l, tw);
						}
					}
					continue;
				}
				for (int c = 0; c < C; c++)
					for (int i = i0; i < i1; i++) {
						const size_t off = ((size_t)c * pl.hp + 2 * (size_t)i) * l;
						input_row(v + (size_t)c * cap + (size_t)g * per + (size_t)(i - i0) * tw, vs,
							  eo + off, eo + phs + off, l, tw);
					}
			}
			if (vpairs)
				dnn_wino_gemms_vpairs(&pl, &b, K, C, ng * per);
			else
				dnn_wino_gemms(&pl, &b, K, C, ng * per, avx512);
			float *rows[2] = {b.outb, b.outb + b.outs};
			float *yc = stage ? stage : ybf ? y : y + (size_t)n0 * kpq; /* the chunk's fp32 outputs */
			for (int g = 0; g < ng && ygroups; g++)
				for (int k = 0; k < K; k++)
					output_rows_y_bf16((uint16_t *)y + (size_t)(n0 + g) * kpq + (size_t)k * P * Q,
							   mm + (size_t)k * cap + (size_t)g * per, ms, P, Q, tw, i0, i1,
							   s->bias ? s->bias + k : NULL);
			for (int g = 0; g < ng && !ygroups; g++)
				for (int k = 0; k < K; k++)
					for (int i = i0; i < i1; i++) {
						const float *mt = mm + (size_t)k * cap + (size_t)g * per + (size_t)(i - i0) * tw;
						const size_t yo = ((size_t)k * P + 2 * (size_t)i) * Q;
						if (ybf) {
							uint16_t *h0 = (uint16_t *)y + (size_t)(n0 + g) * kpq + yo;
							output_row_y_bf16(h0, 2 * i + 1 < P ? h0 + Q : NULL, mt, ms, tw, Q,
									  s->bias ? s->bias + k : NULL);
							continue;
						}
						float *y0 = yc + (size_t)g * kpq + yo;
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
			if (stage)
				dnn_wino_round_chunk((uint16_t *)y, stage, s, n0, ng, 2 * i0, imin(2 * i1, P));
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

/* grad_row reading dy in place (AVX-512): rows y0 = dy row 2i and y1 = row 2i + 1 (NULL past dy's last
 * row) of Q floats, each 16 columns split into their even and odd ones by one permutation, the columns
 * past Q masked to zeros: the same E, O values as grad_row's split copy of dy, the same arithmetic, so
 * the same floats, without writing and reading back that copy (split_image was 40% of the weight
 * gradient's time, half of it for dy). */
__attribute__((target("avx512f,avx512dq,avx2,fma"))) static void grad_row_direct(float *restrict d, size_t ds,
										 const float *restrict y0,
										 const float *restrict y1, int Q,
										 int tw)
{
	const __m256 zero = _mm256_setzero_ps();
	const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
	for (int j = 0; j < tw; j += 8) {
		const int left = Q - 2 * j;
		const __mmask16 m = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
		const __m512 r0 = _mm512_permutexvar_ps(idx, _mm512_maskz_loadu_ps(m, y0 + 2 * j));
		const __m512 r1 = y1 ? _mm512_permutexvar_ps(idx, _mm512_maskz_loadu_ps(m, y1 + 2 * j)) : _mm512_setzero_ps();
		const __m256 e0 = _mm512_castps512_ps256(r0), o0 = _mm512_extractf32x8_ps(r0, 1);
		const __m256 e1 = _mm512_castps512_ps256(r1), o1 = _mm512_extractf32x8_ps(r1, 1);
		__m256 eu[4] = {e0, _mm256_add_ps(e0, e1), _mm256_sub_ps(e0, e1), _mm256_sub_ps(zero, e1)};
		__m256 ou[4] = {o0, _mm256_add_ps(o0, o1), _mm256_sub_ps(o0, o1), _mm256_sub_ps(zero, o1)};
		for (int u = 0; u < 4; u++) {
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

/* The 16 chain sums of 8 accumulators a[0..8) of dot_block512 (16 chains of 8 lanes: chain 2i is a[i]'s low
 * half, 2i + 1 its high half), each summed as hsum sums it, ((l0 + l4) + (l1 + l5)) + ((l2 + l6) + (l3 + l7)):
 * the same additions of the same floats, so the same bits, in 7 adds and 14 shuffles for all 16 instead of
 * ~6 instructions each. Lane 4j + e of the result holds chain j % 2 of a[2e + j / 2]: with a = (p, c), (p + 1,
 * c), (p, c + 1), ... (p + 1, c + 3), 128-bit lane j holds D row 2p + j times V rows c .. c + 3, one row of dU. */
static inline __attribute__((always_inline, target("avx512f,avx512dq,avx2,fma"))) __m512 fold8(const __m512 a[8])
{
	__m512 h[4], q[2];
	for (int i = 0; i < 4; i++) // l_i + l_(i+4) of every chain: [a.q0 + a.q1, a.q2 + a.q3, b.q0 + b.q1, ...]
		h[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
				     _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
	for (int i = 0; i < 2; i++) // hsum's first hadd: the pairs (0 + 1), (2 + 3) in every 128-bit lane
		q[i] = _mm512_add_ps(_mm512_shuffle_ps(h[2 * i], h[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
				     _mm512_shuffle_ps(h[2 * i], h[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
	return _mm512_add_ps(_mm512_shuffle_ps(q[0], q[1], _MM_SHUFFLE(2, 0, 2, 0)), // and its second
			     _mm512_shuffle_ps(q[0], q[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* o0[0..2) += s[0..2), o1[0..2) += s[2..4). */
static inline __attribute__((always_inline, target("avx2"))) void add_pairs(float *o0, float *o1, __m128 s)
{
	__m128 t = _mm_loadh_pi(_mm_loadl_pi(_mm_setzero_ps(), (const __m64 *)o0), (const __m64 *)o1);
	t = _mm_add_ps(t, s);
	_mm_storel_pi((__m64 *)o0, t);
	_mm_storeh_pi((__m64 *)o1, t);
}

/* The AVX-512 weight-gradient GEMM. Each 512-bit accumulator holds two of dot_block's 8-lane
 * chains, (k, c) in its low half and (k + 1, c) in its high half: D's rows k and k + 1 side by
 * side times V's row c broadcast to both halves. Every chain sees the same FMAs in the same
 * order as in dot_block and ends with hsum's additions (fold8 for 4 rows x 4 columns or 8 rows x 2
 * columns at a time, hsum for the rest): bit-identical results. Up to 4 row pairs x 6 columns (24 accumulators, twice
 * dot_block's 12). The sums at the end of the block cost as much as its FMAs where a chunk has few
 * tiles (ResNet-8's 7x7 stage: 128 tiles, 8 FMAs per chain; perf put them at 42% of gemm_nt512 there
 * with hsum alone, and fold8 cuts their instructions about 4-fold). */
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
	/* Row pairs p, p + 1 x 4 columns: one fold8, then 4 rows of dU += a 128-bit lane each. */
	const int PQ = KP / 2 * 2, CQ = CB / 4 * 4;
	for (int p = 0; p < PQ; p += 2)
		for (int cb = 0; cb < CQ; cb += 4) {
			const __m512 a[8] = {acc[p][cb],     acc[p + 1][cb],     acc[p][cb + 1], acc[p + 1][cb + 1],
					     acc[p][cb + 2], acc[p + 1][cb + 2], acc[p][cb + 3], acc[p + 1][cb + 3]};
			const __m512 r = fold8(a);
			float *o = du + (size_t)(2 * p) * lddu + cb;
			_mm_storeu_ps(o, _mm_add_ps(_mm_loadu_ps(o), _mm512_castps512_ps128(r)));
			o += lddu;
			_mm_storeu_ps(o, _mm_add_ps(_mm_loadu_ps(o), _mm512_extractf32x4_ps(r, 1)));
			o += lddu;
			_mm_storeu_ps(o, _mm_add_ps(_mm_loadu_ps(o), _mm512_extractf32x4_ps(r, 2)));
			o += lddu;
			_mm_storeu_ps(o, _mm_add_ps(_mm_loadu_ps(o), _mm512_extractf32x4_ps(r, 3)));
		}
	/* 4 row pairs x the next 2 columns (CB = 6 leaves them): one fold8 too, 128-bit lane j holding rows j and
	 * j + 4 of those two columns (64 bits each). */
	const int CP = KP == 4 && CB - CQ >= 2 ? CQ + 2 : CQ;
	if (CP > CQ) {
		const int c = CQ;
		const __m512 a[8] = {acc[0][c], acc[1][c], acc[0][c + 1], acc[1][c + 1],
				     acc[2][c], acc[3][c], acc[2][c + 1], acc[3][c + 1]};
		const __m512 r = fold8(a);
		add_pairs(du + c, du + (size_t)4 * lddu + c, _mm512_castps512_ps128(r));
		add_pairs(du + (size_t)lddu + c, du + (size_t)5 * lddu + c, _mm512_extractf32x4_ps(r, 1));
		add_pairs(du + (size_t)2 * lddu + c, du + (size_t)6 * lddu + c, _mm512_extractf32x4_ps(r, 2));
		add_pairs(du + (size_t)3 * lddu + c, du + (size_t)7 * lddu + c, _mm512_extractf32x4_ps(r, 3));
	}
	for (int p = 0; p < KP; p++)
		for (int cb = p < PQ ? CP : 0; cb < CB; cb++) {
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

/* ------------------------------------------------------------------ bf16 weight gradient: vdpbf16ps
 * Under --precision bf16 on an AVX512_BF16 CPU, dU[xi] (K, C) += D[xi] (K, tiles) @ V[xi] (C, tiles)^T
 * runs on bf16 pairs along its reduction axis, the tiles: each row of D and V holds uint32 lanes with the
 * bf16 values of tiles 2p and 2p + 1, written so by the transforms where a tile row has an even number of
 * tiles (grad_row_pairs, input_row_pairs), else packed in place after them (vcvtne2ps2bf16 of 32
 * consecutive tiles gives them in that order: no permutation, unlike the forward's channel pairs); one vdpbf16ps adds
 * both products (exact in fp32) to an fp32 lane sum: 32 multiply-adds per instruction against
 * dot_block512's 16, half the bytes read. A register block is 4 rows of D x 4 rows of V, 16
 * accumulators of 16 lanes each, lane j summing the pairs p = j mod 16 in order; at the end of the
 * chunk one transposing tree (reduce16) sums the 16 accumulators' lanes at once into one vector
 * (about 3 instructions per (k, c) instead of a horizontal sum's 8), added to dU. The sum order is
 * the kernel's alone (the chunk plan depends on the shape and the task's batch only): the same bits
 * for any scheduler or worker count. The chunks are fp32's (WINO_FILTER_BUDGET): 2, 4 and 8 times
 * longer ones, to fold the lanes less often, measured slower (0.93x, 0.88x on ResNet-20's convs; the
 * fp32 V and D of a chunk then leave the L2; docs/studies/2026-12-07-wgrad-bf16.md). */
#define WGRAD_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512dq,avx2,fma")))

/* Rows (n, ntp floats at ld floats) -> their tile pairs (n, ntp / 2 uint32 at ld), in place (lane p of a
 * row: the bf16 of tiles 2p (low half) and 2p + 1), ntp a multiple of 8. The store of 32 tiles lands at
 * half their offset, behind what has been read. */
WGRAD_BF16_TARGET static void pack_tile_pairs(float *p, size_t ld, int n, int ntp)
{
	for (int r = 0; r < n; r++) {
		float *row = p + (size_t)r * ld;
		for (int t = 0; t < ntp; t += 32) {
			const int left = ntp - t; // a multiple of 8
			const __mmask16 m0 = left >= 16 ? 0xffff : 0x00ff;
			const __mmask16 m1 = left >= 32 ? 0xffff : left == 24 ? 0x00ff : 0;
			const __m512 a = _mm512_maskz_loadu_ps(m0, row + t), b = _mm512_maskz_loadu_ps(m1, row + t + 16);
			const __mmask16 ms = left >= 32 ? 0xffff : (__mmask16)((1u << (left / 2)) - 1);
			_mm512_mask_storeu_epi32(row + t / 2, ms, (__m512i)_mm512_cvtne2ps_pbh(b, a));
		}
	}
}

/* The 16 lane sums of r[0..16) as one vector (lane i: the sum of acc i's 16 lanes), r in the order
 * that puts them there: r[j] = acc[f(j)] with f = (0 2 1 3 8 10 9 11 4 6 5 7 12 14 13 15), f = f^-1.
 * Four levels of shuffles and adds: 256-bit halves, 128-bit quarters, pairs, single floats. */
static inline __attribute__((always_inline)) WGRAD_BF16_TARGET __m512 reduce16(__m512 r[16])
{
	__m512 s1[8], s2[4], s3[2];
	for (int i = 0; i < 8; i++) // half 0: r[i]'s 8 partial sums, half 1: r[i + 8]'s
		s1[i] = _mm512_add_ps(_mm512_shuffle_f32x4(r[i], r[i + 8], 0x44), _mm512_shuffle_f32x4(r[i], r[i + 8], 0xee));
	for (int i = 0; i < 4; i++) // quarters: r[i], r[i + 8], r[i + 4], r[i + 12]
		s2[i] = _mm512_add_ps(_mm512_shuffle_f32x4(s1[i], s1[i + 4], 0x88),
				      _mm512_shuffle_f32x4(s1[i], s1[i + 4], 0xdd));
	for (int i = 0; i < 2; i++) // each quarter: 2 of s2[i]'s r, 2 of s2[i + 2]'s
		s3[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(s2[i]), _mm512_castps_pd(s2[i + 2]))),
				      _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(s2[i]), _mm512_castps_pd(s2[i + 2]))));
	return _mm512_add_ps(_mm512_shuffle_ps(s3[0], s3[1], _MM_SHUFFLE(2, 0, 2, 0)),
			     _mm512_shuffle_ps(s3[0], s3[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* One step of dot_block_bf16: 16 tile pairs (32 tiles) at p, lanes beyond the mask read as zeros. */
#define DOT_BF16_STEP(LOAD)                                                                        \
	do {                                                                                       \
		__m512bh a[4];                                                                     \
		for (int kb = 0; kb < KB; kb++)                                                    \
			a[kb] = (__m512bh)LOAD(d + (size_t)kb * ld + p);                           \
		for (int cb = 0; cb < CB; cb++) {                                                  \
			const __m512bh x = (__m512bh)LOAD(v + (size_t)cb * ld + p);                \
			for (int kb = 0; kb < KB; kb++)                                            \
				acc[kb][cb] = _mm512_dpbf16_ps(acc[kb][cb], a[kb], x);             \
		}                                                                                  \
	} while (0)

/* du (KB, CB) at lddu += d (KB, np) @ v (CB, np)^T on tile pairs, rows at ld uint32: KB x CB (at most
 * 4 x 4) 16-lane vdpbf16ps chains over the pairs, then reduce16 and 128-bit adds into du's rows. */
static inline __attribute__((always_inline)) WGRAD_BF16_TARGET void
dot_block_bf16(float *du, int lddu, const uint32_t *d, const uint32_t *v, size_t ld, int np, const int KB,
	       const int CB)
{
	__m512 acc[4][4];
	for (int kb = 0; kb < 4; kb++)
		for (int cb = 0; cb < 4; cb++)
			acc[kb][cb] = _mm512_setzero_ps();
	int p = 0;
	for (; p + 16 <= np; p += 16)
		DOT_BF16_STEP(_mm512_loadu_si512);
	if (p < np) {
		const __mmask16 m = (__mmask16)((1u << (np - p)) - 1);
#define MASKED_LOAD(q) _mm512_maskz_loadu_epi32(m, q)
		DOT_BF16_STEP(MASKED_LOAD);
#undef MASKED_LOAD
	}
	static const int f[16] = {0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15};
	__m512 r[16];
	for (int j = 0; j < 16; j++)
		r[j] = acc[f[j] / 4][f[j] % 4];
	const __m512 s = reduce16(r); // lane 4 kb + cb: (kb, cb)
	const __mmask8 mc = (__mmask8)((1u << CB) - 1);
	for (int kb = 0; kb < KB; kb++) {
		float *o = du + (size_t)kb * lddu;
		/* the lane index of vextractf32x4 must be an immediate, also where the loop is not unrolled
		 * (-O1, the sanitizer build) */
		const __m128 q = kb == 0 ? _mm512_castps512_ps128(s)
			       : kb == 1 ? _mm512_extractf32x4_ps(s, 1)
			       : kb == 2 ? _mm512_extractf32x4_ps(s, 2)
					 : _mm512_extractf32x4_ps(s, 3);
		if (CB == 4)
			_mm_storeu_ps(o, _mm_add_ps(_mm_loadu_ps(o), q));
		else
			_mm_mask_storeu_ps(o, mc, _mm_add_ps(_mm_maskz_loadu_ps(mc, o), q));
	}
}
#undef DOT_BF16_STEP

/* dU (K, C) += D (K, np) @ V (C, np)^T on tile pairs (pack_tile_pairs), rows at ld uint32. */
WGRAD_BF16_TARGET static void gemm_nt_bf16(float *du, const uint32_t *d, const uint32_t *v, size_t ld, int K, int C,
					   int np)
{
	for (int k0 = 0; k0 < K; k0 += 4) {
		const int kb = imin(4, K - k0);
		for (int c0 = 0; c0 < C; c0 += 4) {
			const int cb = imin(4, C - c0);
			float *dub = du + (size_t)k0 * C + c0;
			const uint32_t *db = d + (size_t)k0 * ld, *vb = v + (size_t)c0 * ld;
#define NTBF_CB(KB_, CB_)                                                                          \
	case CB_:                                                                                  \
		dot_block_bf16(dub, C, db, vb, ld, np, KB_, CB_);                                  \
		break
#define NTBF_CASE(KB_)                                                                             \
	case KB_:                                                                                  \
		switch (cb) {                                                                      \
			NTBF_CB(KB_, 4);                                                           \
			NTBF_CB(KB_, 3);                                                           \
			NTBF_CB(KB_, 2);                                                           \
			NTBF_CB(KB_, 1);                                                           \
		}                                                                                  \
		break
			switch (kb) {
				NTBF_CASE(4);
				NTBF_CASE(3);
				NTBF_CASE(2);
				NTBF_CASE(1);
			}
#undef NTBF_CASE
#undef NTBF_CB
		}
	}
}

/* grad_row_direct writing D's tile pairs straight away (bf16, AVX-512, tw even so that every tile row starts on
 * a pair): 16 tiles at a time, their 16 xi rounded to bf16 by one vcvtneps2bf16 each and stored as 8 pairs at
 * d + xi * ds (uint32) + j / 2. Half the bytes of fp32 D written, and no packing pass over D: the same values
 * as grad_row_direct then pack_tile_pairs. Columns past Q read as zeros, so the lanes past the tile row hold
 * zeros, stored past it into the next tile row (written later) or the row's slack. */
WGRAD_BF16_TARGET static void grad_row_pairs(uint32_t *restrict d, size_t ds, const float *restrict y0,
					     const float *restrict y1, int Q, int tw)
{
	const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
	const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
	const __m512 zero = _mm512_setzero_ps();
	for (int j = 0; j < tw; j += 16) {
		const int left = Q - 2 * j;
		const __mmask16 m0 = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
		const __mmask16 m1 = left >= 32 ? 0xffff : left <= 16 ? 0 : (__mmask16)((1u << (left - 16)) - 1);
		const __m512 a0 = _mm512_maskz_loadu_ps(m0, y0 + 2 * j), b0 = _mm512_maskz_loadu_ps(m1, y0 + 2 * j + 16);
		const __m512 e0 = _mm512_permutex2var_ps(a0, ie, b0), o0 = _mm512_permutex2var_ps(a0, io, b0);
		__m512 e1 = zero, o1 = zero;
		if (y1) {
			const __m512 a1 = _mm512_maskz_loadu_ps(m0, y1 + 2 * j), b1 = _mm512_maskz_loadu_ps(m1, y1 + 2 * j + 16);
			e1 = _mm512_permutex2var_ps(a1, ie, b1), o1 = _mm512_permutex2var_ps(a1, io, b1);
		}
		const __m512 eu[4] = {e0, _mm512_add_ps(e0, e1), _mm512_sub_ps(e0, e1), _mm512_sub_ps(zero, e1)};
		const __m512 ou[4] = {o0, _mm512_add_ps(o0, o1), _mm512_sub_ps(o0, o1), _mm512_sub_ps(zero, o1)};
		for (int u = 0; u < 4; u++) {
			uint32_t *p = d + (size_t)(4 * u) * ds + j / 2;
			_mm256_storeu_si256((__m256i *)p, (__m256i)_mm512_cvtneps_pbh(eu[u]));
			_mm256_storeu_si256((__m256i *)(p + ds), (__m256i)_mm512_cvtneps_pbh(_mm512_add_ps(eu[u], ou[u])));
			_mm256_storeu_si256((__m256i *)(p + 2 * ds), (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(eu[u], ou[u])));
			_mm256_storeu_si256((__m256i *)(p + 3 * ds), (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(zero, ou[u])));
		}
	}
}

/* Whether the bf16 weight gradient writes D's pairs 32 tiles at a time (grad_rows_pairs): 1 by default, 0
 * (dnn_wino_set_dgroups) keeps grad_row_pairs per tile row as the tests' control (the same bits). */
static int wino_dgroups = 1;

int dnn_wino_set_dgroups(int on)
{
	wino_dgroups = on != 0;
	return wino_dgroups;
}


/* E0, O0 (dy row 2i's even and odd columns), E1, O1 (row 2i + 1's) of the 16 tiles that start at tile row i,
 * column j of channel y (P x Q floats), laid out as grad_row_pairs has them for one tile row: lane = tile index
 * in the chunk's order (tile rows back to back). tw 16m: columns 2j .. 2j + 31 of one tile row; tw 8: tile rows
 * i and i + 1 (dy rows 2i .. 2i + 3, 16 floats each); tw 4: tile rows i .. i + 3 (dy rows 2i .. 2i + 7, 8 floats
 * each, 4 vectors of two rows), regrouped by one more 128-bit shuffle. The same floats as grad_row_pairs reads. */
static inline __attribute__((always_inline)) WGRAD_BF16_TARGET void
dy_group16(__m512 eo[4], const float *restrict y, int Q, int tw, int i, int j)
{
	const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
	const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
	const float *r = y + (size_t)2 * i * Q;
	if (tw == 4) { // rows 2i, 2i + 1 in one vector: lanes 0-3 tile row i's E0, 4-7 row i + 1's, 8-15 their E1
		const __m512i je = _mm512_setr_epi32(0, 2, 4, 6, 16, 18, 20, 22, 8, 10, 12, 14, 24, 26, 28, 30);
		const __m512i jo = _mm512_setr_epi32(1, 3, 5, 7, 17, 19, 21, 23, 9, 11, 13, 15, 25, 27, 29, 31);
		const __m512 z0 = _mm512_loadu_ps(r), z1 = _mm512_loadu_ps(r + 16);
		const __m512 z2 = _mm512_loadu_ps(r + 32), z3 = _mm512_loadu_ps(r + 48);
		const __m512 e01 = _mm512_permutex2var_ps(z0, je, z1), e23 = _mm512_permutex2var_ps(z2, je, z3);
		const __m512 o01 = _mm512_permutex2var_ps(z0, jo, z1), o23 = _mm512_permutex2var_ps(z2, jo, z3);
		eo[0] = _mm512_shuffle_f32x4(e01, e23, 0x44), eo[2] = _mm512_shuffle_f32x4(e01, e23, 0xee);
		eo[1] = _mm512_shuffle_f32x4(o01, o23, 0x44), eo[3] = _mm512_shuffle_f32x4(o01, o23, 0xee);
	} else {
		/* tw 8: a = row 2i (tile row i), b = row 2i + 2 (tile row i + 1); else the two halves of 32 columns */
		const float *a = tw == 8 ? r : r + 2 * j, *b = tw == 8 ? r + 2 * (size_t)Q : a + 16;
		const __m512 a0 = _mm512_loadu_ps(a), b0 = _mm512_loadu_ps(b);
		const __m512 a1 = _mm512_loadu_ps(a + Q), b1 = _mm512_loadu_ps(b + Q);
		eo[0] = _mm512_permutex2var_ps(a0, ie, b0), eo[1] = _mm512_permutex2var_ps(a0, io, b0);
		eo[2] = _mm512_permutex2var_ps(a1, ie, b1), eo[3] = _mm512_permutex2var_ps(a1, io, b1);
	}
}

/* grad_row_pairs for the tile rows [i0, i1) of one channel y of dy (groups16_apply), D's pairs of the chunk's
 * tiles at d: two vectors of 16 tiles at a time, whose 32 tiles are consecutive in D (tile rows back to back),
 * rounded together by one vcvtne2ps2bf16 into one 512-bit store per xi: half the conversions and stores of
 * grad_row_pairs, and on 8x8 and 16x16 images no lanes past the tile row (grad_row_pairs computes 16 lanes for
 * 4 or 8 tiles there). The same arithmetic on the same floats and the same rounding: the same bits. Tile rows
 * that do not fill 16 tiles at the end go to grad_row_pairs. */
WGRAD_BF16_TARGET static void grad_rows_pairs(uint32_t *restrict d, size_t ds, const float *restrict y, int P,
					      int Q, int tw, int i0, int i1)
{
	const __m512 zero = _mm512_setzero_ps();
	const int per = (i1 - i0) * tw, n16 = per / 16;
	for (int g = 0; g < n16; g += 2) {
		const int two = g + 1 < n16;
		__m512 eo[2][4];
		for (int h = 0; h <= two; h++) {
			const int t = 16 * (g + h);
			dy_group16(eo[h], y, Q, tw, i0 + t / tw, t % tw);
		}
		__m512 eu[2][4], ou[2][4];
		for (int h = 0; h < 2; h++) { // rows: A dY, as grad_row_pairs (h = 1 unused when !two)
			const __m512 e0 = eo[h][0], o0 = eo[h][1], e1 = eo[h][2], o1 = eo[h][3];
			eu[h][0] = e0, eu[h][1] = _mm512_add_ps(e0, e1), eu[h][2] = _mm512_sub_ps(e0, e1);
			eu[h][3] = _mm512_sub_ps(zero, e1);
			ou[h][0] = o0, ou[h][1] = _mm512_add_ps(o0, o1), ou[h][2] = _mm512_sub_ps(o0, o1);
			ou[h][3] = _mm512_sub_ps(zero, o1);
			if (!two)
				break;
		}
		for (int u = 0; u < 4; u++) { // columns: (e, e + o, e - o, -o)
			uint32_t *p = d + (size_t)(4 * u) * ds + 8 * (size_t)g;
			__m512 c[2][4];
			for (int h = 0; h <= two; h++) {
				c[h][0] = eu[h][u], c[h][1] = _mm512_add_ps(eu[h][u], ou[h][u]);
				c[h][2] = _mm512_sub_ps(eu[h][u], ou[h][u]), c[h][3] = _mm512_sub_ps(zero, ou[h][u]);
			}
			for (int q = 0; q < 4; q++)
				if (two)
					_mm512_storeu_si512(p + q * ds, (__m512i)_mm512_cvtne2ps_pbh(c[1][q], c[0][q]));
				else
					_mm256_storeu_si256((__m256i *)(p + q * ds), (__m256i)_mm512_cvtneps_pbh(c[0][q]));
		}
	}
	for (int i = i0 + 16 * n16 / tw; i < i1; i++) {
		const float *y0 = y + (size_t)2 * i * Q;
		grad_row_pairs(d + (size_t)((i - i0) * tw) / 2, ds, y0, 2 * i + 1 < P ? y0 + Q : NULL, Q, tw);
	}
}

/* input_row writing V's tile pairs straight away (bf16, tw even), 16 tiles at a time in 512-bit vectors: the
 * same values as input_row then pack_tile_pairs, without fp32 V. e, o: row 2i of the channel in the split
 * image (E, O); the loads of the last vector read past the row, within the scratch (E and O are followed by
 * dy's split buffer and V), and their lanes land past the tile row: in the next tile row (written later) or
 * past the chunk's tiles, whose pairs [nt / 2, ntp / 2) are zeroed before the GEMM. */
WGRAD_BF16_TARGET static void input_row_pairs(uint32_t *restrict v, size_t vs, const float *restrict e,
					      const float *restrict o, int l, int tw)
{
	for (int j = 0; j < tw; j += 16) {
		__m512 ej[4], ek[4], oj[4], ok[4]; // rows 0..3 at columns 2j, 2j+2 (E) and 2j+1, 2j+3 (O)
		for (int r = 0; r < 4; r++) {
			ej[r] = _mm512_loadu_ps(e + (size_t)r * l + j);
			ek[r] = _mm512_loadu_ps(e + (size_t)r * l + j + 1);
			oj[r] = _mm512_loadu_ps(o + (size_t)r * l + j);
			ok[r] = _mm512_loadu_ps(o + (size_t)r * l + j + 1);
		}
		__m512 tj[4], tk[4], sj[4], sk[4]; // rows: B^T d, as input_row
#define BT512(dst, src)                                                                            \
	dst[0] = _mm512_sub_ps(src[0], src[2]);                                                    \
	dst[1] = _mm512_add_ps(src[1], src[2]);                                                    \
	dst[2] = _mm512_sub_ps(src[2], src[1]);                                                    \
	dst[3] = _mm512_sub_ps(src[1], src[3])
		BT512(tj, ej);
		BT512(tk, ek);
		BT512(sj, oj);
		BT512(sk, ok);
#undef BT512
		for (int u = 0; u < 4; u++) { // columns: (B^T d) B, each xi rounded to 8 pairs
			uint32_t *p = v + (size_t)(4 * u) * vs + j / 2;
			_mm256_storeu_si256((__m256i *)p, (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(tj[u], tk[u])));
			_mm256_storeu_si256((__m256i *)(p + vs), (__m256i)_mm512_cvtneps_pbh(_mm512_add_ps(sj[u], tk[u])));
			_mm256_storeu_si256((__m256i *)(p + 2 * vs), (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(tk[u], sj[u])));
			_mm256_storeu_si256((__m256i *)(p + 3 * vs), (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(sj[u], sk[u])));
		}
	}
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

/* The weight gradient's plan. The transforms store the 16 xi of a tile row at V's and D's xi stride, C cap
 * and K cap floats: where that is a multiple of 4 KiB (ResNet-8's 14x14 convs: 5 images of 49 tiles, cap
 * 256, C = 32), all 16 stores land in one L1 set, more than its 12 ways; 8 (up to 32) more floats of row
 * stride move them apart (measured in docs/studies/2026-12-07-wgrad-bf16.md). The stride only: the sums and
 * their order are the same. */
static wino_plan filter_plan(const dnn_wino_shape *s)
{
	wino_plan pl = dnn_wino_plan_make(s, WINO_FILTER_BUDGET, 2);
	for (int i = 0; i < 4 && (((size_t)s->C * pl.cap) % 1024 == 0 || ((size_t)s->K * pl.cap) % 1024 == 0); i++)
		pl.cap += 8; // (not possible with 128 channels: rows stay 32-byte aligned)
	return pl;
}

size_t dnn_wino_filter_work(const dnn_wino_shape *s)
{
	wino_plan pl = filter_plan(s);
	return 16 * (size_t)s->K * s->C + pl.eo + 2 * (size_t)s->K * pl.hp * pl.l +
	       16 * ((size_t)s->C + s->K) * pl.cap;
}

void dnn_wino_backward_filter(float *dw, const float *x, const float *dy, const dnn_wino_shape *s,
			      float *work)
{
	if (bf16_x_refused(s))
		return;
	const int C = s->C, K = s->K, P = s->P, Q = s->Q;
	const wino_plan pl = filter_plan(s);
	const int tw = pl.tw, l = pl.l;
	const size_t kpq = (size_t)K * P * Q, cap = pl.cap;
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
	const int dpbf16 = s->bf16 && avx512 && dnn_cpu_has_bf16(); // vdpbf16ps on tile pairs (above)
	const int dpairs = dpbf16 && tw % 2 == 0; // D and V written as pairs (grad_row_pairs, input_row_pairs)
	const int dgroups = dpairs && wino_dgroups && groups16_apply(P, Q, tw); // D's pairs 32 tiles at a time (grad_rows_pairs)

	memset(du, 0, 16 * (size_t)K * C * sizeof(float));
	for (int n0 = 0; n0 < s->N; n0 += pl.group) {
		const int ng = imin(pl.group, s->N - n0);
		for (int i0 = 0; i0 < pl.th; i0 += pl.rows) {
			const int i1 = imin(i0 + pl.rows, pl.th), per = (i1 - i0) * tw;
			const int nt = ng * per, ntp = (nt + 7) / 8 * 8;
			for (int m = 0; m < ng; m++) {
				if (i0 == 0) {
					split(eo, image_of(x, s, n0 + m), s, &pl, avx512);
					if (!avx512) /* AVX-512: D's transform reads dy in place (grad_row_direct) */
						split(eod, dy + (size_t)(n0 + m) * kpq, &sy, &pl, avx512);
				}
				const size_t t0 = (size_t)m * per;
				for (int c = 0; c < C; c++)
					for (int i = i0; i < i1; i++) {
						size_t off = ((size_t)c * pl.hp + 2 * i) * l;
						if (dpairs)
							input_row_pairs((uint32_t *)v + (size_t)c * cap + (t0 + (size_t)(i - i0) * tw) / 2,
									vs, e + off, o + off, l, tw);
						else
							input_row(v + (size_t)c * cap + t0 + (size_t)(i - i0) * tw, vs,
								  e + off, o + off, l, tw);
					}
				for (int k = 0; k < K && dgroups; k++)
					grad_rows_pairs((uint32_t *)d + (size_t)k * cap + t0 / 2, ds,
							dy + (size_t)(n0 + m) * kpq + (size_t)k * P * Q, P, Q, tw, i0, i1);
				for (int k = 0; k < K && !dgroups; k++)
					for (int i = i0; i < i1; i++) {
						size_t off = ((size_t)k * pl.hp + 2 * i) * l;
						if (dpairs) {
							const float *y0 = dy + (size_t)(n0 + m) * kpq + ((size_t)k * P + 2 * i) * Q;
							grad_row_pairs((uint32_t *)d + (size_t)k * cap + (t0 + (size_t)(i - i0) * tw) / 2, ds,
								       y0, 2 * i + 1 < P ? y0 + Q : NULL, Q, tw);
						} else if (avx512) {
							const float *y0 = dy + (size_t)(n0 + m) * kpq + ((size_t)k * P + 2 * i) * Q;
							grad_row_direct(d + (size_t)k * cap + t0 + (size_t)(i - i0) * tw, ds, y0,
									2 * i + 1 < P ? y0 + Q : NULL, Q, tw);
						} else {
							grad_row(d + (size_t)k * cap + t0 + (size_t)(i - i0) * tw, ds,
								 ey + off, oy + off, l, tw);
						}
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
			if (dpbf16) {
				for (int xi = 0; xi < 16; xi++) {
					if (dpairs) { // pairs [nt / 2, ntp / 2) zero (nt is even: whole tile rows of even tw)
						for (int c = 0; c < C; c++)
							dnn_zero_floats(v + xi * vs + (size_t)c * cap + nt / 2, (long)(ntp - nt) / 2);
						for (int k = 0; k < K; k++)
							dnn_zero_floats(d + xi * ds + (size_t)k * cap + nt / 2, (long)(ntp - nt) / 2);
					} else {
						pack_tile_pairs(v + xi * vs, cap, C, ntp);
						pack_tile_pairs(d + xi * ds, cap, K, ntp);
					}
					gemm_nt_bf16(du + xi * (size_t)K * C, (const uint32_t *)(d + xi * ds),
						     (const uint32_t *)(v + xi * vs), cap, K, C, ntp / 2);
				}
				continue;
			}
			if (s->bf16) // no AVX512_BF16: D and V rounded to bf16 values, bf16 products, the same fp32 sums
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
int dnn_wino_reads_bf16(const dnn_wino_shape *s)
{
	(void)s;
	return 0;
}

int dnn_wino_set_vpairs(int on)
{
	(void)on;
	return 0;
}

int dnn_wino_set_dgroups(int on)
{
	(void)on;
	return 0;
}

int dnn_wino_set_ygroups(int on)
{
	(void)on;
	return 0;
}

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
