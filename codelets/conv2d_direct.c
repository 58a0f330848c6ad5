/* conv2d_direct.c — the direct AVX2 CPU conv (forward only; see conv2d_impl.h).
 *
 * Convolutions with few channels (LeNet-5's 1->6 and 6->16, 5x5) make GEMMs with 6 or 16 rows,
 * where OpenBLAS spends more time packing than multiplying and im2col copies every pixel R*S
 * times. For stride 1, no dilation, C*K <= DIRECT_MAX_CK and output rows of at most 32 floats,
 * on a CPU with AVX2+FMA, the kernels below run straight from a zero-padded copy of the image:
 * an output row is held in up to four 8-float registers while the C*R*S taps are added into it
 * (forward only: backward data and weight gradients measured slower this way at LeNet-5's
 * shapes, so they stay GEMMs; backward data of a stride-1 conv with C >= 16 runs as a forward
 * conv and so may take this path).
 * Under --precision bf16 (g->bf16) the padded copy of the image and a copy of the weights hold
 * their bf16-rounded values: the same kernels then add products of bf16 operands, exact in fp32,
 * in fp32 (gemm_bf16.h's arithmetic), at fp32 speed (LeNet-5's two convs, 64 images: 0.14 and
 * 0.29 ms forward in both precisions); a vdpbf16ps kernel would need the taps in pairs along c,
 * which LeNet-5's C = 1 lacks. */
#include <string.h>

#include "conv2d_impl.h"
#include "dnn_codelet.h"
#include "gemm_bf16.h"
#include "short_copy.h"

#define DIRECT_MAX_CK 128
#define DIRECT_MAX_S 8

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DNN_CONV_DIRECT 1

static int cpu_has_avx2_fma(void)
{
	static int cached = -1;
	if (cached < 0) {
		__builtin_cpu_init();
		cached = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	}
	return cached;
}

int dnn_conv_direct_applies(const conv_geom *g)
{
	return g->stride == 1 && g->dil == 1 && g->pad_h >= 0 && g->pad_w >= 0 && g->R * g->S > 1 &&
	       g->S <= DIRECT_MAX_S && (long)g->C * g->K <= DIRECT_MAX_CK && g->Q <= 32 && cpu_has_avx2_fma();
}

/* Row stride of the padded copy: room for ceil(Q/8) 8-float loads at every tap offset. */
static int direct_ld(const conv_geom *g)
{
	int wp = g->W + 2 * g->pad_w, need = (g->Q + 7) / 8 * 8 + g->S - 1;
	return wp > need ? wp : need;
}

size_t dnn_conv_direct_work(const conv_geom *g)
{
	const size_t wr = g->bf16 ? (size_t)g->K * g->C * g->R * g->S : 0; // bf16: rounded weights after the image
	return (size_t)g->C * (g->H + 2 * g->pad_h) * direct_ld(g) + wr;
}

/* x (C, H, W) -> xp (C, H + 2 pad_h, ld), zeros around (and right of) the image. */
static void pad_image(float *restrict xp, const float *restrict x, const conv_geom *g, int ld)
{
	const int Hp = g->H + 2 * g->pad_h;
	memset(xp, 0, (size_t)g->C * Hp * ld * sizeof(float));
	for (int c = 0; c < g->C; c++)
		for (int i = 0; i < g->H; i++)
			dnn_copy_floats(xp + ((size_t)c * Hp + i + g->pad_h) * ld + g->pad_w,
					x + ((size_t)c * g->H + i) * g->W, g->W);
	if (g->bf16) // the zeros stay zeros
		dnn_bf16_round_floats(xp, (size_t)g->C * Hp * ld);
}

/* Output row p of KB consecutive output channels, each in NV 8-float registers (KB*NV
 * independent FMA chains hide the FMA latency; each input load serves the KB channels):
 * out[kb*32 ..] = sum over c, r, s of w[k0 + kb, c, r, s] * xp[c, p + r, s ..]. */
static inline __attribute__((always_inline, target("avx2,fma"))) void
direct_rows(float *out, const float *xp, const float *wk, size_t wstride, int C, int R, int S, int Hp, int ld,
	    int p, const int NV, const int KB)
{
	__m256 a[4][4];
	for (int kb = 0; kb < KB; kb++)
		for (int v = 0; v < NV; v++)
			a[kb][v] = _mm256_setzero_ps();
	for (int c = 0; c < C; c++)
		for (int r = 0; r < R; r++) {
			const float *row = xp + ((size_t)c * Hp + p + r) * ld;
			const float *wr = wk + ((size_t)c * R + r) * S;
			for (int t = 0; t < S; t++) {
				__m256 xv[4];
				for (int v = 0; v < NV; v++)
					xv[v] = _mm256_loadu_ps(row + t + 8 * v);
				for (int kb = 0; kb < KB; kb++) {
					const __m256 b = _mm256_broadcast_ss(wr + kb * wstride + t);
					for (int v = 0; v < NV; v++)
						a[kb][v] = _mm256_fmadd_ps(b, xv[v], a[kb][v]);
				}
			}
		}
	for (int kb = 0; kb < KB; kb++)
		for (int v = 0; v < NV; v++)
			_mm256_storeu_ps(out + kb * 32 + 8 * v, a[kb][v]);
}

/* The AVX-512 twin of direct_rows, 16-float vectors, written straight into the KB output rows
 * yk + kb * kstride (Q floats each; beta 1: added to them): the last vector of a row is masked
 * (loads of the input and the store), so a row of Q <= 16 (LeNet-5's second conv, Q = 10) is one
 * vector per tap instead of two, and no row goes through a staging buffer. Each lane sums the same
 * taps in the same order as direct_rows: the results are the same floats. */
static inline __attribute__((always_inline, target("avx512f"))) void
direct_rows512(float *yk, size_t kstride, int Q, float beta, const float *bk, const float *xp, const float *wk,
	       size_t wstride, int C, int R, int S, int Hp, int ld, int p, const int NV, const int KB)
{
	__m512 a[8][2];
	const __mmask16 last = (__mmask16)((1u << (Q - 16 * (NV - 1))) - 1u);
	for (int kb = 0; kb < KB; kb++)
		for (int v = 0; v < NV; v++)
			a[kb][v] = _mm512_setzero_ps();
	for (int c = 0; c < C; c++)
		for (int r = 0; r < R; r++) {
			const float *row = xp + ((size_t)c * Hp + p + r) * ld;
			const float *wr = wk + ((size_t)c * R + r) * S;
			for (int t = 0; t < S; t++) {
				__m512 xv[2];
				for (int v = 0; v < NV; v++)
					xv[v] = v == NV - 1 ? _mm512_maskz_loadu_ps(last, row + t + 16 * v)
							    : _mm512_loadu_ps(row + t + 16 * v);
				for (int kb = 0; kb < KB; kb++) {
					const __m512 b = _mm512_set1_ps(wr[kb * wstride + t]);
					for (int v = 0; v < NV; v++)
						a[kb][v] = _mm512_fmadd_ps(b, xv[v], a[kb][v]);
				}
			}
		}
	for (int kb = 0; kb < KB; kb++) {
		float *yr = yk + kb * kstride;
		for (int v = 0; v < NV; v++) {
			const __mmask16 m = v == NV - 1 ? last : (__mmask16)0xFFFF;
			__m512 o = a[kb][v];
			if (beta != 0.0f) // y += conv: the old y added last, as y0 + conv
				o = _mm512_add_ps(_mm512_maskz_loadu_ps(m, yr + 16 * v), o);
			if (bk) // the fused bias, added after the conv as bias.c's pass does
				o = _mm512_add_ps(o, _mm512_set1_ps(bk[kb]));
			_mm512_mask_storeu_ps(yr + 16 * v, m, o);
		}
	}
}

static int direct_avx512 = -1; // -1: not chosen yet

int dnn_conv_direct_set_avx512(int on)
{
	__builtin_cpu_init();
	direct_avx512 = on && __builtin_cpu_supports("avx512f");
	return direct_avx512;
}

int dnn_conv_direct_avx512(void)
{
	if (direct_avx512 < 0)
		dnn_conv_direct_set_avx512(1);
	return direct_avx512;
}

__attribute__((target("avx512f"))) static void direct_forward512(float *y, const float *x, const float *w,
								 const float *bias, const conv_geom *g, float beta,
								 float *xp)
{
	const int C = g->C, K = g->K, R = g->R, S = g->S, P = g->P, Q = g->Q;
	const int Hp = g->H + 2 * g->pad_h, ld = direct_ld(g), nv = (Q + 15) / 16;
	const size_t ws = (size_t)C * R * S, pq = (size_t)P * Q;
	const int KB = nv == 2 ? 4 : 8; // at most 8 accumulators of 16 floats
	/* a bf16 y (g->y_bf16): the kb channels' rows, 32 at a time, into rb (fp32, rows of 32 floats: 32 KiB, in L1),
	 * then rounded into y with the bias, one call per channel and 32 rows (a call per output row cost 15 ns) */
	float rb[8 * 32 * 32];
	const int ybf = g->y_bf16;
	for (int n = 0; n < g->N; n++) {
		pad_image(xp, x + (size_t)n * C * g->H * g->W, g, ld);
		for (int k0 = 0; k0 < K;) {
			const int kb = K - k0 >= KB ? KB : 1;
			const float *wk = w + (size_t)k0 * ws;
			const float *bk = bias ? bias + k0 : NULL;
			const size_t ks = ybf ? 32 * 32 : pq; // stride between the kb channels' rows
			const float bt = ybf ? 0.0f : beta, *bb = ybf ? NULL : bk; // bf16 y: the rounding adds the bias
			for (int p = 0; p < P; p++) {
				float *yp = ybf ? rb + 32 * (size_t)(p % 32) : y + ((size_t)n * K + k0) * pq + (size_t)p * Q;
				if (nv == 1) {
					if (kb > 1)
						direct_rows512(yp, ks, Q, bt, bb, xp, wk, ws, C, R, S, Hp, ld, p, 1, 8);
					else
						direct_rows512(yp, ks, Q, bt, bb, xp, wk, ws, C, R, S, Hp, ld, p, 1, 1);
				} else {
					if (kb > 1)
						direct_rows512(yp, ks, Q, bt, bb, xp, wk, ws, C, R, S, Hp, ld, p, 2, 4);
					else
						direct_rows512(yp, ks, Q, bt, bb, xp, wk, ws, C, R, S, Hp, ld, p, 2, 1);
				}
				const int p0 = p - p % 32; /* rows p0 .. p of rb: flush them at 32 rows or the last row */
				for (int i = 0; ybf && (p % 32 == 31 || p == P - 1) && i < kb; i++)
					dnn_bf16_convert_rows_bias((uint16_t *)y + ((size_t)n * K + k0 + i) * pq + (size_t)p0 * Q,
								   (size_t)Q, rb + (size_t)i * ks, 32, p - p0 + 1, Q, bk ? bk + i : NULL,
								   p - p0 + 1);
			}
			k0 += kb;
		}
	}
}

/* y (N, K, P, Q) = conv(x, w) (beta 0) or y += conv(x, w) (beta 1), then + bias[k] per output
 * channel when bias is not NULL; work: dnn_conv_direct_work(g). */
__attribute__((target("avx2,fma"))) void dnn_conv_direct_forward(float *y, const float *x, const float *w,
								  const float *bias, const conv_geom *g, float beta,
								  float *xp)
{
	const int C = g->C, K = g->K, R = g->R, S = g->S, P = g->P, Q = g->Q;
	const int Hp = g->H + 2 * g->pad_h, ld = direct_ld(g), nv = (Q + 7) / 8;
	const size_t ws = (size_t)C * R * S;
	const int KB = nv >= 3 ? 2 : 4; // at most 8 accumulators
	float out[4 * 32];
	if (g->bf16) { // the kernels read the rounded copy of w, after the padded image
		float *wr = xp + (size_t)C * Hp * ld;
		memcpy(wr, w, (size_t)K * ws * sizeof(float));
		dnn_bf16_round_floats(wr, (size_t)K * ws);
		w = wr;
	}
	if (dnn_conv_direct_avx512()) {
		direct_forward512(y, x, w, bias, g, beta, xp);
		return;
	}
	for (int n = 0; n < g->N; n++) {
		pad_image(xp, x + (size_t)n * C * g->H * g->W, g, ld);
		for (int k0 = 0; k0 < K;) {
			const int kb = K - k0 >= KB ? KB : 1;
			const float *wk = w + (size_t)k0 * ws;
			for (int p = 0; p < P; p++) {
#define DIRECT_CASE(NV_)                                                                          \
	case NV_:                                                                                  \
		if (kb > 1)                                                                        \
			direct_rows(out, xp, wk, ws, C, R, S, Hp, ld, p, NV_, NV_ >= 3 ? 2 : 4);     \
		else                                                                               \
			direct_rows(out, xp, wk, ws, C, R, S, Hp, ld, p, NV_, 1);                     \
		break
				switch (nv) {
					DIRECT_CASE(1);
					DIRECT_CASE(2);
					DIRECT_CASE(3);
				default:
					DIRECT_CASE(4);
				}
#undef DIRECT_CASE
				if (g->y_bf16) { // bf16 y: the block's rows rounded as they are stored, the bias added first
					dnn_bf16_convert_rows_bias((uint16_t *)y + (((size_t)n * K + k0) * P + p) * Q, (size_t)P * Q,
								   out, 32, kb, Q, bias ? bias + k0 : NULL, 1);
					continue;
				}
				for (int i = 0; i < kb; i++) {
					float *yr = y + (((size_t)n * K + k0 + i) * P + p) * Q;
					if (beta != 0.0f) // y += conv: the old y added last, as y0 + conv
						for (int q = 0; q < Q; q++)
							yr[q] += out[i * 32 + q];
					else
						memcpy(yr, out + i * 32, (size_t)Q * sizeof(float));
					if (bias) // the fused bias, added after the conv as bias.c's pass does
						for (int q = 0; q < Q; q++)
							yr[q] += bias[k0 + i];
				}
			}
			k0 += kb;
		}
	}
}

#else
int dnn_conv_direct_applies(const conv_geom *g)
{
	(void)g;
	return 0;
}
size_t dnn_conv_direct_work(const conv_geom *g)
{
	(void)g;
	return 0;
}
int dnn_conv_direct_set_avx512(int on)
{
	(void)on;
	return 0;
}
int dnn_conv_direct_avx512(void) { return 0; }
void dnn_conv_direct_forward(float *y, const float *x, const float *w, const float *bias, const conv_geom *g, float beta,
			     float *xp)
{
	(void)y, (void)x, (void)w, (void)bias, (void)g, (void)beta, (void)xp;
	/* Unreachable: dnn_conv_direct_applies() is 0 on this CPU. */
	dnn_worker_error("conv2d: the direct path needs an x86-64 CPU with AVX2 and FMA");
}
#endif
