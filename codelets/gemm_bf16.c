/* gemm_bf16.c — the bf16 GEMM (gemm_bf16.h): AVX512_BF16 kernel, packing, the portable path.
 *
 * Blocking (GotoBLAS's): for each NC columns, for each KC-deep slice of K, B's slice is packed
 * into panels of 32 columns, K in pairs: panel[p][j][2] = (B[2p][j], B[2p+1][j]) as bf16, which
 * is vdpbf16ps's layout (each 32-bit lane a pair along K). Then for each MC rows A's slice is
 * packed into panels of 12 rows, pairs along K as well, and the micro-kernel multiplies a 12-row
 * A panel (broadcast pair by pair) with a 32-column B panel: 24 zmm accumulators. Zero padding
 * fills the panels' tails (M, N, and an odd K), so the micro-kernel has no edge cases; only its
 * store is masked. The K slices are summed into C one after another (beta on the first), always
 * in the same order.
 */
#include "gemm_bf16.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#define MR 12
#define NR 32
#define KC 256 /* K per slice (even): a 32-column B panel is 16 KiB, in L1 */
#define MC 192 /* rows of A per packed block (a multiple of MR): 96 KiB, in L2 */
#define NC 1024 /* columns of B per packed block (a multiple of NR): 512 KiB */

static int use_simd = 1;

int dnn_gemm_bf16_set_simd(int on)
{
	use_simd = on && dnn_cpu_has_bf16();
	return use_simd;
}

/* Packing buffers, one pair per thread (each StarPU CPU worker is one thread), grown as needed
 * and kept: attention calls this on 64 x 64 tiles thousands of times per step. */
static __thread uint32_t *pa_buf, *pb_buf;
static __thread size_t pa_cap, pb_cap;

static uint32_t *grow(uint32_t **buf, size_t *cap, size_t n)
{
	if (n > *cap) {
		uint32_t *p = NULL;
		if (posix_memalign((void **)&p, 64, n * sizeof(uint32_t)) != 0)
			return NULL;
		free(*buf);
		*buf = p;
		*cap = n;
	}
	return *buf;
}

static inline uint32_t pair(float lo, float hi)
{
	return (uint32_t)dnn_f32_to_bf16(lo) | (uint32_t)dnn_f32_to_bf16(hi) << 16;
}

/* op(A) rows [i0, i0+mc), K [k0, k0+kc) -> panels of MR rows: dst[panel][p][r] = pair. */
static void pack_a(uint32_t *restrict dst, const float *A, int lda, int transA, int i0, int mc, int k0, int kc)
{
	const int kp = (kc + 1) / 2;
	for (int ir = 0; ir < mc; ir += MR) {
		const int mr = mc - ir < MR ? mc - ir : MR;
		uint32_t *d = dst + (size_t)ir * kp;
		for (int p = 0; p < kp; p++) {
			const int k = k0 + 2 * p, has2 = 2 * p + 1 < kc;
			for (int r = 0; r < MR; r++) {
				if (r >= mr) {
					d[(size_t)p * MR + r] = 0;
					continue;
				}
				const int i = i0 + ir + r;
				float lo, hi;
				if (transA) {
					lo = A[(size_t)k * lda + i];
					hi = has2 ? A[(size_t)(k + 1) * lda + i] : 0.0f;
				} else {
					lo = A[(size_t)i * lda + k];
					hi = has2 ? A[(size_t)i * lda + k + 1] : 0.0f;
				}
				d[(size_t)p * MR + r] = pair(lo, hi);
			}
		}
	}
}

/* op(B) K [k0, k0+kc), columns [j0, j0+nc) -> panels of NR columns: dst[panel][p][j] = pair. */
static void pack_b(uint32_t *restrict dst, const float *B, int ldb, int transB, int k0, int kc, int j0, int nc)
{
	const int kp = (kc + 1) / 2;
	for (int jr = 0; jr < nc; jr += NR) {
		const int nr = nc - jr < NR ? nc - jr : NR;
		uint32_t *d = dst + (size_t)jr * kp;
		for (int p = 0; p < kp; p++) {
			const int k = k0 + 2 * p, has2 = 2 * p + 1 < kc;
			uint32_t *dp = d + (size_t)p * NR;
			if (!transB) {
				const float *b0 = B + (size_t)k * ldb + j0 + jr, *b1 = b0 + ldb;
				for (int j = 0; j < nr; j++)
					dp[j] = pair(b0[j], has2 ? b1[j] : 0.0f);
			} else {
				for (int j = 0; j < nr; j++) {
					const float *b = B + (size_t)(j0 + jr + j) * ldb + k;
					dp[j] = pair(b[0], has2 ? b[1] : 0.0f);
				}
			}
			for (int j = nr; j < NR; j++)
				dp[j] = 0;
		}
	}
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

int dnn_cpu_has_bf16(void)
{
	static volatile int have = -1; /* -1: not asked yet; a race only asks twice */
	if (have < 0) {
		__builtin_cpu_init();
		have = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
	}
	return have;
}

/* C (mr x nr, ldc) = alpha a.b + (first ? beta C : C); a: kp x MR pairs, b: kp x NR pairs. */
BF16_TARGET static void kernel_12x32(int kp, const uint32_t *restrict a, const uint32_t *restrict b, float *C, int ldc,
				     int mr, int nr, float alpha, float beta)
{
	__m512 c[MR][2];
	for (int r = 0; r < MR; r++)
		c[r][0] = c[r][1] = _mm512_setzero_ps();
	for (int p = 0; p < kp; p++) {
		const __m512bh b0 = (__m512bh)_mm512_load_si512((const void *)(b + (size_t)p * NR));
		const __m512bh b1 = (__m512bh)_mm512_load_si512((const void *)(b + (size_t)p * NR + 16));
		const uint32_t *ap = a + (size_t)p * MR;
#define ROW(r)                                                                                          \
	do {                                                                                            \
		const __m512bh av = (__m512bh)_mm512_set1_epi32((int)ap[r]);                            \
		c[r][0] = _mm512_dpbf16_ps(c[r][0], b0, av);                                            \
		c[r][1] = _mm512_dpbf16_ps(c[r][1], b1, av);                                            \
	} while (0)
		ROW(0); ROW(1); ROW(2); ROW(3); ROW(4); ROW(5);
		ROW(6); ROW(7); ROW(8); ROW(9); ROW(10); ROW(11);
#undef ROW
	}
	const __mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
	const __mmask16 m1 = nr >= 32 ? 0xffff : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
	const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
	for (int r = 0; r < mr; r++) {
		float *cr = C + (size_t)r * ldc;
		__m512 y0 = _mm512_mul_ps(c[r][0], va), y1 = _mm512_mul_ps(c[r][1], va);
		if (beta != 0.0f) {
			y0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, cr), vb, y0);
			y1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, cr + 16), vb, y1);
		}
		_mm512_mask_storeu_ps(cr, m0, y0);
		_mm512_mask_storeu_ps(cr + 16, m1, y1);
	}
}

static int gemm_simd(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
		     int ldb, float beta, float *C, int ldc)
{
	const int ncap = N < NC ? N : NC, mcap = M < MC ? M : MC, kcap = K < KC ? K : KC;
	uint32_t *pb = grow(&pb_buf, &pb_cap, (size_t)((ncap + NR - 1) / NR * NR) * ((kcap + 1) / 2));
	uint32_t *pa = grow(&pa_buf, &pa_cap, (size_t)((mcap + MR - 1) / MR * MR) * ((kcap + 1) / 2));
	if (!pa || !pb)
		return -1;
	for (int j0 = 0; j0 < N; j0 += NC) {
		const int nc = N - j0 < NC ? N - j0 : NC;
		for (int k0 = 0; k0 < K; k0 += KC) {
			const int kc = K - k0 < KC ? K - k0 : KC, kp = (kc + 1) / 2;
			const float bk = k0 == 0 ? beta : 1.0f;
			pack_b(pb, B, ldb, transB, k0, kc, j0, nc);
			for (int i0 = 0; i0 < M; i0 += MC) {
				const int mc = M - i0 < MC ? M - i0 : MC;
				pack_a(pa, A, lda, transA, i0, mc, k0, kc);
				for (int jr = 0; jr < nc; jr += NR)
					for (int ir = 0; ir < mc; ir += MR)
						kernel_12x32(kp, pa + (size_t)ir * kp, pb + (size_t)jr * kp,
							     C + (size_t)(i0 + ir) * ldc + j0 + jr, ldc,
							     mc - ir < MR ? mc - ir : MR, nc - jr < NR ? nc - jr : NR, alpha, bk);
			}
		}
	}
	return 0;
}
#else
int dnn_cpu_has_bf16(void) { return 0; }
static int gemm_simd(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
		     int ldb, float beta, float *C, int ldc)
{
	(void)transA, (void)transB, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb;
	(void)beta, (void)C, (void)ldc;
	return -1; /* unreachable: use_simd needs the CPU */
}
#endif

/* The portable path: op(A) and op(B) rounded to bf16 into fp32 copies, then cblas_sgemm. The
 * copies reuse the packing buffers (as floats). */
static int gemm_round(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
		      int ldb, float beta, float *C, int ldc)
{
	float *ra = (float *)grow(&pa_buf, &pa_cap, (size_t)M * K), *rb = (float *)grow(&pb_buf, &pb_cap, (size_t)K * N);
	if (!ra || !rb)
		return -1;
	for (int i = 0; i < M; i++)
		for (int k = 0; k < K; k++)
			ra[(size_t)i * K + k] = dnn_bf16_round(transA ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]);
	for (int k = 0; k < K; k++)
		for (int j = 0; j < N; j++)
			rb[(size_t)k * N + j] = dnn_bf16_round(transB ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, alpha, ra, K, rb, N, beta, C, ldc);
	return 0;
}

int dnn_gemm_bf16(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
		  int ldb, float beta, float *C, int ldc)
{
	if (M <= 0 || N <= 0)
		return 0;
	if (K <= 0) { /* C = beta C, as sgemm */
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++)
				C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
		return 0;
	}
	if (use_simd && dnn_cpu_has_bf16())
		return gemm_simd(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
	return gemm_round(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
