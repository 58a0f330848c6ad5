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
 * dq/dk/dv accumulators stay fp32. q, k, v and dy are rounded once per head, as they are packed.
 * On a bf16 CPU the tiles' products are dnn_gemm_bf16_pairs (vdpbf16ps, no oneDNN call per tile:
 * at gpt-nano's 64 x 64 x 32 tiles the call cost about as much as the product), each operand packed
 * once per head in the form that kernel reads (head_ops below); dk and dv are then summed transposed.
 * Elsewhere (dnn_gemm_bf16_set_simd(0), the tests' second path) the tiles call dnn_gemm_bf16_ex on
 * the head's bf16 blocks in place. The two differ only in the order of the fp32 sums.
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
	 * backward: the head's q, k, v, dy, dk, dv (6 T x D), P, dP (BQ x BK each), D_t (BQ), dq (BQ x D);
	 * bf16 on packed pairs (the backward's head_pairs, t, d: T, D rounded up to even): dy (T D), dk^T
	 * and dv^T (2 D (t + 16)), seven bf16 blocks of t x d (3.5 t d floats), kT and vT ((T + 16) d),
	 * so at most 7.5 t d + 48 d; the tiles and a tile's bf16 copy (2.5 BQ BK + BQ + BQ D), and room to
	 * align each of a dozen blocks on 16 floats */
	const size_t t = T > 0 ? (size_t)T + (T & 1) : 0, d = D > 0 ? (size_t)D + (D & 1) : 0;
	const size_t pairs = 15 * t * d / 2 + 48 * d + 5 * (size_t)BQ * BK / 2 + (size_t)BQ + (size_t)BQ * d + 256;
	const size_t plain = 6 * t * d + 2 * (size_t)BQ * BK + 2 * (size_t)BQ + (size_t)BQ * d;
	return pairs > plain ? pairs : plain;
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

/* One (sample, head)'s operands of the five tile products, packed once per head. Either the
 * operands of tile_gemm (q, k, v, dy: fp32 or bf16 rows, ld D), or, with bf16 on a bf16 CPU
 * (pairs: dnn_gemm_bf16_pairs, no oneDNN call per tile), each product's operands in the form its
 * vdpbf16ps loop reads (gemm_bf16.h): bf16 rows at ld D2 (D rounded up to even, a zero pad) for A,
 * pairs for B, so that every tile's K dimension is a run of pairs:
 *   S  = scale q_i k_j^T : A q16 rows,       B kT  (pairs over d: (D2/2, T), a transpose of k16's pairs)
 *   o += P v_j           : A P rounded,      B vp  (pairs over keys: (T2/2, D))
 *   dP = dy_i v_j^T      : A dy16 rows,      B vT  (pairs over d, as kT)
 *   dq += dS k_j         : A dS rounded,     B kp  (pairs over keys, as vp)
 *   dv^T += dy_i^T P     : A dyp (dy's pairs over queries (T2/2, D), read pair-major), B P's pairs over queries
 *   dk^T += q_i^T dS     : A qp (q's, likewise), B dS's pairs over queries
 * dv and dk are summed transposed (D, T2), so that no tile is transposed; the head's k and v are, once
 * (kT, vT). tb holds a tile's bf16 copy (rows or pairs, BQ x BK values). */
typedef struct {
	int bf16, pairs, T, T2, D2, ldk, ldt; /* ldk: kT's, vT's rows; ldt: dk^T's, dv^T's (T + 16, T2 + 16) */
	dnn_bf16_operand q, k, v, dy;
	const uint16_t *q16, *dy16;
	const uint32_t *kT, *vT, *kp, *vp, *qp, *dyp;
	uint16_t *tb;
} head_ops;

/* S (bq,bk) at ld BK = scale q_i k_j^T */
static int prod_qk(const head_ops *h, int i0, int j0, int bq, int bk, int D, float scale, float *S)
{
	if (h->pairs)
		return dnn_gemm_bf16_pairs(S, BK, h->q16 + (size_t)i0 * h->D2, h->D2 / 2, 1, h->kT + j0, h->ldk, bq, bk, D,
					   scale, 0);
	return tile_gemm(h->bf16, 0, 1, bq, bk, D, scale, rows(h->q, i0), rows(h->k, j0), 0.0f, S, BK);
}

/* A tile (bq,bk) at ld BK rounded into tb as bf16 rows at ld BK (an odd bk's pad column zero). */
static const uint16_t *tile_rows16(const head_ops *h, const float *P, int bq, int bk)
{
	dnn_bf16_convert_rows(h->tb, BK, P, BK, bq, bk);
	if (bk & 1)
		for (int r = 0; r < bq; r++)
			h->tb[(size_t)r * BK + bk] = 0;
	return h->tb;
}

/* o (bq,D) += P (bq,bk) v_j (bk,D); the same with dq += dS k_j (kv: 0 = v, 1 = k) */
static int prod_pv(const head_ops *h, const float *P, int j0, int bq, int bk, int D, int kv, float *o)
{
	if (h->pairs)
		return dnn_gemm_bf16_pairs(o, D, tile_rows16(h, P, bq, bk), BK / 2, 1,
					   (kv ? h->kp : h->vp) + (size_t)(j0 / 2) * D, D, bq, D, bk, 1.0f, 1);
	return tile_gemm(h->bf16, 0, 0, bq, D, bk, 1.0f, tile(P, BK), rows(kv ? h->k : h->v, j0), 1.0f, o, D);
}

/* dP (bq,bk) = dy_i v_j^T */
static int prod_dp(const head_ops *h, int i0, int j0, int bq, int bk, int D, float *dP)
{
	if (h->pairs)
		return dnn_gemm_bf16_pairs(dP, BK, h->dy16 + (size_t)i0 * h->D2, h->D2 / 2, 1, h->vT + j0, h->ldk, bq, bk, D,
					   1.0f, 0);
	return tile_gemm(h->bf16, 0, 1, bq, bk, D, 1.0f, rows(h->dy, i0), rows(h->v, j0), 0.0f, dP, BK);
}

/* dv_j += P^T dy_i (qd: 0), or dk_j += dS^T q_i (qd: 1): dv, dk packed (T,D), or with pairs
 * transposed (D,T2): dv^T += dy_i^T P */
static int prod_t(const head_ops *h, const float *P, int i0, int j0, int bq, int bk, int D, int qd, float *acc)
{
	if (h->pairs) {
		dnn_bf16_pairs_f32((uint32_t *)h->tb, BK, P, BK, bq, bk);
		/* A = q_i^T (or dy_i^T): the head's pairs over queries read pair-major (no transpose) */
		const uint32_t *at = (qd ? h->qp : h->dyp) + (size_t)(i0 / 2) * D;
		return dnn_gemm_bf16_pairs(acc + j0, h->ldt, (const uint16_t *)at, 1, D, (const uint32_t *)h->tb, BK, D, bk,
					   bq, 1.0f, 1);
	}
	return tile_gemm(h->bf16, 1, 0, bk, D, bq, 1.0f, tile(P, BK), rows(qd ? h->q : h->dy, i0), 1.0f,
			 acc + (size_t)j0 * D, D);
}

/* One (sample, head): y rows of stride ldy (fp32, or bf16 when yh: y is then unused); lse (T) or NULL. */
static int fwd_head(float *y, uint16_t *yh, float *lse, const head_ops *h, int T, int D, int ldy, float scale,
		    float *scratch, const row_ops *ro)
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
			rc |= prod_qk(h, i0, j0, bq, bk, D, scale, S);
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
			rc |= prod_pv(h, S, j0, bq, bk, D, 0, os);
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

/* Scratch carved into blocks of n floats, each starting on 64 bytes (dnn_attention_scratch_floats
 * counts the room). */
static float *carve(float **at, size_t n)
{
	float *p = *at;
	*at += (n + 15) & ~(size_t)15;
	return p;
}

/* A head's T rows of D values (q, k, v or dy) as bf16 rows at ld D2 (an odd D's pad column zero):
 * rounded from fp32 rows x of stride ld (packed into stage (T,D) first: one rounding call), or copied
 * from the bf16 rows xh. */
static void rows16(uint16_t *dst, int D2, const float *x, const uint16_t *xh, int T, int D, int ld, float *stage)
{
	if (xh) {
		for (int r = 0; r < T; r++)
			memcpy(dst + (size_t)r * D2, xh + (size_t)r * ld, (size_t)D * sizeof(uint16_t));
	} else {
		pack(stage, x, 0, T, D, ld);
		dnn_bf16_convert_rows(dst, D2, stage, D, T, D);
	}
	if (D2 > D)
		for (int r = 0; r < T; r++)
			dst[(size_t)r * D2 + D] = 0;
}

#define TP 16 /* the transposes' block of rows */

#if defined(__x86_64__) && defined(__GNUC__)
/* The pairs path's transposes, 16 lanes a gather (it runs only on a bf16 CPU, so with AVX-512F): one
 * scalar load and store per element, at a stride of a row, were half of attention backward's own time. */
#define ATT_AVX512 __attribute__((target("avx512f")))
static inline __mmask16 lanes(int n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }

ATT_AVX512 static void tpose_pairs_avx512(uint32_t *dst, int ldd, const uint16_t *x16, int T, int D2)
{
	const __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
					       _mm512_set1_epi32(D2 / 2)); /* 16 rows' pair p */
	for (int t = 0; t < T; t += 16) {
		const __mmask16 m = lanes(T - t);
		for (int p = 0; p < D2 / 2; p++)
			_mm512_mask_storeu_epi32(dst + (size_t)p * ldd + t, m,
						 _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx,
									     x16 + (size_t)t * D2 + 2 * p, 4));
	}
}

/* unpack_t's rows: dst[t][i] (=|+=) src[i][t], 16 values of i a gather */
ATT_AVX512 static void unpack_t_avx512(float *dst, int ld, const float *src, int T, int T2, int D, int accumulate)
{
	const __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
					       _mm512_set1_epi32(T2));
	for (int t = 0; t < T; t++) {
		float *d = dst + (size_t)t * ld;
		for (int i = 0; i < D; i += 16) {
			const __mmask16 m = lanes(D - i);
			__m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, src + (size_t)i * T2 + t, 4);
			if (accumulate)
				v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, d + i), v);
			_mm512_mask_storeu_ps(d + i, m, v);
		}
	}
}
#endif

/* kT (D2/2, T) at ldd: pair p of row t of x16 (T rows at ld D2) at [p][t] (S's and dP's B operand) */
static void tpose_pairs(uint32_t *dst, int ldd, const uint16_t *x16, int T, int D2)
{
#if defined(__x86_64__) && defined(__GNUC__)
	tpose_pairs_avx512(dst, ldd, x16, T, D2);
#else
	for (int t0 = 0; t0 < T; t0 += TP) /* blocks of TP rows: a column's reads stay in cache */
		for (int p = 0; p < D2 / 2; p++)
			for (int t = t0; t < T && t < t0 + TP; t++)
				memcpy(dst + (size_t)p * ldd + t, x16 + (size_t)t * D2 + 2 * p, sizeof(uint32_t));
#endif
}

/* The head's pair operands in the scratch at *at: q16, kT and (forward) vp, (backward) dy16, qp, dyp,
 * vT, kp; x, xh: the sample's qkv (fp32 or bf16) at the head's offset; dyf: the packed fp32 dy (T,D)
 * (backward) or NULL; stage: T x D floats. */
static void head_pairs(head_ops *h, float **at, const float *x, const uint16_t *xh, int C, const float *dyf, int D,
		       float *stage)
{
	const int T = h->T, T2 = h->T2, D2 = h->D2;
	const size_t blk = (size_t)T2 * D2 / 2, blkt = (size_t)h->ldk * D2 / 2; /* floats of a T2 x D2 bf16 block */
	uint16_t *q16 = (uint16_t *)carve(at, blk), *k16 = (uint16_t *)carve(at, blk), *v16 = (uint16_t *)carve(at, blk);
	uint32_t *kT = (uint32_t *)carve(at, blkt);
	rows16(q16, D2, x, xh, T, D, 3 * C, stage);
	rows16(k16, D2, x ? x + C : NULL, xh ? xh + C : NULL, T, D, 3 * C, stage);
	rows16(v16, D2, x ? x + 2 * C : NULL, xh ? xh + 2 * C : NULL, T, D, 3 * C, stage);
	tpose_pairs(kT, h->ldk, k16, T, D2);
	h->q16 = q16, h->kT = kT;
	if (!dyf) { /* forward: o += P v */
		uint32_t *vp = (uint32_t *)carve(at, blk);
		dnn_bf16_pairs_bf16(vp, D, v16, D2, T, D);
		h->vp = vp;
		return;
	}
	uint16_t *dy16 = (uint16_t *)carve(at, blk);
	uint32_t *qp = (uint32_t *)carve(at, blk), *dyp = (uint32_t *)carve(at, blk), *vT = (uint32_t *)carve(at, blkt),
		 *kp = (uint32_t *)carve(at, blk);
	dnn_bf16_convert_rows(dy16, D2, dyf, D, T, D);
	if (D2 > D)
		for (int r = 0; r < T; r++)
			dy16[(size_t)r * D2 + D] = 0;
	dnn_bf16_pairs_bf16(qp, D, q16, D2, T, D);
	dnn_bf16_pairs_bf16(dyp, D, dy16, D2, T, D);
	tpose_pairs(vT, h->ldk, v16, T, D2);
	dnn_bf16_pairs_bf16(kp, D, k16, D2, T, D);
	h->dy16 = dy16, h->qp = qp, h->dyp = dyp, h->vT = vT, h->kp = kp;
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
	head_ops h = {.bf16 = a->bf16, .pairs = a->bf16 && dnn_gemm_bf16_pairs_ok(), .T = T, .T2 = T + (T & 1),
		      .D2 = D + (D & 1), .ldk = T + 16, .ldt = T + (T & 1) + 16};
	float *hq = scratch, *hk = hq + TD, *hv = hk + TD, *tiles = hv + TD;
	uint16_t *bq = (uint16_t *)scratch, *bk = bq + TD, *bv = bk + TD; /* bf16: in hq, hk's room; hv stages */
	h.q = (dnn_bf16_operand){.f = hq, .ld = D}, h.k = (dnn_bf16_operand){.f = hk, .ld = D},
	h.v = (dnn_bf16_operand){.f = hv, .ld = D};
	if (a->bf16)
		h.q = (dnn_bf16_operand){.h = bq, .ld = D}, h.k = (dnn_bf16_operand){.h = bk, .ld = D},
		h.v = (dnn_bf16_operand){.h = bv, .ld = D};
	for (int n = 0; n < a->N; n++)
		for (int hd = 0; hd < H; hd++) {
			const size_t ox = (size_t)n * T * 3 * C + (size_t)hd * D;
			if (h.pairs) {
				float *at = scratch + TD; /* the stage first (T x D), then the blocks, then the tiles */
				head_pairs(&h, &at, qkv ? qkv + ox : NULL, qkvh ? qkvh + ox : NULL, C, NULL, D, scratch);
				h.tb = (uint16_t *)carve(&at, (size_t)BQ * BK / 2);
				tiles = at;
			} else if (a->bf16) {
				pack_head_bf16(bq, hv, qkv, qkvh, ox, T, D, 3 * C);
				pack_head_bf16(bk, hv, qkv, qkvh, ox + C, T, D, 3 * C);
				pack_head_bf16(bv, hv, qkv, qkvh, ox + 2 * C, T, D, 3 * C);
			} else {
				const float *q = qkv + ox;
				pack(hq, q, 0, T, D, 3 * C);
				pack(hk, q + C, 0, T, D, 3 * C);
				pack(hv, q + 2 * C, 0, T, D, 3 * C);
			}
			float *lh = lse ? lse + ((size_t)n * H + hd) * T : NULL;
			const size_t oy = (size_t)n * T * C + (size_t)hd * D;
			float *yf = a->y_bf16 ? NULL : (float *)y + oy;
			uint16_t *yh = a->y_bf16 ? (uint16_t *)y + oy : NULL;
			if (fwd_head(yf, yh, lh, &h, T, D, C, scale, tiles, ro) != 0)
				return -1;
		}
	return 0;
}

/* Dt[r] = dy[r].y[r], r < n: dy packed (n,D), y rows of stride ldy (fp32 y, or bf16 yh, the other
 * NULL), each row's sum in order of d; DT rows at a time, so that their sums' chains run side by side
 * (one row at a time, each add waited for the last: a fifth of attention's backward at D = 32). */
#define DT 8
static void dot_rows(float *restrict Dt, const float *restrict dy, const float *restrict y,
		     const uint16_t *restrict yh, int ldy, int n, int D)
{
	int r0 = 0;
	for (; r0 + DT <= n; r0 += DT) {
		float s[DT] = {0};
		const float *a = dy + (size_t)r0 * D;
		if (yh) {
			const uint16_t *b = yh + (size_t)r0 * ldy;
			for (int d = 0; d < D; d++)
				for (int k = 0; k < DT; k++)
					s[k] += a[(size_t)k * D + d] * dnn_bf16_to_f32(b[(size_t)k * ldy + d]);
		} else {
			const float *b = y + (size_t)r0 * ldy;
			for (int d = 0; d < D; d++)
				for (int k = 0; k < DT; k++)
					s[k] += a[(size_t)k * D + d] * b[(size_t)k * ldy + d];
		}
		memcpy(Dt + r0, s, sizeof(s));
	}
	for (; r0 < n; r0++) {
		float s = 0.0f;
		for (int d = 0; d < D; d++) {
			const size_t o = (size_t)r0 * ldy + d;
			s += dy[(size_t)r0 * D + d] * (yh ? dnn_bf16_to_f32(yh[o]) : y[o]);
		}
		Dt[r0] = s;
	}
}

/* One (sample, head): dq rows of stride ld (=|+= per accumulate), dk, dv +=: packed (T,D), or with
 * pairs transposed (D,T2); dyf the fp32 dy (T,D) for D_t, y rows of stride ldy (fp32 y, or bf16 yh,
 * the other NULL), lse (T). */
static int bwd_head(float *dq, int ld, float *dk, float *dv, const head_ops *h, const float *dyf, const float *y,
		    const uint16_t *yh, int ldy, const float *lse, int T, int D, float scale, int accumulate,
		    float *scratch, const row_ops *ro)
{
	int rc = 0;
	float *P = scratch, *dP = P + (size_t)BQ * BK, *Dt = dP + (size_t)BQ * BK, *dqs = Dt + BQ;
	for (int i0 = 0; i0 < T; i0 += BQ) {
		const int bq = T - i0 < BQ ? T - i0 : BQ;
		dot_rows(Dt, dyf + (size_t)i0 * D, y ? y + (size_t)i0 * ldy : NULL, yh ? yh + (size_t)i0 * ldy : NULL,
			 ldy, bq, D);
		memset(dqs, 0, (size_t)bq * D * sizeof(float));
		for (int j0 = 0; j0 < i0 + bq; j0 += BK) {
			const int bk = i0 + bq - j0 < BK ? i0 + bq - j0 : BK;
			rc |= prod_qk(h, i0, j0, bq, bk, D, scale, P);
			for (int r = 0; r < bq; r++) {
				float *p = P + (size_t)r * BK;
				const int lim = i0 + r - j0 + 1, n = lim < 0 ? 0 : lim < bk ? lim : bk;
				if (n > 0)
					ro->exp_sum(p, n, lse[i0 + r]);
				if (n < bk)
					memset(p + n, 0, (size_t)(bk - n) * sizeof(float));
			}
			rc |= prod_t(h, P, i0, j0, bq, bk, D, 0, dv); // dv (bk,D) += P^T (bk,bq) dy (bq,D)
			rc |= prod_dp(h, i0, j0, bq, bk, D, dP);      // dP (bq,bk) = dy (bq,D) v^T (D,bk)
			for (int r = 0; r < bq; r++)
				ro->dsoft(dP + (size_t)r * BK, P + (size_t)r * BK, Dt[r], scale, bk);
			// dq (bq,D) += dS (bq,bk) k (bk,D); dk (bk,D) += dS^T (bk,bq) q (bq,D)
			rc |= prod_pv(h, dP, j0, bq, bk, D, 1, dqs);
			rc |= prod_t(h, dP, i0, j0, bq, bk, D, 1, dk);
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

/* The same from the transposed src (D, T2) of the pairs path. */
static void unpack_t(float *restrict dst, int ld, const float *restrict src, int T, int T2, int D, int accumulate)
{
#if defined(__x86_64__) && defined(__GNUC__)
	unpack_t_avx512(dst, ld, src, T, T2, D, accumulate);
#else
	for (int t0 = 0; t0 < T; t0 += TP) /* blocks of TP columns of src: a row's TP reads in one line */
		for (int i = 0; i < D; i++)
			for (int t = t0; t < T && t < t0 + TP; t++) {
				float *d = dst + (size_t)t * ld + i;
				*d = accumulate ? *d + src[(size_t)i * T2 + t] : src[(size_t)i * T2 + t];
			}
#endif
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
	head_ops h = {.bf16 = a->bf16, .pairs = a->bf16 && dnn_gemm_bf16_pairs_ok(), .T = T, .T2 = T + (T & 1),
		      .D2 = D + (D & 1), .ldk = T + 16, .ldt = T + (T & 1) + 16};
	float *hq = scratch, *hk = hq + TD, *hv = hk + TD, *hdy = hv + TD, *hdk = hdy + TD, *hdv = hdk + TD;
	float *tiles = hdv + TD;
	/* bf16: q, k, v, dy's bf16 blocks in the room of the fp32 q, k (hv stages) */
	uint16_t *bq = (uint16_t *)scratch, *bk = bq + TD, *bv = bk + TD, *bdy = bv + TD;
	h.q = (dnn_bf16_operand){.f = hq, .ld = D}, h.k = (dnn_bf16_operand){.f = hk, .ld = D},
	h.v = (dnn_bf16_operand){.f = hv, .ld = D}, h.dy = (dnn_bf16_operand){.f = hdy, .ld = D};
	if (a->bf16)
		h.q = (dnn_bf16_operand){.h = bq, .ld = D}, h.k = (dnn_bf16_operand){.h = bk, .ld = D},
		h.v = (dnn_bf16_operand){.h = bv, .ld = D}, h.dy = (dnn_bf16_operand){.h = bdy, .ld = D};
	size_t dkv = 2 * TD; /* the dk, dv accumulators' floats */
	if (h.pairs) {       /* the fp32 dy (T,D), dk^T and dv^T (D,T2; dk^T stages q, k, v first), blocks, tiles */
		hdy = scratch, hdk = hdy + TD, hdv = hdk + (size_t)D * h.ldt, dkv = 2 * (size_t)D * h.ldt;
	}
	for (int n = 0; n < a->N; n++)
		for (int hd = 0; hd < H; hd++) {
			const size_t o = (size_t)n * T * 3 * C + (size_t)hd * D, oy = (size_t)n * T * C + (size_t)hd * D;
			pack(hdy, dy + oy, 0, T, D, C); /* fp32 for D_t */
			if (h.pairs) {
				float *at = hdv + (size_t)D * h.ldt;
				head_pairs(&h, &at, qkv ? qkv + o : NULL, qkvh ? qkvh + o : NULL, C, hdy, D, hdk);
				h.tb = (uint16_t *)carve(&at, (size_t)BQ * BK / 2);
				tiles = at;
			} else if (a->bf16) {
				pack_head_bf16(bq, hv, qkv, qkvh, o, T, D, 3 * C);
				pack_head_bf16(bk, hv, qkv, qkvh, o + C, T, D, 3 * C);
				pack_head_bf16(bv, hv, qkv, qkvh, o + 2 * C, T, D, 3 * C);
				dnn_bf16_convert(bdy, hdy, TD);
			} else {
				pack(hq, qkv + o, 0, T, D, 3 * C);
				pack(hk, qkv + o + C, 0, T, D, 3 * C);
				pack(hv, qkv + o + 2 * C, 0, T, D, 3 * C);
			}
			memset(hdk, 0, dkv * sizeof(float));
			const float *lh = lse + ((size_t)n * H + hd) * T;
			const float *yf = a->y_bf16 ? NULL : (const float *)y + oy;
			const uint16_t *yh = a->y_bf16 ? (const uint16_t *)y + oy : NULL;
			if (bwd_head(dqkv + o, 3 * C, hdk, hdv, &h, hdy, yf, yh, C, lh, T, D, scale, a->accumulate_dx,
				     tiles, ro) != 0)
				return -1;
			if (h.pairs) {
				unpack_t(dqkv + o + C, 3 * C, hdk, T, h.ldt, D, a->accumulate_dx);
				unpack_t(dqkv + o + 2 * C, 3 * C, hdv, T, h.ldt, D, a->accumulate_dx);
			} else {
				unpack(dqkv + o + C, 3 * C, hdk, T, D, a->accumulate_dx);
				unpack(dqkv + o + 2 * C, 3 * C, hdv, T, D, a->accumulate_dx);
			}
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
