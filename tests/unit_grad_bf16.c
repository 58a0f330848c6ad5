/* unit_grad_bf16.c — the bf16 wire's kernels (codelets/vec.h): dnn_vec_to_bf16_cpu's AVX-512F loop gives the bits
 * of the scalar dnn_f32_to_bf16 (round to nearest even, NaN quieted) on every high half-word with the low
 * half-words that decide a rounding (0, 1, the tie 0x8000 and its neighbours, 0xffff) and on 2^20 random
 * floats, at every length mod 16 (the scalar tail); the source is left rounded to what was packed;
 * dnn_vec_from_bf16_cpu is exact and dnn_vec_add_bf16_cpu adds in fp32. Negative control: vcvtneps2bf16
 * (where the CPU has AVX512_BF16) flushes a denormal input that round to nearest even keeps, the reason the
 * wire does not use it (vec.c); and a deliberately truncating rounding must differ from ours. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_bf16.h"
#include "test_util.h"
#include "vec.h"

static float from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}
static uint32_t bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

/* The SIMD pack of src[n] against the scalar rounding: the number of differing elements. */
static size_t compare(const float *src, size_t n)
{
	float *a = malloc(n * sizeof(float));
	uint16_t *h = malloc(n * sizeof(uint16_t));
	size_t bad = 0;
	if (!a || !h)
		abort();
	memcpy(a, src, n * sizeof(float));
	dnn_vec_to_bf16_cpu(h, a, n);
	for (size_t i = 0; i < n; i++) {
		const uint16_t want = dnn_f32_to_bf16(src[i]);
		bad += h[i] != want || bits(a[i]) != (uint32_t)want << 16;
	}
	free(a), free(h);
	return bad;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx512f,avx512bf16,avx512vl"))) static uint16_t cvtne_one(float f)
{
	float v[16] = {f};
	__m256bh r = _mm512_cvtneps_pbh(_mm512_loadu_ps(v));
	uint16_t o[16];
	memcpy(o, &r, sizeof(o));
	return o[0];
}
#endif

int main(void)
{
	const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff, 0x4000, 0xc000};
	const size_t nl = sizeof(lows) / sizeof(lows[0]), n = 65536 * nl;
	float *v = malloc(n * sizeof(float)), *r = malloc((1u << 20) * sizeof(float));
	if (!v || !r)
		return 1;
	for (uint32_t hi = 0; hi < 65536; hi++)
		for (size_t k = 0; k < nl; k++)
			v[hi * nl + k] = from_bits(hi << 16 | lows[k]);
	uint64_t s = 12345;
	for (size_t i = 0; i < (1u << 20); i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		r[i] = from_bits((uint32_t)(s >> 32));
	}
	const int simd = dnn_vec_bf16_set_simd(1);
	printf("AVX-512F loop: %s\n", simd ? "yes" : "no (scalar only)");
	for (size_t len = n - 17; len <= n; len++) /* every tail length */
		TEST_CHECK(compare(v, len) == 0, "line %d", __LINE__);
	TEST_CHECK(compare(r, 1u << 20) == 0, "line %d", __LINE__);
	TEST_CHECK(dnn_vec_bf16_set_simd(0) == 0 && compare(v, n) == 0, "scalar path");
	dnn_vec_bf16_set_simd(1);
	/* Specific values: a tie rounds to even, a NaN stays a NaN, a denormal is kept. */
	TEST_CHECK(dnn_f32_to_bf16(from_bits(0x3f808000)) == 0x3f80, "tie to even, down");
	TEST_CHECK(dnn_f32_to_bf16(from_bits(0x3f818000)) == 0x3f82, "tie to even, up");
	TEST_CHECK(dnn_f32_to_bf16(from_bits(0x7f800001)) == 0x7fc0, "NaN quieted");
	TEST_CHECK(dnn_f32_to_bf16(from_bits(0x00012345)) == 0x0001, "denormal kept");
	/* Widening is exact; the add is one fp32 add. */
	uint16_t h[3] = {0x3f80, 0xbf40, 0x0001};
	float w[3], acc[3] = {1.0f, 0.25f, 0.0f};
	dnn_vec_from_bf16_cpu(w, h, 3);
	TEST_CHECK(w[0] == 1.0f && w[1] == -0.75f && bits(w[2]) == 0x00010000u, "widening");
	dnn_vec_add_bf16_cpu(acc, h, 3);
	TEST_CHECK(acc[0] == 2.0f && acc[1] == -0.5f && bits(acc[2]) == 0x00010000u, "fp32 add");
	/* Negative controls. A truncation (round toward zero) must be caught by the comparison. */
	size_t trunc_diff = 0;
	for (size_t i = 0; i < n; i++)
		trunc_diff += (uint16_t)(bits(v[i]) >> 16) != dnn_f32_to_bf16(v[i]);
	TEST_CHECK(trunc_diff > 0, "line %d", __LINE__);
#if defined(__x86_64__) && defined(__GNUC__)
	if (dnn_cpu_has_bf16()) {
		const uint16_t hw = cvtne_one(from_bits(0x00012345));
		printf("vcvtneps2bf16(0x00012345) = 0x%04x, round to nearest even 0x0001\n", hw);
		TEST_CHECK(hw != dnn_f32_to_bf16(from_bits(0x00012345)), "line %d", __LINE__);
	}
#endif
	free(v), free(r);
	return test_report("unit_grad_bf16");
}
