/* simd_exp.h — exp of 8 floats in AVX2 + FMA registers (and of 16 in AVX-512F, the same bits per
 * lane), shared by the kernels that need a vector exp (attention's softmax, gelu's sigmoid). x86-64
 * with GCC/Clang only: include it under `#if defined(__x86_64__) && defined(__GNUC__)` and call it
 * from a DNN_AVX2_FMA (dnn_exp16: avx512f) function after checking the CPU (__builtin_cpu_supports). */
#ifndef DNN_SIMD_EXP_H
#define DNN_SIMD_EXP_H
#include <immintrin.h>

#define DNN_AVX2_FMA __attribute__((target("avx2,fma")))

/* exp(x), 8 lanes, within 2 ulp of expf for x in [-87.3, 88] (larger x are clamped at 88): x =
 * n ln2 + r, |r| <= ln2/2, exp(r) by Cephes' degree-7 polynomial, 2^n by the exponent bits; below
 * -87.3 (2^-126) it returns about 1e-38 rather than a denormal or 0. A NaN stays NaN (min/max
 * return their second operand when either is NaN), so a non-finite score reaches the output. */
DNN_AVX2_FMA static inline __m256 dnn_exp8(__m256 x)
{
	x = _mm256_max_ps(_mm256_set1_ps(-87.33654f), _mm256_min_ps(_mm256_set1_ps(88.0f), x));
	const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
					 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
	__m256 y = _mm256_set1_ps(1.9875691500e-4f);
	y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
	y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
	y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
	y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
	y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
	y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
	return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

/* dnn_exp8 on 16 lanes (AVX-512F): the same operations in the same order, so each lane's value is
 * dnn_exp8's bit for bit (a kernel may split a row between the two). */
__attribute__((target("avx512f"))) static inline __m512 dnn_exp16(__m512 x)
{
	x = _mm512_max_ps(_mm512_set1_ps(-87.33654f), _mm512_min_ps(_mm512_set1_ps(88.0f), x));
	const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
					      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
	r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
	__m512 y = _mm512_set1_ps(1.9875691500e-4f);
	y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
	y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
	y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
	y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
	y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
	y = _mm512_fmadd_ps(y, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
	const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
	return _mm512_mul_ps(y, _mm512_castsi512_ps(e));
}

#endif
