/* gemm_bf16.c — the bf16 GEMM (gemm_bf16.h): operands rounded into bf16 copies, then oneDNN's matmul;
 * the portable path (rounding + cblas_sgemm) without oneDNN; and dnn_gemm_bf16_pairs, our vdpbf16ps
 * kernel for small GEMMs on operands packed once (attention's tiles).
 *
 * Per thread (one StarPU CPU worker): the bf16 copies of A and B, grown as needed and kept, and a
 * small cache of matmul primitives keyed by the call's shape, strides, alpha and beta (a primitive
 * per call would cost more than a small GEMM; gpt-nano's step uses 15, created once: ONEDNN_VERBOSE=2).
 * alpha is the primitive's output scale, beta its sum post-op. Attention's 64 x 64 tiles, about 5,400
 * calls per gpt-nano step, called it until dnn_gemm_bf16_pairs: the call itself (arguments, execute,
 * stream wait) cost about as much as such a tile's product.
 */
#include "gemm_bf16.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef DNN_HAVE_DNNL
#include "onednn_thread.h"
static int use_simd = 1;
#else
static int use_simd = 0;
#endif

int dnn_gemm_bf16_set_simd(int on)
{
#ifdef DNN_HAVE_DNNL
	use_simd = on != 0;
#else
	(void)on;
#endif
	return use_simd;
}

int dnn_gemm_bf16_simd(void) { return use_simd; }

static int bf16_masked; /* dnn_cpu_mask_bf16: set once before the workers start */
void dnn_cpu_mask_bf16(int mask) { bf16_masked = mask != 0; }

static __thread void *buf_a, *buf_b;
static __thread size_t cap_a, cap_b;
static __thread void *buf_c; /* the portable path's fp32 C of dnn_gemm_bf16_out */
static __thread size_t cap_c;

static void *grow(void **buf, size_t *cap, size_t bytes)
{
	if (bytes > *cap) {
		void *p = NULL;
		if (posix_memalign(&p, 64, bytes) != 0)
			return NULL;
		free(*buf);
		*buf = p;
		*cap = bytes;
	}
	return *buf;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

int dnn_cpu_has_bf16(void)
{
	static volatile int have = -1; /* -1: not asked yet; a race only asks twice */
	if (have < 0) {
		__builtin_cpu_init();
		have = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
	}
	return have && !bf16_masked;
}

#ifdef DNN_HAVE_DNNL
/* n floats -> bf16, round to nearest even: vcvtneps2bf16, dnn_f32_to_bf16's rounding except that
 * it flushes denormal inputs (below 2^-126) to zero, as the bf16 hardware does. */
BF16_TARGET static void to_bf16_simd(uint16_t *restrict dst, const float *restrict src, int n)
{
	int i = 0;
	for (; i + 16 <= n; i += 16)
		_mm256_storeu_si256((__m256i *)(dst + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i)));
	if (i < n) {
		const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
		_mm256_mask_storeu_epi16(dst + i, m, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i)));
	}
}

/* dst = bf16(src + b): the bias added in fp32, then vcvtneps2bf16 (to_bf16_simd's rounding). */
BF16_TARGET static void to_bf16_bias_simd(uint16_t *restrict dst, const float *restrict src, int n, float b)
{
	const __m512 bv = _mm512_set1_ps(b);
	int i = 0;
	for (; i + 16 <= n; i += 16)
		_mm256_storeu_si256((__m256i *)(dst + i),
				    (__m256i)_mm512_cvtneps_pbh(_mm512_add_ps(_mm512_loadu_ps(src + i), bv)));
	if (i < n) {
		const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
		_mm256_mask_storeu_epi16(dst + i, m,
					 (__m256i)_mm512_cvtneps_pbh(_mm512_add_ps(_mm512_maskz_loadu_ps(m, src + i), bv)));
	}
}

/* One row of an operand with column sums: dst = bf16(src), colsum += src (fp32, element by element). */
BF16_TARGET static void to_bf16_colsum_simd(uint16_t *restrict dst, float *restrict colsum, const float *restrict src,
					    int n)
{
	int i = 0;
	for (; i + 16 <= n; i += 16) {
		const __m512 v = _mm512_loadu_ps(src + i);
		_mm256_storeu_si256((__m256i *)(dst + i), (__m256i)_mm512_cvtneps_pbh(v));
		_mm512_storeu_ps(colsum + i, _mm512_add_ps(_mm512_loadu_ps(colsum + i), v));
	}
	if (i < n) {
		const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
		const __m512 v = _mm512_maskz_loadu_ps(m, src + i);
		_mm256_mask_storeu_epi16(dst + i, m, (__m256i)_mm512_cvtneps_pbh(v));
		_mm512_mask_storeu_ps(colsum + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, colsum + i), v));
	}
}
#endif
#else
int dnn_cpu_has_bf16(void) { return 0; }
#endif

#ifdef DNN_HAVE_DNNL
static void to_bf16(uint16_t *restrict dst, const float *restrict src, int n)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (dnn_cpu_has_bf16()) {
		to_bf16_simd(dst, src, n);
		return;
	}
#endif
	for (int i = 0; i < n; i++)
		dst[i] = dnn_f32_to_bf16(src[i]);
}

/* rows x cols floats at stride ld -> a packed rows x cols bf16 copy; colsum (or NULL) += each row. */
static void copy_bf16(uint16_t *dst, const float *src, int rows, int cols, int ld, float *colsum)
{
	if (colsum) {
		for (int r = 0; r < rows; r++) {
			const float *s = src + (size_t)r * ld;
			uint16_t *d = dst + (size_t)r * cols;
#if defined(__x86_64__) && defined(__GNUC__)
			if (dnn_cpu_has_bf16()) {
				to_bf16_colsum_simd(d, colsum, s, cols);
				continue;
			}
#endif
			for (int c = 0; c < cols; c++) {
				d[c] = dnn_f32_to_bf16(s[c]);
				colsum[c] += s[c];
			}
		}
		return;
	}
	if (ld == cols) {
		const size_t n = (size_t)rows * cols;
		for (size_t i = 0; i < n; i += 1 << 30) /* to_bf16 counts in int */
			to_bf16(dst + i, src + i, (int)(n - i < (1u << 30) ? n - i : 1u << 30));
		return;
	}
	for (int r = 0; r < rows; r++)
		to_bf16(dst + (size_t)r * cols, src + (size_t)r * ld, cols);
}

typedef struct {
	int M, N, K, tA, tB, lda, ldb, ldc, bias, cbf16;
	float alpha, beta;
	dnnl_primitive_t prim;
	dnnl_memory_t a, b, c, bi;
} mm_entry;

#define MM_CACHE 48 /* a GPT's distinct shapes per worker: about 6 dense x 3 phases + attention's 6 tiles */
static __thread mm_entry mm_cache[MM_CACHE];
static __thread int mm_n, mm_next;
static __thread dnn_onednn_thread mm_t; /* this thread's engine and stream */
static char mm_impl[96]; /* the kernel oneDNN chose, for the start-up line */

static void mm_free(mm_entry *e)
{
	dnnl_memory_destroy(e->a), dnnl_memory_destroy(e->b), dnnl_memory_destroy(e->c), dnnl_memory_destroy(e->bi);
	dnnl_primitive_destroy(e->prim);
	memset(e, 0, sizeof(*e));
}

/* The primitive for this call, created on a miss (round-robin eviction); NULL on failure. lda, ldb:
 * the operands' strides as the primitive reads them (a bf16 copy's packed width, or an in-place
 * bf16 operand's ld); bias: 1 when the call adds a bias row (N floats). */
static mm_entry *mm_get(int tA, int tB, int M, int N, int K, float alpha, float beta, int lda, int ldb, int ldc,
			int bias, int cbf16)
{
	for (int i = 0; i < mm_n; i++) {
		mm_entry *e = &mm_cache[i];
		if (e->M == M && e->N == N && e->K == K && e->tA == tA && e->tB == tB && e->lda == lda &&
		    e->ldb == ldb && e->ldc == ldc && e->bias == bias && e->cbf16 == cbf16 && e->alpha == alpha &&
		    e->beta == beta)
			return e;
	}
	if (!dnn_onednn_thread_open(&mm_t))
		return NULL;
	/* op(A) (M,K) is A's rows (M,K) at stride lda, or its (K,M) rows read transposed; op(B) likewise. */
	dnnl_dims_t ad = {M, K}, bd = {K, N}, cd = {M, N}, bid = {1, N};
	dnnl_dims_t as = {tA ? 1 : lda, tA ? lda : 1}, bs = {tB ? 1 : ldb, tB ? ldb : 1}, cs = {ldc, 1}, bis = {N, 1};
	dnnl_memory_desc_t amd, bmd, cmd, bimd;
	dnnl_matmul_desc_t md;
	dnnl_primitive_attr_t attr = NULL;
	dnnl_post_ops_t po = NULL;
	dnnl_primitive_desc_t pd = NULL;
	mm_entry n = {M, N, K, tA, tB, lda, ldb, ldc, bias, cbf16, alpha, beta, NULL, NULL, NULL, NULL, NULL};
	int ok = dnnl_memory_desc_init_by_strides(&amd, 2, ad, dnnl_bf16, as) == dnnl_success &&
		 dnnl_memory_desc_init_by_strides(&bmd, 2, bd, dnnl_bf16, bs) == dnnl_success &&
		 dnnl_memory_desc_init_by_strides(&cmd, 2, cd, cbf16 ? dnnl_bf16 : dnnl_f32, cs) == dnnl_success &&
		 dnnl_memory_desc_init_by_strides(&bimd, 2, bid, dnnl_f32, bis) == dnnl_success &&
		 dnnl_matmul_desc_init(&md, &amd, &bmd, bias ? &bimd : NULL, &cmd) == dnnl_success &&
		 dnnl_primitive_attr_create(&attr) == dnnl_success && dnnl_post_ops_create(&po) == dnnl_success;
	if (ok && alpha != 1.0f)
		ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha) == dnnl_success;
	if (ok && beta != 0.0f)
		ok = dnnl_post_ops_append_sum(po, beta) == dnnl_success &&
		     dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
	ok = ok && dnnl_primitive_desc_create(&pd, &md, attr, mm_t.eng, NULL) == dnnl_success &&
	     dnnl_primitive_create(&n.prim, pd) == dnnl_success &&
	     dnnl_memory_create(&n.a, &amd, mm_t.eng, DNNL_MEMORY_NONE) == dnnl_success &&
	     dnnl_memory_create(&n.b, &bmd, mm_t.eng, DNNL_MEMORY_NONE) == dnnl_success &&
	     dnnl_memory_create(&n.c, &cmd, mm_t.eng, DNNL_MEMORY_NONE) == dnnl_success &&
	     (!bias || dnnl_memory_create(&n.bi, &bimd, mm_t.eng, DNNL_MEMORY_NONE) == dnnl_success);
	if (ok && !mm_impl[0]) {
		const char *impl = NULL;
		if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
			snprintf(mm_impl, sizeof(mm_impl), "onednn-%d.%d.%d:%s", dnnl_version()->major,
				 dnnl_version()->minor, dnnl_version()->patch, impl);
	}
	if (pd)
		dnnl_primitive_desc_destroy(pd);
	if (po)
		dnnl_post_ops_destroy(po);
	if (attr)
		dnnl_primitive_attr_destroy(attr);
	if (!ok) {
		mm_free(&n);
		return NULL;
	}
	int evict;
	mm_entry *e = &mm_cache[dnn_onednn_cache_slot(&mm_n, &mm_next, MM_CACHE, &evict)];
	if (evict)
		mm_free(e);
	*e = n;
	return e;
}

/* An fp32 operand is rounded into the thread's packed copy (ld = its packed width), a bf16 one read
 * in place at its own ld. C: float, or uint16_t bf16 values when cbf16 (beta 0). */
static int gemm_dnnl(int transA, int transB, int M, int N, int K, float alpha, dnn_bf16_operand A, dnn_bf16_operand B,
		     float beta, const float *bias, void *C, int ldc, int cbf16)
{
	const int pa = transA ? M : K, pb = transB ? K : N; /* packed widths */
	uint16_t *a = A.f ? grow(&buf_a, &cap_a, (size_t)M * K * 2) : (uint16_t *)A.h;
	uint16_t *b = B.f ? grow(&buf_b, &cap_b, (size_t)K * N * 2) : (uint16_t *)B.h;
	mm_entry *e = a && b ? mm_get(transA, transB, M, N, K, alpha, beta, A.f ? pa : A.ld, B.f ? pb : B.ld, ldc,
				      bias != NULL, cbf16)
			     : NULL;
	if (!e)
		return -1;
	if (A.f)
		copy_bf16(a, A.f, transA ? K : M, pa, A.ld, A.colsum);
	if (B.f)
		copy_bf16(b, B.f, transB ? N : K, pb, B.ld, B.colsum);
	dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, e->a}, {DNNL_ARG_WEIGHTS, e->b}, {DNNL_ARG_DST, e->c},
				   {DNNL_ARG_BIAS, e->bi}};
	if (dnnl_memory_set_data_handle(e->a, a) != dnnl_success ||
	    dnnl_memory_set_data_handle(e->b, b) != dnnl_success ||
	    dnnl_memory_set_data_handle(e->c, C) != dnnl_success ||
	    (bias && dnnl_memory_set_data_handle(e->bi, (void *)bias) != dnnl_success) ||
	    dnnl_primitive_execute(e->prim, mm_t.stream, bias ? 4 : 3, args) != dnnl_success ||
	    dnnl_stream_wait(mm_t.stream) != dnnl_success)
		return -1;
	return 0;
}
#endif

// ------------------------------------------------------------------------------- small GEMMs on packed pairs

int dnn_gemm_bf16_pairs_ok(void) { return use_simd && dnn_cpu_has_bf16(); }

#if defined(__x86_64__) && defined(__GNUC__)
/* Blocks of 4 rows x 4 vectors of 16 columns and 8 rows x 2 vectors: 16 accumulators, each a named
 * variable (GCC keeps an array of 16 zmm accumulators in memory, storing each at every step: the
 * kernel then ran at half of oneDNN's rate). K2 pairs in order. Rows past m read row 0 and are never
 * stored; vectors past the block's width load nothing (mask 0). */
static inline uint32_t pair_at(const uint16_t *a, size_t i)
{
	uint32_t w;
	memcpy(&w, a + 2 * i, sizeof(w)); /* the bf16 values' bytes, whatever type wrote them */
	return w;
}
#define PAIRS_A(r) const __m512bh a##r = (__m512bh)_mm512_set1_epi32((int)pair_at(ar[r], (size_t)p * aps))
#define PAIRS_DP(r, v) c##r##v = _mm512_dpbf16_ps(c##r##v, a##r, b##v)
#define PAIRS_ST(r, v)                                                                                                 \
	do {                                                                                                           \
		if ((r) < m) {                                                                                         \
			float *cr = C + (size_t)(r) * ldc + 16 * (v);                                                  \
			__m512 x = _mm512_mul_ps(c##r##v, va);                                                         \
			if (acc)                                                                                       \
				x = _mm512_add_ps(_mm512_maskz_loadu_ps(mk[v], cr), x);                                \
			_mm512_mask_storeu_ps(cr, mk[v], x);                                                           \
		}                                                                                                      \
	} while (0)

BF16_TARGET static void pairs_4x4(float *C, int ldc, const uint16_t *A, int ars, int aps, const uint32_t *Bp,
				  int ldb, int m, const __mmask16 *mk, int K2, float alpha, int acc)
{
	__m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00, c13 = c00,
	       c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00, c32 = c00, c33 = c00;
	const uint16_t *ar[4];
	for (int r = 0; r < 4; r++)
		ar[r] = A + 2 * (size_t)(r < m ? r : 0) * ars;
	for (int p = 0; p < K2; p++) {
		const uint32_t *b = Bp + (size_t)p * ldb;
		const __m512bh b0 = (__m512bh)_mm512_maskz_loadu_epi32(mk[0], b),
			       b1 = (__m512bh)_mm512_maskz_loadu_epi32(mk[1], b + 16),
			       b2 = (__m512bh)_mm512_maskz_loadu_epi32(mk[2], b + 32),
			       b3 = (__m512bh)_mm512_maskz_loadu_epi32(mk[3], b + 48);
		PAIRS_A(0);
		PAIRS_DP(0, 0), PAIRS_DP(0, 1), PAIRS_DP(0, 2), PAIRS_DP(0, 3);
		PAIRS_A(1);
		PAIRS_DP(1, 0), PAIRS_DP(1, 1), PAIRS_DP(1, 2), PAIRS_DP(1, 3);
		PAIRS_A(2);
		PAIRS_DP(2, 0), PAIRS_DP(2, 1), PAIRS_DP(2, 2), PAIRS_DP(2, 3);
		PAIRS_A(3);
		PAIRS_DP(3, 0), PAIRS_DP(3, 1), PAIRS_DP(3, 2), PAIRS_DP(3, 3);
	}
	const __m512 va = _mm512_set1_ps(alpha);
	PAIRS_ST(0, 0); PAIRS_ST(0, 1); PAIRS_ST(0, 2); PAIRS_ST(0, 3);
	PAIRS_ST(1, 0); PAIRS_ST(1, 1); PAIRS_ST(1, 2); PAIRS_ST(1, 3);
	PAIRS_ST(2, 0); PAIRS_ST(2, 1); PAIRS_ST(2, 2); PAIRS_ST(2, 3);
	PAIRS_ST(3, 0); PAIRS_ST(3, 1); PAIRS_ST(3, 2); PAIRS_ST(3, 3);
}

BF16_TARGET static void pairs_8x2(float *C, int ldc, const uint16_t *A, int ars, int aps, const uint32_t *Bp,
				  int ldb, int m, const __mmask16 *mk, int K2, float alpha, int acc)
{
	__m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
	       c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00;
	const uint16_t *ar[8];
	for (int r = 0; r < 8; r++)
		ar[r] = A + 2 * (size_t)(r < m ? r : 0) * ars;
	for (int p = 0; p < K2; p++) {
		const uint32_t *b = Bp + (size_t)p * ldb;
		const __m512bh b0 = (__m512bh)_mm512_maskz_loadu_epi32(mk[0], b),
			       b1 = (__m512bh)_mm512_maskz_loadu_epi32(mk[1], b + 16);
		PAIRS_A(0);
		PAIRS_DP(0, 0), PAIRS_DP(0, 1);
		PAIRS_A(1);
		PAIRS_DP(1, 0), PAIRS_DP(1, 1);
		PAIRS_A(2);
		PAIRS_DP(2, 0), PAIRS_DP(2, 1);
		PAIRS_A(3);
		PAIRS_DP(3, 0), PAIRS_DP(3, 1);
		PAIRS_A(4);
		PAIRS_DP(4, 0), PAIRS_DP(4, 1);
		PAIRS_A(5);
		PAIRS_DP(5, 0), PAIRS_DP(5, 1);
		PAIRS_A(6);
		PAIRS_DP(6, 0), PAIRS_DP(6, 1);
		PAIRS_A(7);
		PAIRS_DP(7, 0), PAIRS_DP(7, 1);
	}
	const __m512 va = _mm512_set1_ps(alpha);
	PAIRS_ST(0, 0); PAIRS_ST(0, 1); PAIRS_ST(1, 0); PAIRS_ST(1, 1);
	PAIRS_ST(2, 0); PAIRS_ST(2, 1); PAIRS_ST(3, 0); PAIRS_ST(3, 1);
	PAIRS_ST(4, 0); PAIRS_ST(4, 1); PAIRS_ST(5, 0); PAIRS_ST(5, 1);
	PAIRS_ST(6, 0); PAIRS_ST(6, 1); PAIRS_ST(7, 0); PAIRS_ST(7, 1);
}

static __mmask16 cols_mask(int n) { return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

static void gemm_pairs(float *C, int ldc, const uint16_t *A, int ars, int aps, const uint32_t *Bp, int ldb, int M,
		       int N, int K2, float alpha, int acc)
{
	const int wide = N > 32, R = wide ? 4 : 8, W = wide ? 64 : 32;
	for (int j0 = 0; j0 < N; j0 += W) {
		__mmask16 mk[4];
		for (int v = 0; v < 4; v++)
			mk[v] = cols_mask(N - j0 - 16 * v);
		for (int i0 = 0; i0 < M; i0 += R) {
			const int m = M - i0 < R ? M - i0 : R;
			float *c = C + (size_t)i0 * ldc + j0;
			const uint16_t *a = A + 2 * (size_t)i0 * ars;
			if (wide)
				pairs_4x4(c, ldc, a, ars, aps, Bp + j0, ldb, m, mk, K2, alpha, acc);
			else
				pairs_8x2(c, ldc, a, ars, aps, Bp + j0, ldb, m, mk, K2, alpha, acc);
		}
	}
}

/* Rows 2p and 2p+1 of src (16 lanes at a time) -> one row of pairs: vcvtne2ps2bf16 (dnn_bf16_convert's
 * rounding), then interleaved. */
BF16_TARGET static void pairs_f32_simd(uint32_t *dst, int ldd, const float *src, int lds, int K, int N)
{
	const __m512i il = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
					    6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
	for (int p = 0; 2 * p < K; p++) {
		const float *r0 = src + (size_t)(2 * p) * lds, *r1 = 2 * p + 1 < K ? r0 + lds : NULL;
		uint32_t *d = dst + (size_t)p * ldd;
		for (int j = 0; j < N; j += 16) {
			const __mmask16 m = cols_mask(N - j);
			const __m512 x0 = _mm512_maskz_loadu_ps(m, r0 + j);
			const __m512 x1 = r1 ? _mm512_maskz_loadu_ps(m, r1 + j) : _mm512_setzero_ps();
			const __m512i h = (__m512i)_mm512_cvtne2ps_pbh(x1, x0); /* x0's 16 values, then x1's */
			_mm512_mask_storeu_epi32(d + j, m, _mm512_permutexvar_epi16(il, h));
		}
	}
}
#else
static void gemm_pairs(float *C, int ldc, const uint16_t *A, int ars, int aps, const uint32_t *Bp, int ldb, int M,
		       int N, int K2, float alpha, int acc)
{
	(void)C, (void)ldc, (void)A, (void)ars, (void)aps, (void)Bp, (void)ldb, (void)M, (void)N, (void)K2, (void)alpha,
		(void)acc;
}
#endif

int dnn_gemm_bf16_pairs(float *C, int ldc, const uint16_t *A, int ars, int aps, const uint32_t *Bp, int ldb, int M,
			int N, int K, float alpha, int accumulate)
{
	if (!dnn_cpu_has_bf16())
		return -1;
	if (M <= 0 || N <= 0)
		return 0;
	gemm_pairs(C, ldc, A, ars, aps, Bp, ldb, M, N, (K + 1) / 2, alpha, accumulate);
	return 0;
}

void dnn_bf16_pairs_f32(uint32_t *dst, int ldd, const float *src, int lds, int K, int N)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (use_simd && dnn_cpu_has_bf16()) {
		pairs_f32_simd(dst, ldd, src, lds, K, N);
		return;
	}
#endif
	for (int p = 0; 2 * p < K; p++)
		for (int j = 0; j < N; j++) {
			const uint32_t lo = dnn_f32_to_bf16(src[(size_t)(2 * p) * lds + j]);
			const uint32_t hi = 2 * p + 1 < K ? dnn_f32_to_bf16(src[(size_t)(2 * p + 1) * lds + j]) : 0;
			dst[(size_t)p * ldd + j] = lo | hi << 16;
		}
}

void dnn_bf16_pairs_bf16(uint32_t *dst, int ldd, const uint16_t *src, int lds, int K, int N)
{
	for (int p = 0; 2 * p < K; p++) {
		const uint16_t *r0 = src + (size_t)(2 * p) * lds, *r1 = r0 + lds;
		uint32_t *d = dst + (size_t)p * ldd;
		if (2 * p + 1 < K)
			for (int j = 0; j < N; j++)
				d[j] = (uint32_t)r0[j] | (uint32_t)r1[j] << 16;
		else
			for (int j = 0; j < N; j++)
				d[j] = r0[j];
	}
}

void dnn_gemm_bf16_release(void)
{
#ifdef DNN_HAVE_DNNL
	for (int i = 0; i < mm_n; i++)
		mm_free(&mm_cache[i]);
	mm_n = mm_next = 0;
	dnn_onednn_thread_close(&mm_t);
#endif
	free(buf_a), free(buf_b), free(buf_c);
	buf_a = buf_b = NULL, buf_c = NULL;
	cap_a = cap_b = cap_c = 0;
}

const char *dnn_gemm_bf16_impl(void)
{
#ifdef DNN_HAVE_DNNL
	if (use_simd)
		return mm_impl[0] ? mm_impl : "onednn";
#endif
	return "round+sgemm";
}

/* Element i of an operand as the portable path multiplies it: rounded (fp32) or widened (bf16). */
static inline float operand_at(dnn_bf16_operand o, size_t i)
{
	return o.f ? dnn_bf16_round(o.f[i]) : dnn_bf16_to_f32(o.h[i]);
}

/* The portable path: op(A) and op(B) rounded to bf16 (or widened from it) into fp32 copies, then
 * cblas_sgemm; a bias is written into C first and summed with beta = 1. */
static int gemm_round(int transA, int transB, int M, int N, int K, float alpha, dnn_bf16_operand A, dnn_bf16_operand B,
		      float beta, const float *bias, float *C, int ldc)
{
	float *ra = grow(&buf_a, &cap_a, (size_t)M * K * 4), *rb = grow(&buf_b, &cap_b, (size_t)K * N * 4);
	if (!ra || !rb)
		return -1;
	const size_t lda = (size_t)A.ld, ldb = (size_t)B.ld;
	for (int i = 0; i < M; i++)
		for (int k = 0; k < K; k++)
			ra[(size_t)i * K + k] = operand_at(A, transA ? (size_t)k * lda + i : (size_t)i * lda + k);
	for (int k = 0; k < K; k++)
		for (int j = 0; j < N; j++)
			rb[(size_t)k * N + j] = operand_at(B, transB ? (size_t)j * ldb + k : (size_t)k * ldb + j);
	for (int i = 0; A.colsum && i < (transA ? K : M); i++) /* the stored rows, in order */
		for (int j = 0; j < (transA ? M : K); j++)
			A.colsum[j] += A.f[(size_t)i * lda + j];
	for (int i = 0; B.colsum && i < (transB ? N : K); i++)
		for (int j = 0; j < (transB ? K : N); j++)
			B.colsum[j] += B.f[(size_t)i * ldb + j];
	if (bias) {
		for (int i = 0; i < M; i++)
			memcpy(C + (size_t)i * ldc, bias, (size_t)N * sizeof(float));
		beta = 1.0f;
	}
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, alpha, ra, K, rb, N, beta, C, ldc);
	return 0;
}

int dnn_gemm_bf16_ex(int transA, int transB, int M, int N, int K, float alpha, dnn_bf16_operand A, dnn_bf16_operand B,
		     float beta, const float *bias, float *C, int ldc)
{
	if ((A.f == NULL) == (A.h == NULL) || (B.f == NULL) == (B.h == NULL) || (bias && beta != 0.0f) ||
	    (A.colsum && !A.f) || (B.colsum && !B.f))
		return -1;
	if (M <= 0 || N <= 0)
		return 0;
	if (K <= 0) { /* C = beta C (+ bias), as sgemm */
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++) {
				float *c = C + (size_t)i * ldc + j;
				*c = bias ? bias[j] : beta == 0.0f ? 0.0f : beta * *c;
			}
		return 0;
	}
#ifdef DNN_HAVE_DNNL
	if (use_simd)
		return gemm_dnnl(transA, transB, M, N, K, alpha, A, B, beta, bias, C, ldc, 0);
#endif
	return gemm_round(transA, transB, M, N, K, alpha, A, B, beta, bias, C, ldc);
}

int dnn_gemm_bf16_out(int transA, int transB, int M, int N, int K, float alpha, dnn_bf16_operand A, dnn_bf16_operand B,
		      const float *bias, uint16_t *C, int ldc)
{
	if ((A.f == NULL) == (A.h == NULL) || (B.f == NULL) == (B.h == NULL) || (A.colsum && !A.f) ||
	    (B.colsum && !B.f))
		return -1;
	if (M <= 0 || N <= 0)
		return 0;
#ifdef DNN_HAVE_DNNL
	if (use_simd && K > 0)
		return gemm_dnnl(transA, transB, M, N, K, alpha, A, B, 0.0f, bias, C, ldc, 1);
#endif
	/* the fp32 C of dnn_gemm_bf16_ex (packed, N wide), then rounded */
	float *c = grow(&buf_c, &cap_c, (size_t)M * N * sizeof(float));
	if (!c || dnn_gemm_bf16_ex(transA, transB, M, N, K, alpha, A, B, 0.0f, bias, c, N) != 0)
		return -1;
	dnn_bf16_convert_rows(C, ldc, c, N, M, N);
	return 0;
}

int dnn_gemm_bf16(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
		  int ldb, float beta, float *C, int ldc)
{
	return dnn_gemm_bf16_ex(transA, transB, M, N, K, alpha, (dnn_bf16_operand){.f = A, .ld = lda},
				(dnn_bf16_operand){.f = B, .ld = ldb}, beta, NULL, C, ldc);
}

void dnn_bf16_convert(uint16_t *dst, const float *src, size_t n)
{
#ifdef DNN_HAVE_DNNL
	if (use_simd) {
		for (size_t i = 0; i < n; i += 1 << 30) /* to_bf16 counts in int */
			to_bf16(dst + i, src + i, (int)(n - i < (1u << 30) ? n - i : 1u << 30));
		return;
	}
#endif
	for (size_t i = 0; i < n; i++)
		dst[i] = dnn_f32_to_bf16(src[i]);
}

void dnn_bf16_convert_rows(uint16_t *dst, int ld_dst, const float *src, int ld_src, int rows, int cols)
{
#ifdef DNN_HAVE_DNNL
	if (use_simd) {
		for (int r = 0; r < rows; r++)
			to_bf16(dst + (size_t)r * ld_dst, src + (size_t)r * ld_src, cols);
		return;
	}
#endif
	for (int r = 0; r < rows; r++)
		for (int c = 0; c < cols; c++)
			dst[(size_t)r * ld_dst + c] = dnn_f32_to_bf16(src[(size_t)r * ld_src + c]);
}

int dnn_bf16_convert_hw(void)
{
#ifdef DNN_HAVE_DNNL
	return use_simd && dnn_cpu_has_bf16();
#else
	return 0;
#endif
}

void dnn_bf16_convert_rows_bias(uint16_t *dst, size_t ld_dst, const float *src, size_t ld_src, int rows, int cols,
				const float *bias, int bias_rows)
{
#if defined(DNN_HAVE_DNNL) && defined(__x86_64__) && defined(__GNUC__)
	if (use_simd && dnn_cpu_has_bf16()) {
		for (int r = 0; r < rows; r++)
			if (bias)
				to_bf16_bias_simd(dst + (size_t)r * ld_dst, src + (size_t)r * ld_src, cols, bias[r / bias_rows]);
			else
				to_bf16_simd(dst + (size_t)r * ld_dst, src + (size_t)r * ld_src, cols);
		return;
	}
#endif
	for (int r = 0; r < rows; r++)
		for (int c = 0; c < cols; c++) {
			const float v = src[(size_t)r * ld_src + c];
			dst[(size_t)r * ld_dst + c] = dnn_f32_to_bf16(bias ? v + bias[r / bias_rows] : v);
		}
}

/* A shift per element, which the compiler vectorises (-O3) in each clone. */
__attribute__((target_clones("avx512f", "avx2", "default"))) void dnn_bf16_widen(float *restrict dst,
										 const uint16_t *restrict src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = dnn_bf16_to_f32(src[i]);
}

int dnn_gemm(int bf16, int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda,
	     const float *B, int ldb, float beta, float *C, int ldc)
{
	if (bf16)
		return dnn_gemm_bf16(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
	cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, M, N, K,
		    alpha, A, lda, B, ldb, beta, C, ldc);
	return 0;
}

#if defined(__x86_64__) && defined(__GNUC__)
BF16_TARGET static void round_floats_simd(float *p, size_t n)
{
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		const __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(p + i));
		_mm512_storeu_si512(p + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
	}
	if (i < n) {
		const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
		const __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, p + i));
		_mm512_mask_storeu_epi32(p + i, m, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
	}
}
#endif

void dnn_bf16_round_floats(float *p, size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (dnn_cpu_has_bf16()) {
		round_floats_simd(p, n);
		return;
	}
#endif
	for (size_t i = 0; i < n; i++)
		p[i] = dnn_bf16_round(p[i]);
}
