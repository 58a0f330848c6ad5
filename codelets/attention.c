/* attention.c — causal multi-head self-attention: CPU kernels (tiled, online softmax), codelets,
 * insert helpers (attention.h).
 *
 * Each (sample, head)'s q, k, v (and dy) are first packed into T x D blocks (see pack()).
 * Forward, per block of DNN_ATT_BQ queries (FlashAttention's loop): for each block of DNN_ATT_BK
 * keys up to the diagonal, S = q k^T / sqrt(D) (an SGEMM on the tile), then per query row the
 * online softmax: m' = max(m, max S), P = exp(S - m'), l = l e^(m - m') + sum P, and the row's
 * accumulator o (BQ x D scratch) scaled by e^(m - m') before o += P v (an SGEMM). At the end
 * y = o / l and lse = m + log l. Keys past a query are masked (P = 0) inside the diagonal tiles,
 * and tiles wholly past the last query of the block are never computed.
 * Backward, per block of queries: D_t = dy[t].y[t] first, then per key block up to the diagonal
 * P = exp(S - lse) (recomputed), dv += P^T dy, dP = dy v^T, dS = P (dP - D) / sqrt(D), dq += dS k
 * (a BQ x D scratch, written into dqkv once per query block), dk += dS^T q; dk and dv are summed
 * in packed T x D blocks, written (or added) into dqkv once per head. The order of every sum is
 * fixed, whatever the thread or run.
 * With bf16 (--precision bf16) the five products' operands are rounded to bf16 (q, k, v, dy, and
 * the fp32 P and dS tiles) and summed in fp32 (gemm_bf16.h); the online softmax, lse, D_t and the
 * dq/dk/dv accumulators stay fp32. q, k, v and dy are rounded once per head, as they are packed,
 * into bf16 blocks that the tiles' products read in place (rounded per tile product instead, each
 * key block's k and v were rounded once per query block: T/BQ times); the same bits either way.
 * With y_bf16 (the plan's bf16 activation storage, graph/model.h y_bf16) the forward writes y in
 * bf16, rounded as the proj dense's GEMM rounded the fp32 y before (dnn_bf16_convert), and the
 * backward's D_t = dy[t].y[t] reads that stored y, widened: D_t then carries y's rounding (relative
 * 2^-8 per element; tests/op_bf16.c bounds its effect), as FlashAttention's bf16 backward does.
 */
#include "attention.h"

#include <math.h>
#include <string.h>

#include "dnn_codelet.h"
#include "gemm_bf16.h"

#define BQ DNN_ATT_BQ
#define BK DNN_ATT_BK

size_t dnn_attention_scratch_floats(int T, int D)
{
	/* forward: the head's q, k, v (3 T x D), S (BQ x BK), m, l (BQ), the y accumulator (BQ x D);
	 * backward: the head's q, k, v, dy, dk, dv (6 T x D), P, dP (BQ x BK each), D_t (BQ), dq (BQ x D) */
	const size_t t = T > 0 ? (size_t)T : 0, d = D > 0 ? (size_t)D : 0;
	return 6 * t * d + 2 * (size_t)BQ * BK + 2 * (size_t)BQ + (size_t)BQ * d;
}

double dnn_attention_flops_fwd(const dnn_attention_args *a) { return 2.0 * a->N * (double)a->T * a->T * a->C; }
double dnn_attention_flops_bwd(const dnn_attention_args *a) { return 5.0 * a->N * (double)a->T * a->T * a->C; }

// ------------------------------------------------------------------------------- row loops

/* The softmax's row loops, portable and AVX2 (the exp there is Cephes' expf polynomial, within
 * 2 ulp of expf; the tail of a row past its last multiple of 8 uses expf). Both only read the
 * row's valid columns. */
typedef struct {
	float (*max)(const float *s, int n);              // max of s[0..n), n >= 1
	float (*exp_sum)(float *s, int n, float sub);     // s[j] = exp(s[j] - sub), j < n; returns the sum
	void (*dsoft)(float *dp, const float *p, float dt, float scale, int n); // dp = p (dp - dt) scale
} row_ops;

static float max_scalar(const float *s, int n)
{
	float m = s[0];
	for (int j = 1; j < n; j++)
		m = s[j] > m ? s[j] : m;
	return m;
}

static float exp_sum_scalar(float *s, int n, float sub)
{
	float sum = 0.0f;
	for (int j = 0; j < n; j++) {
		s[j] = expf(s[j] - sub);
		sum += s[j];
	}
	return sum;
}

static void dsoft_scalar(float *restrict dp, const float *restrict p, float dt, float scale, int n)
{
	for (int j = 0; j < n; j++)
		dp[j] = p[j] * (dp[j] - dt) * scale;
}

static const row_ops ops_scalar = {max_scalar, exp_sum_scalar, dsoft_scalar};

#if defined(__x86_64__) && defined(__GNUC__)
#include "simd_exp.h"
#define ATT_AVX2 DNN_AVX2_FMA

/* exp8: simd_exp.h (Cephes' expf polynomial, NaN kept) */

ATT_AVX2 static inline float hsum8(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

ATT_AVX2 static float max_avx2(const float *s, int n)
{
	int j = 0;
	float m = s[0];
	if (n >= 8) {
		__m256 v = _mm256_loadu_ps(s);
		for (j = 8; j + 8 <= n; j += 8)
			v = _mm256_max_ps(v, _mm256_loadu_ps(s + j));
		__m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
		h = _mm_max_ps(h, _mm_movehl_ps(h, h));
		h = _mm_max_ss(h, _mm_movehdup_ps(h));
		m = _mm_cvtss_f32(h);
	}
	for (; j < n; j++)
		m = s[j] > m ? s[j] : m;
	return m;
}

ATT_AVX2 static float exp_sum_avx2(float *s, int n, float sub)
{
	const __m256 vs = _mm256_set1_ps(sub);
	__m256 acc = _mm256_setzero_ps();
	int j = 0;
	for (; j + 8 <= n; j += 8) {
		const __m256 e = dnn_exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), vs));
		_mm256_storeu_ps(s + j, e);
		acc = _mm256_add_ps(acc, e);
	}
	float sum = hsum8(acc);
	for (; j < n; j++) {
		s[j] = expf(s[j] - sub);
		sum += s[j];
	}
	return sum;
}

ATT_AVX2 static void dsoft_avx2(float *restrict dp, const float *restrict p, float dt, float scale, int n)
{
	const __m256 vd = _mm256_set1_ps(dt), vc = _mm256_set1_ps(scale);
	int j = 0;
	for (; j + 8 <= n; j += 8) {
		const __m256 g = _mm256_sub_ps(_mm256_loadu_ps(dp + j), vd);
		_mm256_storeu_ps(dp + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(p + j), g), vc));
	}
	for (; j < n; j++)
		dp[j] = p[j] * (dp[j] - dt) * scale;
}

static const row_ops ops_avx2 = {max_avx2, exp_sum_avx2, dsoft_avx2};

static int have_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#else
static const row_ops ops_avx2 = {max_scalar, exp_sum_scalar, dsoft_scalar};
static int have_avx2(void) { return 0; }
#endif

static const row_ops *volatile row = NULL; /* NULL: not chosen yet (the first kernel chooses) */

int dnn_attention_set_simd(int on)
{
	const int simd = on && have_avx2();
	row = simd ? &ops_avx2 : &ops_scalar;
	return simd;
}

static const row_ops *row_ops_get(void)
{
	const row_ops *r = row;
	if (!r) {
		dnn_attention_set_simd(1);
		r = row;
	}
	return r;
}

// ------------------------------------------------------------------------------- CPU kernels

/* rows [r0, r0+n) of D floats at stride ld -> a packed n x D block. The kernels copy each head's
 * q, k, v (and dy) into packed T x D blocks first: with GPT-2's widths (ld = 3C = 2304 floats,
 * 9 KiB) the rows of a strided head fall into a few cache sets and the tiles' SGEMMs ran at less
 * than half their rate (55-77 against 120-145 GFLOP/s forward, T = 1024, D = 64, 12 heads). */
static void pack(float *restrict dst, const float *restrict src, int r0, int n, int D, int ld)
{
	for (int r = 0; r < n; r++)
		memcpy(dst + (size_t)r * D, src + (size_t)(r0 + r) * ld, (size_t)D * sizeof(float));
}

/* The same into a packed n x D block of bf16, rounded as dnn_gemm_bf16 rounds (dnn_bf16_convert):
 * packed in fp32 into stage (n x D floats) first, then rounded in one call (a call per row of D =
 * 32 cost more than the rounding: attention forward ran 25% slower on gpt-nano). */
static void pack_bf16(uint16_t *restrict dst, float *restrict stage, const float *restrict src, int n, int D, int ld)
{
	pack(stage, src, 0, n, D, ld);
	dnn_bf16_convert(dst, stage, (size_t)n * D);
}

/* A head's rows of a bf16 qkv (stored rounded: the bf16 activation storage) -> a packed n x D bf16
 * block: a copy, the values pack_bf16 gives from the fp32 qkv they were rounded from. */
static void pack16(uint16_t *restrict dst, const uint16_t *restrict src, int n, int D, int ld)
{
	for (int r = 0; r < n; r++)
		memcpy(dst + (size_t)r * D, src + (size_t)r * ld, (size_t)D * sizeof(uint16_t));
}

/* q, k or v of one head into its packed bf16 block: from a bf16 qkv (xh) or the fp32 one (x). */
static void pack_head_bf16(uint16_t *dst, float *stage, const float *x, const uint16_t *xh, size_t o, int T, int D,
			   int ld)
{
	if (xh)
		pack16(dst, xh + o, T, D, ld);
	else
		pack_bf16(dst, stage, x + o, T, D, ld);
}

/* A packed head (T,D) as a tile product's operand: fp32, or (bf16) its bf16 copy; rows from r0. */
static dnn_bf16_operand rows(dnn_bf16_operand o, int r0)
{
	if (o.f)
		o.f += (size_t)r0 * o.ld;
	else
		o.h += (size_t)r0 * o.ld;
	return o;
}
static dnn_bf16_operand tile(const float *t, int ld) { return (dnn_bf16_operand){.f = t, .ld = ld}; }

/* One tile product C = alpha op(A) op(B) + beta C: sgemm (fp32), or the bf16 GEMM reading the
 * head's bf16 operands in place and rounding the fp32 tiles (P, dS). */
static int tile_gemm(int bf16, int tA, int tB, int M, int N, int K, float alpha, dnn_bf16_operand A, dnn_bf16_operand B,
		     float beta, float *C, int ldc)
{
	if (bf16)
		return dnn_gemm_bf16_ex(tA, tB, M, N, K, alpha, A, B, beta, NULL, C, ldc);
	return dnn_gemm(0, tA, tB, M, N, K, alpha, A.f, A.ld, B.f, B.ld, beta, C, ldc);
}

/* One (sample, head), packed: q, k, v (T,D), fp32 or bf16; y rows of stride ldy (fp32, or bf16 when
 * yh: y is then unused); lse (T) or NULL. */
static int fwd_head(float *y, uint16_t *yh, float *lse, dnn_bf16_operand q, dnn_bf16_operand k, dnn_bf16_operand v,
		    int T, int D, int ldy, float scale, float *scratch, const row_ops *ro, int bf16)
{
	int rc = 0;
	float *S = scratch, *m = S + (size_t)BQ * BK, *l = m + BQ, *os = l + BQ;
	for (int i0 = 0; i0 < T; i0 += BQ) {
		const int bq = T - i0 < BQ ? T - i0 : BQ;
		memset(os, 0, (size_t)bq * D * sizeof(float));
		for (int r = 0; r < bq; r++)
			m[r] = -INFINITY, l[r] = 0.0f;
		for (int j0 = 0; j0 < i0 + bq; j0 += BK) {
			/* keys j0 .. j0+bk-1, the last one no later than the block's last query */
			const int bk = i0 + bq - j0 < BK ? i0 + bq - j0 : BK;
			rc |= tile_gemm(bf16, 0, 1, bq, bk, D, scale, rows(q, i0), rows(k, j0), 0.0f, S, BK);
			for (int r = 0; r < bq; r++) {
				float *s = S + (size_t)r * BK;
				/* query i0+r sees keys up to itself: n of this tile's columns */
				const int lim = i0 + r - j0 + 1, n = lim < bk ? lim : bk;
				if (n <= 0) {
					memset(s, 0, (size_t)bk * sizeof(float));
					continue;
				}
				const float mx = ro->max(s, n), mnew = mx > m[r] ? mx : m[r];
				const float sum = ro->exp_sum(s, n, mnew);
				if (n < bk)
					memset(s + n, 0, (size_t)(bk - n) * sizeof(float));
				if (mnew != m[r]) {
					const float alpha = expf(m[r] - mnew); /* 0 on the row's first tile */
					float *o = os + (size_t)r * D;
					for (int d = 0; d < D; d++)
						o[d] *= alpha;
					l[r] = l[r] * alpha + sum;
					m[r] = mnew;
				} else {
					l[r] += sum;
				}
			}
			rc |= tile_gemm(bf16, 0, 0, bq, D, bk, 1.0f, tile(S, BK), rows(v, j0), 1.0f, os, D);
		}
		for (int r = 0; r < bq; r++) {
			const float inv = 1.0f / l[r];
			float *o = os + (size_t)r * D;
			float *yr = yh ? o : y + (size_t)(i0 + r) * ldy; /* bf16: in place, rounded below */
			for (int d = 0; d < D; d++)
				yr[d] = o[d] * inv;
			if (lse)
				lse[i0 + r] = m[r] + logf(l[r]);
		}
		if (yh) /* the block's rows in one call (a call per row of D floats costs more than its rounding) */
			dnn_bf16_convert_rows(yh + (size_t)i0 * ldy, ldy, os, D, bq, D);
	}
	return rc ? -1 : 0;
}

int dnn_attention_forward_cpu(void *y, float *lse, const void *qkvv, const dnn_attention_args *a, float *scratch)
{
	// y (N,T,C) fp32 or bf16, lse (N,H,T), qkv (N,T,3C) fp32 or bf16
	const int T = a->T, C = a->C, H = a->H, D = C / H;
	if ((a->y_bf16 || a->x_bf16) && !a->bf16)
		return -1;
	const float *qkv = a->x_bf16 ? NULL : qkvv;
	const uint16_t *qkvh = a->x_bf16 ? qkvv : NULL;
	const size_t TD = (size_t)T * D;
	const float scale = 1.0f / sqrtf((float)D);
	const row_ops *ro = row_ops_get();
	float *hq = scratch, *hk = hq + TD, *hv = hk + TD, *tiles = hv + TD;
	uint16_t *bq = (uint16_t *)scratch, *bk = bq + TD, *bv = bk + TD; /* bf16: in hq, hk's room; hv stages */
	dnn_bf16_operand oq = {.f = hq, .ld = D}, ok = {.f = hk, .ld = D}, ov = {.f = hv, .ld = D};
	if (a->bf16)
		oq = (dnn_bf16_operand){.h = bq, .ld = D}, ok = (dnn_bf16_operand){.h = bk, .ld = D},
		ov = (dnn_bf16_operand){.h = bv, .ld = D};
	for (int n = 0; n < a->N; n++)
		for (int h = 0; h < H; h++) {
			const size_t ox = (size_t)n * T * 3 * C + (size_t)h * D;
			if (a->bf16) {
				pack_head_bf16(bq, hv, qkv, qkvh, ox, T, D, 3 * C);
				pack_head_bf16(bk, hv, qkv, qkvh, ox + C, T, D, 3 * C);
				pack_head_bf16(bv, hv, qkv, qkvh, ox + 2 * C, T, D, 3 * C);
			} else {
				const float *q = qkv + ox;
				pack(hq, q, 0, T, D, 3 * C);
				pack(hk, q + C, 0, T, D, 3 * C);
				pack(hv, q + 2 * C, 0, T, D, 3 * C);
			}
			float *lh = lse ? lse + ((size_t)n * H + h) * T : NULL;
			const size_t oy = (size_t)n * T * C + (size_t)h * D;
			float *yf = a->y_bf16 ? NULL : (float *)y + oy;
			uint16_t *yh = a->y_bf16 ? (uint16_t *)y + oy : NULL;
			if (fwd_head(yf, yh, lh, oq, ok, ov, T, D, C, scale, tiles, ro, a->bf16) != 0)
				return -1;
		}
	return 0;
}

/* One (sample, head), packed: dq rows of stride ld (=|+= per accumulate), dk, dv (T,D) +=, q, k,
 * v, dy (T,D) as the products' operands (fp32 or bf16), dyf the fp32 dy (T,D) for D_t, y rows of
 * stride ldy (fp32 y, or bf16 yh, the other NULL), lse (T). */
static int bwd_head(float *dq, int ld, float *dk, float *dv, dnn_bf16_operand q, dnn_bf16_operand k,
		    dnn_bf16_operand v, dnn_bf16_operand dy, const float *dyf, const float *y, const uint16_t *yh,
		    int ldy, const float *lse, int T, int D, float scale, int accumulate, float *scratch,
		    const row_ops *ro, int bf16)
{
	int rc = 0;
	float *P = scratch, *dP = P + (size_t)BQ * BK, *Dt = dP + (size_t)BQ * BK, *dqs = Dt + BQ;
	for (int i0 = 0; i0 < T; i0 += BQ) {
		const int bq = T - i0 < BQ ? T - i0 : BQ;
		const float *dyi = dyf + (size_t)i0 * D;
		for (int r = 0; r < bq; r++) {
			const float *dyr = dyi + (size_t)r * D;
			float s = 0.0f;
			if (yh) {
				const uint16_t *yr = yh + (size_t)(i0 + r) * ldy;
				for (int d = 0; d < D; d++)
					s += dyr[d] * dnn_bf16_to_f32(yr[d]);
			} else {
				const float *yr = y + (size_t)(i0 + r) * ldy;
				for (int d = 0; d < D; d++)
					s += dyr[d] * yr[d];
			}
			Dt[r] = s;
		}
		memset(dqs, 0, (size_t)bq * D * sizeof(float));
		for (int j0 = 0; j0 < i0 + bq; j0 += BK) {
			const int bk = i0 + bq - j0 < BK ? i0 + bq - j0 : BK;
			const dnn_bf16_operand qi = rows(q, i0), dyo = rows(dy, i0), kj = rows(k, j0), vj = rows(v, j0);
			rc |= tile_gemm(bf16, 0, 1, bq, bk, D, scale, qi, kj, 0.0f, P, BK);
			for (int r = 0; r < bq; r++) {
				float *p = P + (size_t)r * BK;
				const int lim = i0 + r - j0 + 1, n = lim < 0 ? 0 : lim < bk ? lim : bk;
				if (n > 0)
					ro->exp_sum(p, n, lse[i0 + r]);
				if (n < bk)
					memset(p + n, 0, (size_t)(bk - n) * sizeof(float));
			}
			// dv (bk,D) += P^T (bk,bq) dy (bq,D)
			rc |= tile_gemm(bf16, 1, 0, bk, D, bq, 1.0f, tile(P, BK), dyo, 1.0f, dv + (size_t)j0 * D, D);
			// dP (bq,bk) = dy (bq,D) v^T (D,bk)
			rc |= tile_gemm(bf16, 0, 1, bq, bk, D, 1.0f, dyo, vj, 0.0f, dP, BK);
			for (int r = 0; r < bq; r++)
				ro->dsoft(dP + (size_t)r * BK, P + (size_t)r * BK, Dt[r], scale, bk);
			// dq (bq,D) += dS (bq,bk) k (bk,D); dk (bk,D) += dS^T (bk,bq) q (bq,D)
			rc |= tile_gemm(bf16, 0, 0, bq, D, bk, 1.0f, tile(dP, BK), kj, 1.0f, dqs, D);
			rc |= tile_gemm(bf16, 1, 0, bk, D, bq, 1.0f, tile(dP, BK), qi, 1.0f, dk + (size_t)j0 * D, D);
		}
		for (int r = 0; r < bq; r++) {
			float *dqr = dq + (size_t)(i0 + r) * ld;
			const float *s = dqs + (size_t)r * D;
			if (accumulate)
				for (int d = 0; d < D; d++)
					dqr[d] += s[d];
			else
				memcpy(dqr, s, (size_t)D * sizeof(float));
		}
	}
	return rc ? -1 : 0;
}

/* dst rows of stride ld (=|+=) the packed src (T,D). */
static void unpack(float *restrict dst, int ld, const float *restrict src, int T, int D, int accumulate)
{
	for (int t = 0; t < T; t++) {
		float *d = dst + (size_t)t * ld;
		const float *s = src + (size_t)t * D;
		if (accumulate)
			for (int i = 0; i < D; i++)
				d[i] += s[i];
		else
			memcpy(d, s, (size_t)D * sizeof(float));
	}
}

int dnn_attention_backward_cpu(float *dqkv, const void *qkvv, const void *y, const float *dy, const float *lse,
			       const dnn_attention_args *a, float *scratch)
{
	// dqkv (N,T,3C) =|+=, qkv (N,T,3C) fp32 or bf16, y (N,T,C) fp32 or bf16, dy (N,T,C), lse (N,H,T)
	const int T = a->T, C = a->C, H = a->H, D = C / H;
	if ((a->y_bf16 || a->x_bf16) && !a->bf16)
		return -1;
	const float *qkv = a->x_bf16 ? NULL : qkvv;
	const uint16_t *qkvh = a->x_bf16 ? qkvv : NULL;
	const size_t TD = (size_t)T * D;
	const float scale = 1.0f / sqrtf((float)D);
	const row_ops *ro = row_ops_get();
	float *hq = scratch, *hk = hq + TD, *hv = hk + TD, *hdy = hv + TD, *hdk = hdy + TD, *hdv = hdk + TD;
	float *tiles = hdv + TD;
	/* bf16: q, k, v, dy's bf16 blocks in the room of the fp32 q, k (hv stages) */
	uint16_t *bq = (uint16_t *)scratch, *bk = bq + TD, *bv = bk + TD, *bdy = bv + TD;
	dnn_bf16_operand oq = {.f = hq, .ld = D}, ok = {.f = hk, .ld = D}, ov = {.f = hv, .ld = D},
			 ody = {.f = hdy, .ld = D};
	if (a->bf16)
		oq = (dnn_bf16_operand){.h = bq, .ld = D}, ok = (dnn_bf16_operand){.h = bk, .ld = D},
		ov = (dnn_bf16_operand){.h = bv, .ld = D}, ody = (dnn_bf16_operand){.h = bdy, .ld = D};
	for (int n = 0; n < a->N; n++)
		for (int h = 0; h < H; h++) {
			const size_t o = (size_t)n * T * 3 * C + (size_t)h * D, oy = (size_t)n * T * C + (size_t)h * D;
			pack(hdy, dy + oy, 0, T, D, C); /* fp32 for D_t */
			if (a->bf16) {
				pack_head_bf16(bq, hv, qkv, qkvh, o, T, D, 3 * C);
				pack_head_bf16(bk, hv, qkv, qkvh, o + C, T, D, 3 * C);
				pack_head_bf16(bv, hv, qkv, qkvh, o + 2 * C, T, D, 3 * C);
				dnn_bf16_convert(bdy, hdy, TD);
			} else {
				pack(hq, qkv + o, 0, T, D, 3 * C);
				pack(hk, qkv + o + C, 0, T, D, 3 * C);
				pack(hv, qkv + o + 2 * C, 0, T, D, 3 * C);
			}
			memset(hdk, 0, 2 * TD * sizeof(float));
			const float *lh = lse + ((size_t)n * H + h) * T;
			const float *yf = a->y_bf16 ? NULL : (const float *)y + oy;
			const uint16_t *yh = a->y_bf16 ? (const uint16_t *)y + oy : NULL;
			if (bwd_head(dqkv + o, 3 * C, hdk, hdv, oq, ok, ov, ody, hdy, yf, yh, C, lh, T, D, scale,
				     a->accumulate_dx, tiles, ro, a->bf16) != 0)
				return -1;
			unpack(dqkv + o + C, 3 * C, hdk, T, D, a->accumulate_dx);
			unpack(dqkv + o + 2 * C, 3 * C, hdv, T, D, a->accumulate_dx);
		}
	return 0;
}

// ------------------------------------------------------------------------------- codelets

static float *task_scratch(const dnn_attention_args *a, const char *what)
{
	float *s = dnn_cpu_scratch(dnn_attention_scratch_floats(a->T, a->C / a->H));
	if (!s)
		dnn_worker_error("attention %s: out of memory for %zu floats of scratch", what,
				 dnn_attention_scratch_floats(a->T, a->C / a->H));
	return s;
}

static void attention_fwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_attention_args *a = cl_arg;
	const size_t tok = (size_t)a->N * a->T;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == tok * 3 * a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == tok * a->C);
	STARPU_ASSERT(!a->save_lse || STARPU_VECTOR_GET_NX(buffers[2]) >= tok * a->H);
	float *scratch = task_scratch(a, "forward");
	if (!scratch)
		return;
	if (dnn_attention_forward_cpu((void *)STARPU_VECTOR_GET_PTR(buffers[1]),
				      a->save_lse ? (float *)STARPU_VECTOR_GET_PTR(buffers[2]) : NULL,
				      (const void *)STARPU_VECTOR_GET_PTR(buffers[0]), a, scratch) != 0)
		dnn_worker_error("attention forward (bf16): out of memory for the bf16 copies, or oneDNN failed");
}

static void attention_bwd_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_attention_args *a = cl_arg;
	const size_t tok = (size_t)a->N * a->T;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == tok * 3 * a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == tok * a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[2]) == tok * a->C);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[3]) >= tok * a->H);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[4]) == tok * 3 * a->C);
	float *scratch = task_scratch(a, "backward");
	if (!scratch)
		return;
	if (dnn_attention_backward_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[4]),
				       (const void *)STARPU_VECTOR_GET_PTR(buffers[0]),
				       (const void *)STARPU_VECTOR_GET_PTR(buffers[1]),
				       (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
				       (const float *)STARPU_VECTOR_GET_PTR(buffers[3]), a, scratch) != 0)
		dnn_worker_error("attention backward (bf16): out of memory for the bf16 copies, or oneDNN failed");
}

DNN_CODELET(cl_attention_fwd, 3, attention_fwd_cpu_task, dnn_attention_fwd_cuda);
DNN_CODELET(cl_attention_bwd, 5, attention_bwd_cpu_task, dnn_attention_bwd_cuda);

// ------------------------------------------------------------------------------- insert helpers

DNN_ARGS_NO_PADDING(dnn_attention_args, 9 * sizeof(int));

int dnn_insert_attention_fwd(const dnn_task_opts *o, const dnn_attention_args *a, starpu_data_handle_t qkv,
			     starpu_data_handle_t y, starpu_data_handle_t lse)
{
	if (a->save_lse)
		return DNN_TASK_INSERT_ARGS(o, &cl_attention_fwd, "attention_fwd", a, STARPU_R, qkv, STARPU_W, y, STARPU_W,
					    lse, STARPU_TASK_COLOR, DNN_COLOR_DENSE_FWD, STARPU_FLOPS,
					    dnn_attention_flops_fwd(a));
	return DNN_TASK_INSERT_ARGS(o, &cl_attention_fwd, "attention_fwd", a, STARPU_R, qkv, STARPU_W, y,
				    STARPU_TASK_COLOR, DNN_COLOR_DENSE_FWD, STARPU_FLOPS, dnn_attention_flops_fwd(a));
}

int dnn_insert_attention_bwd(const dnn_task_opts *o, const dnn_attention_args *a, starpu_data_handle_t qkv,
			     starpu_data_handle_t y, starpu_data_handle_t dy, starpu_data_handle_t lse,
			     starpu_data_handle_t dqkv)
{
	return DNN_TASK_INSERT_ARGS(o, &cl_attention_bwd, "attention_bwd", a, STARPU_R, qkv, STARPU_R, y, STARPU_R, dy,
				    STARPU_R, lse, a->accumulate_dx ? STARPU_RW : STARPU_W, dqkv, STARPU_TASK_COLOR,
				    DNN_COLOR_DENSE_BWD, STARPU_FLOPS, dnn_attention_flops_bwd(a));
}
