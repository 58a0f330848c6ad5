/* gemm_bf16.h — the bf16 GEMM of --precision bf16 (mixed precision): fp32 in, fp32 out, the
 * products of bf16-rounded operands summed in fp32.
 *
 *   C (M,N) = alpha op(A) op(B) + beta C, row-major as cblas_sgemm(CblasRowMajor, ...);
 *   every element of A and B is rounded to bf16 (round to nearest even) as it is packed, so the
 *   callers keep fp32 tensors (master weights, activations) and round per use.
 *
 * The GEMM is oneDNN's matmul (bf16 x bf16 -> fp32, its brgemm kernel on AVX512_BF16), one
 * primitive per shape cached per thread; the operands are rounded into per-thread bf16 copies
 * first, or (dnn_gemm_bf16_ex) read in place where the caller rounded them once for several calls
 * (attention's heads), with the same bits; a rounded operand's column sums can come with it
 * (dense's bias gradient). Measured before choosing (docs/op_bench.md, "bf16 GEMM"): Debian 12's OpenBLAS 0.3.21
 * is built without BUILD_BFLOAT16 (cblas_sbgemm is in cblas.h but libopenblas.so.0 does not
 * export it), and a vdpbf16ps kernel of our own (commit "bf16 GEMM, first try") ran at 0.1-1.5x
 * sgemm, oneDNN at 1-15x. oneDNN runs one thread per call (the caller is one StarPU worker) and
 * its sums have a fixed order for a given shape, so the same inputs give the same bits on every
 * run. Error: each product of two rounded inputs is within (1+u)^2 of the exact one, u = 2^-8
 * (bf16's unit roundoff), summed in fp32: |C - C_exact| <= (2u + u^2 + K 2^-24) sum |a||b| to
 * first order (the op harness's bf16 checks use this bound, tests/op_cases.c).
 *
 * Without oneDNN (a build that did not find libdnnl), or after dnn_gemm_bf16_set_simd(0), the
 * same function rounds the operands to bf16 and calls cblas_sgemm (a product of two bf16 values
 * is exact in fp32): the same error bound, the speed of sgemm. The CLI refuses --precision bf16
 * on a CPU without AVX512_BF16 (dnn_cpu_has_bf16). */
#ifndef DNN_GEMM_BF16_H
#define DNN_GEMM_BF16_H
#include <stddef.h>
#include <stdint.h>

/* 1 when the CPU (and OS) run AVX512_BF16 (with AVX512F/BW/VL), else 0; 0 also after
 * dnn_cpu_mask_bf16(1). */
int dnn_cpu_has_bf16(void);
/* mask = 1: dnn_cpu_has_bf16 says 0 from now on, as on a CPU without AVX512_BF16 (the test hook
 * DNN_CPU_MASK=avx512_bf16, which runtime/knobs.c hands here once, before anything asks). */
void dnn_cpu_mask_bf16(int mask);

#include "formulas.h" /* DNN_FORMULA: these are also conv2d.cu's device code (the same bits on a GPU) */

/* Three roundings fp32 -> bf16, each on purpose; all round to nearest even, and differ only on fp32
 * denormal inputs (and in where the result goes):
 *  1. dnn_f32_to_bf16 (dnn_bf16_round: the same, back in fp32), scalar integer arithmetic, denormals
 *     rounded like every other value: the exact rounding, the same bits on any CPU and on a GPU.
 *     Where bits must not depend on the CPU: the wire of --grad-precision bf16 (codelets/vec.c,
 *     dnn_vec_to_bf16_cpu, whose loop is its 16-lane form below, dnn_f32_to_bf16_avx512: AVX-512F
 *     only, since the wire runs on CPUs without AVX512_BF16 and small gradients can be denormal);
 *     conv2d.cu's bf16 copies; Winograd's U pairs (dnn_wino_pack_u, once per weight); the paths of
 *     2 and 3 on a CPU without AVX512_BF16.
 *  2. dnn_bf16_convert, fp32 operand -> bf16 copy: the GEMM path's (dense, lm_head, attention, conv's
 *     im2col). vcvtneps2bf16 on an AVX512_BF16 CPU, which flushes denormal inputs to zero: what
 *     oneDNN's own conversion does, so that operands the caller rounds once (dnn_gemm_bf16_ex) give
 *     the bits of dnn_gemm_bf16 rounding them itself; also the writers of the bf16 activation
 *     storage (layer norm, GELU, attention; dense through oneDNN's bf16 destination,
 *     dnn_gemm_bf16_out), so a stored activation is the value its reader's GEMM rounded it to.
 *  3. dnn_bf16_round_floats, fp32 in place: the operands of kernels that multiply bf16 values with
 *     their own fp32 loops (the direct convs, Winograd's GEMMs without vdpbf16ps and its weight
 *     gradient); vcvtneps2bf16 as 2 (Winograd's V pairs: its two-register form, vcvtne2ps2bf16), so
 *     a conv path rounds its operands as the GEMM path does.
 * A product of two bf16 values is exact in fp32 whichever rounding made them. */

/* fp32 -> bf16, round to nearest even (NaN stays NaN, quiet): rounding 1 above. */
DNN_FORMULA uint16_t dnn_f32_to_bf16(float f)
{
	union {
		float f;
		uint32_t u;
	} v = {f};
	if ((v.u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((v.u >> 16) | 0x40u); /* quiet NaN */
	return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}
DNN_FORMULA float dnn_bf16_to_f32(uint16_t h)
{
	union {
		uint32_t u;
		float f;
	} v = {(uint32_t)h << 16};
	return v.f;
}
DNN_FORMULA float dnn_bf16_round(float f) { return dnn_bf16_to_f32(dnn_f32_to_bf16(f)); }
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__)
#include <immintrin.h>
/* dnn_f32_to_bf16 on 16 lanes: u, one float's bits a lane -> its bf16 bits in the lane's low half, by the
 * same integer arithmetic (u + 0x7fff + lsb(u >> 16), >> 16; NaN: u's high half with the quiet bit set),
 * so the same bits as the scalar on every input, denormals included (vcvtneps2bf16 flushes them). */
static inline __attribute__((always_inline, target("avx512f"))) __m512i dnn_f32_to_bf16_avx512(__m512i u)
{
	const __m512i hi = _mm512_srli_epi32(u, 16);
	const __m512i up = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)),
					    _mm512_and_si512(hi, _mm512_set1_epi32(1)));
	const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
						      _mm512_set1_epi32(0x7f800000));
	return _mm512_mask_or_epi32(_mm512_srli_epi32(up, 16), nan, hi, _mm512_set1_epi32(0x40));
}
#endif

/* C (M,N) = alpha op(A) op(B) + beta C; op(A) (M,K), op(B) (K,N); trans: 0 = as stored, 1 =
 * transposed (A stored (K,M) with lda, ...). beta == 0 never reads C. Returns 0, or -1 when
 * the bf16 copies cannot be allocated or oneDNN fails (C untouched). */
int dnn_gemm_bf16(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
		  int ldb, float beta, float *C, int ldc);
/* The one GEMM call of the kernels that have a bf16 mode (dense, lm_head, attention): bf16 = 0 is
 * cblas_sgemm (always 0), 1 dnn_gemm_bf16 (0 or -1, as above). Same arguments as dnn_gemm_bf16. */
int dnn_gemm(int bf16, int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda,
	     const float *B, int ldb, float beta, float *C, int ldc);
/* One operand of dnn_gemm_bf16_ex: fp32 values that the call rounds into its per-thread copy, as
 * dnn_gemm_bf16 does (f), or bf16 values already rounded by dnn_bf16_convert (h), read in place at
 * the given ld with no copy: an operand that several calls read (an attention head's q, k, v, dy)
 * is rounded once instead of once per call. Exactly one of f, h is non-NULL. */
typedef struct {
	const float *f;
	const uint16_t *h;
	int ld;
	/* f only, optional: colsum[c] += f[r][c] over the operand's stored rows r = 0, 1, ... in order
	 * (c < its stored width), summed in fp32 in the pass that rounds it: the bits of the plain loop,
	 * and the operand read once (dense's bias gradient, the column sums of dy); only in a call with
	 * M, N > 0 */
	float *colsum;
} dnn_bf16_operand;
/* C (M,N) = alpha op(A) op(B) + beta C (+ bias): dnn_gemm_bf16 with either operand in bf16 already,
 * and an optional bias (N floats added to every row of C, fp32, as oneDNN's matmul bias; needs
 * beta == 0, else -1). The same bits as dnn_gemm_bf16 on the fp32 values the bf16 ones were
 * rounded from, where an in-place operand's ld is its packed width (op(A) stored (M,K) with ld K,
 * ...; tests/op_bf16.c checks it); bias: the same bits as C = bias then beta = 1 (checked there
 * too). Returns 0, or -1 (C untouched). */
int dnn_gemm_bf16_ex(int transA, int transB, int M, int N, int K, float alpha, dnn_bf16_operand A, dnn_bf16_operand B,
		     float beta, const float *bias, float *C, int ldc);
/* dnn_gemm_bf16_ex with C written in bf16 (uint16_t, row stride ldc; beta 0): each element's fp32
 * value (the sum, plus the bias) rounded as dnn_bf16_convert rounds, the same bf16 values as
 * dnn_bf16_convert of dnn_gemm_bf16_ex's fp32 C (tests/op_bf16.c checks it): oneDNN's matmul with
 * a bf16 destination (its fp32 accumulators rounded as they are stored: no pass over an fp32 C),
 * or the portable path's fp32 C rounded. For the bf16 activation storage (a dense output that
 * only bf16 readers read). Returns 0, or -1 (C untouched). */
int dnn_gemm_bf16_out(int transA, int transB, int M, int N, int K, float alpha, dnn_bf16_operand A, dnn_bf16_operand B,
		      const float *bias, uint16_t *C, int ldc);
/* dst[i] = bf16(src[i]), i < n: the rounding dnn_gemm_bf16 applies to its fp32 operands on its
 * current path (vcvtneps2bf16 for oneDNN on a bf16 CPU, which flushes denormals to zero as the
 * hardware does; dnn_f32_to_bf16 otherwise), so that pre-rounded operands give the same bits. */
void dnn_bf16_convert(uint16_t *dst, const float *src, size_t n);
/* dnn_bf16_convert on rows x cols values at strides ld_src and ld_dst, in one call (the bf16
 * activations written a row at a time at a stride, attention's heads: a call per row of D = 32
 * would cost more than the rounding). The same bits as dnn_bf16_convert row by row. */
void dnn_bf16_convert_rows(uint16_t *dst, int ld_dst, const float *src, int ld_src, int rows, int cols);
/* dst[r * ld_dst + c] = bf16(src[r * ld_src + c] + bias[r / bias_rows]), r < rows, c < cols, rounded as
 * dnn_bf16_convert (bias_rows >= 1: rows that share a bias value); bias NULL: nothing added (not + 0, which would
 * turn -0 into +0). The epilogue of a conv whose output is stored
 * in bf16 (codelets/conv2d*.c, dnn_conv2d_args.y_bf16): a block of output rows rounded right after the kernel
 * computed it, the bias added in fp32 first, as bias.h's pass adds it to an fp32 y. */
void dnn_bf16_convert_rows_bias(uint16_t *dst, size_t ld_dst, const float *src, size_t ld_src, int rows, int cols,
				const float *bias, int bias_rows);
/* 1 when dnn_bf16_convert rounds with vcvtneps2bf16 (oneDNN on, a CPU with AVX512_BF16), 0 when with
 * dnn_f32_to_bf16: for kernels that round in their own registers and must give dnn_bf16_convert's bits. */
int dnn_bf16_convert_hw(void);
/* dst[i] = the fp32 value of src[i] (bf16), i < n: exact. The reading side of the activations stored in bf16
 * (graph/model.h y_bf16), for a kernel that takes fp32. */
void dnn_bf16_widen(float *dst, const uint16_t *src, size_t n);
/* p[0..n) rounded to bf16 values in place, round to nearest even (vcvtneps2bf16 where the CPU has
 * AVX512_BF16, which also flushes denormal inputs to zero, as oneDNN's copies; else
 * dnn_bf16_round): the operands of a kernel that then multiplies them with its own fp32 loops
 * (a product of two bf16 values is exact in fp32: the bf16 GEMM's arithmetic at fp32 speed). */
void dnn_bf16_round_floats(float *p, size_t n);
/* Small bf16 GEMMs on operands packed once by the caller, with no oneDNN call (attention's tiles: at
 * gpt-nano's 64 x 64 x 32 a oneDNN matmul call, its argument set-up, execute and stream wait, cost
 * about as much as the product itself). vdpbf16ps, fp32 sums:
 *   C (M,N) = alpha A B (+ C when accumulate), A (M,K), B (K,N), both as pairs of bf16 values along K
 *   (a uint32_t holds values 2p and 2p+1, the first in its low half), p < ceil(K/2):
 *   A's pair p of row i at the uint32_t index i ars + p aps of A: bf16 rows at an even ld are ars =
 *   ld/2, aps = 1; A^T's rows paired by dnn_bf16_pairs_* (below) are ars = 1, aps = their ldd.
 *   Bp[p][j] = B[2p][j] | B[2p+1][j] << 16 (uint32_t rows at ldb).
 *   With K odd the last pair's high halves must be 0 in A and B (the packers below write it so).
 * Each C element sums its pairs in order of p (one order for a given K, whatever the thread or run;
 * the same error bound as dnn_gemm_bf16, each product of two bf16 values exact; vdpbf16ps flushes
 * denormal inputs and results to zero, as oneDNN's kernel). Needs dnn_cpu_has_bf16() (the callers
 * take it only then: dnn_gemm_bf16_pairs_ok); returns -1 otherwise, C untouched. */
int dnn_gemm_bf16_pairs(float *C, int ldc, const uint16_t *A, int ars, int aps, const uint32_t *Bp, int ldb, int M,
			int N, int K, float alpha, int accumulate);
/* 1 when dnn_gemm_bf16_pairs runs here: a bf16 CPU and the oneDNN path chosen (dnn_gemm_bf16_set_simd(1));
 * with the portable path (tests' second bf16 path) the callers keep dnn_gemm_bf16_ex. */
int dnn_gemm_bf16_pairs_ok(void);
/* Packers of dnn_gemm_bf16_pairs' B operand, each rounding as dnn_bf16_convert does:
 * dst (ceil(K/2), N) pairs at ldd = the rows of src (K,N): fp32 at lds (rounded), or bf16 (copied). */
void dnn_bf16_pairs_f32(uint32_t *dst, int ldd, const float *src, int lds, int K, int N);
void dnn_bf16_pairs_bf16(uint32_t *dst, int ldd, const uint16_t *src, int lds, int K, int N);
/* Tests and the benchmark: 1 = oneDNN where the build has it (the default), 0 = the rounding +
 * sgemm path. Returns the choice. */
int dnn_gemm_bf16_set_simd(int on);
/* The choice in effect (1: oneDNN), read only (conv2d_onednn.c follows it). */
int dnn_gemm_bf16_simd(void);
/* Frees the calling thread's bf16 copies and oneDNN primitives (each CPU worker at shutdown, as
 * dnn_cpu_scratch_release); the next call makes them anew. */
void dnn_gemm_bf16_release(void);
/* Which GEMM dnn_gemm_bf16 runs: "onednn-2.6.3" plus its kernel once a call has run
 * (":brg:avx512_core_bf16"), or "round+sgemm". */
const char *dnn_gemm_bf16_impl(void);
#endif
