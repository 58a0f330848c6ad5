/* gemm_bf16.h — the bf16 GEMM of --precision bf16 (mixed precision): fp32 in, fp32 out, the
 * products of bf16-rounded operands summed in fp32.
 *
 *   C (M,N) = alpha op(A) op(B) + beta C, row-major as cblas_sgemm(CblasRowMajor, ...);
 *   every element of A and B is rounded to bf16 (round to nearest even) as it is packed, so the
 *   callers keep fp32 tensors (master weights, activations) and round per use.
 *
 * Why our own: Debian 12's OpenBLAS 0.3.21 is built without BUILD_BFLOAT16 (cblas_sbgemm is in
 * cblas.h but not exported by libopenblas.so.0), and oneDNN 2.6's bf16 matmul measured slower on
 * the small shapes of the transformer path (docs/op_bench.md, "bf16 GEMM"). The kernel is
 * AVX512_BF16's vdpbf16ps on 12 x 32 register tiles over packed operands, blocked as GotoBLAS.
 * Every sum runs in a fixed order (no threads, fixed blocking), so the same inputs give the
 * same bits on every run. Error: each product of two rounded inputs is within (1+u)^2 of the
 * exact one, u = 2^-8 (bf16's unit roundoff), summed in fp32: |C - C_exact| <= (2u + K 2^-24)
 * sum |a||b| to first order (tests/op_cases.c's bf16 checks use this bound).
 *
 * On a CPU without AVX512_BF16 the same function rounds the operands to bf16 and calls
 * cblas_sgemm (products of two bf16 values are exact in fp32): the same error bound, no speed.
 * The CLI refuses --precision bf16 there (dnn_cpu_has_bf16), so that path serves tests only. */
#ifndef DNN_GEMM_BF16_H
#define DNN_GEMM_BF16_H
#include <stdint.h>

/* 1 when the CPU (and OS) run AVX512_BF16 (with AVX512F/BW/VL), else 0. */
int dnn_cpu_has_bf16(void);

/* fp32 -> bf16, round to nearest even (NaN stays NaN): the rounding of every bf16 path. */
static inline uint16_t dnn_f32_to_bf16(float f)
{
	union {
		float f;
		uint32_t u;
	} v = {f};
	if ((v.u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((v.u >> 16) | 0x40u); /* quiet NaN */
	return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}
static inline float dnn_bf16_to_f32(uint16_t h)
{
	union {
		uint32_t u;
		float f;
	} v = {(uint32_t)h << 16};
	return v.f;
}
static inline float dnn_bf16_round(float f) { return dnn_bf16_to_f32(dnn_f32_to_bf16(f)); }

/* C (M,N) = alpha op(A) op(B) + beta C; op(A) (M,K), op(B) (K,N); trans: 0 = as stored, 1 =
 * transposed (A stored (K,M) with lda, ...). beta == 0 never reads C. Returns 0, or -1 when
 * the packing buffers cannot be allocated (C untouched). Use the AVX512_BF16 kernel when
 * use_simd and the CPU has it, else the rounding + sgemm path. */
int dnn_gemm_bf16(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
		  int ldb, float beta, float *C, int ldc);
/* Tests and the benchmark: 1 = the AVX512_BF16 kernel where the CPU has it (the default), 0 =
 * the rounding + sgemm path. Returns the choice. */
int dnn_gemm_bf16_set_simd(int on);
#endif
