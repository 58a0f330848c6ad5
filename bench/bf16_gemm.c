/* bf16_gemm.c — one core: fp32 sgemm (OpenBLAS) against the bf16 GEMMs on offer, on the GEMM shapes of
 * gpt-nano's and GPT-2 124M's dense, lm_head and attention layers (docs/op_bench.md, "bf16 GEMM").
 *
 *   dnn_bf16_gemm [--reps R] [--shape M,N,K,tA,tB]...
 *
 * Columns: sgemm (cblas_sgemm, the fp32 path), ours (dnn_gemm_bf16, what --precision bf16 runs:
 * fp32 in, rounded into bf16 copies per call, then oneDNN's matmul), onednn (oneDNN's matmul alone,
 * its bf16 inputs converted beforehand and not timed: the best case), and whether OpenBLAS exports
 * cblas_sbgemm at all. GFLOP/s = 2MNK over the best of R samples after one warm-up call; a sample
 * times enough calls to last about 20 ms. The first try at "ours" (a vdpbf16ps kernel of our own,
 * commit "bf16 GEMM, first try") is in docs/op_bench.md's table. */
#include <cblas.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_kernels.h"
#include "gemm_bf16.h"

#ifdef DNN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

void openblas_set_num_threads(int);

typedef struct {
	const char *what;
	int M, N, K, tA, tB;
} shape;

/* y = x w^T: M = tokens, K = C, N = OUT (tB = 1); dx = dy w: (M, IN, OUT); dw = dy^T x: (OUT, IN, M, tA = 1) */
static const shape defaults[] = {
	{"nano qkv fwd", 2048, 384, 128, 0, 1},        {"nano proj fwd", 2048, 128, 128, 0, 1},
	{"nano fc fwd", 2048, 512, 128, 0, 1},         {"nano mlp fwd", 2048, 128, 512, 0, 1},
	{"nano lm_head fwd", 2048, 256, 128, 0, 1},    {"nano qkv bwd data", 2048, 128, 384, 0, 0},
	{"nano qkv bwd weight", 384, 128, 2048, 1, 0}, {"nano fc bwd weight", 512, 128, 2048, 1, 0},
	{"nano att S=qk^T", 64, 64, 32, 0, 1},         {"nano att PV", 64, 32, 64, 0, 0},
	{"nano att dk=dS^T q", 64, 32, 64, 1, 0},      {"gpt2 qkv fwd", 1024, 2304, 768, 0, 1},
	{"gpt2 proj fwd", 1024, 768, 768, 0, 1},       {"gpt2 fc fwd", 1024, 3072, 768, 0, 1},
	{"gpt2 mlp fwd", 1024, 768, 3072, 0, 1},       {"gpt2 lm_head fwd", 1024, 50257, 768, 0, 1},
	{"gpt2 fc bwd data", 1024, 768, 3072, 0, 0},   {"gpt2 fc bwd weight", 3072, 768, 1024, 1, 0},
	{"gpt2 att S=qk^T", 64, 64, 64, 0, 1},         {"gpt2 att PV", 64, 64, 64, 0, 0},
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Calls per timed sample so that a sample lasts about 20 ms (tiles are microseconds). */
static int inner_for(double flops)
{
	int n = (int)(2e-2 * 50e9 / flops);
	return n < 1 ? 1 : n > 10000 ? 10000 : n;
}

#define TIME_BEST(best, flops, reps, call)                                                                             \
	do {                                                                                                           \
		const int in_ = inner_for(flops);                                                                      \
		call;                                                                                                  \
		best = 1e30;                                                                                           \
		for (int r_ = 0; r_ < (reps); r_++) {                                                                  \
			const double t0_ = now();                                                                      \
			for (int i_ = 0; i_ < in_; i_++)                                                               \
				call;                                                                                  \
			const double t_ = (now() - t0_) / in_;                                                         \
			best = t_ < best ? t_ : best;                                                                  \
		}                                                                                                      \
	} while (0)

#ifdef DNN_HAVE_DNNL
/* oneDNN matmul C (M,N) f32 = A (M,K) bf16 * B (K,N) bf16, the transposes as strides; -1 on failure. */
static double onednn_time(const shape *s, const float *A, const float *B, float *C, int reps)
{
	dnnl_engine_t eng;
	dnnl_stream_t st;
	if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success ||
	    dnnl_stream_create(&st, eng, dnnl_stream_default_flags))
		return -1;
	dnnl_dims_t ad = {s->M, s->K}, bd = {s->K, s->N}, cd = {s->M, s->N};
	dnnl_dims_t as = {s->tA ? 1 : s->K, s->tA ? s->M : 1}, bs = {s->tB ? 1 : s->N, s->tB ? s->K : 1},
		    cs = {s->N, 1};
	dnnl_memory_desc_t amd, bmd, cmd;
	dnnl_memory_desc_init_by_strides(&amd, 2, ad, dnnl_bf16, as);
	dnnl_memory_desc_init_by_strides(&bmd, 2, bd, dnnl_bf16, bs);
	dnnl_memory_desc_init_by_strides(&cmd, 2, cd, dnnl_f32, cs);
	dnnl_matmul_desc_t md;
	dnnl_primitive_desc_t pd;
	dnnl_primitive_t prim;
	if (dnnl_matmul_desc_init(&md, &amd, &bmd, NULL, &cmd) != dnnl_success ||
	    dnnl_primitive_desc_create(&pd, &md, NULL, eng, NULL) != dnnl_success ||
	    dnnl_primitive_create(&prim, pd) != dnnl_success)
		return -1;
	const size_t na = (size_t)s->M * s->K, nb = (size_t)s->K * s->N;
	uint16_t *a16 = malloc(na * 2), *b16 = malloc(nb * 2);
	for (size_t i = 0; i < na; i++)
		a16[i] = dnn_f32_to_bf16(A[i]);
	for (size_t i = 0; i < nb; i++)
		b16[i] = dnn_f32_to_bf16(B[i]);
	dnnl_memory_t am, bm, cm;
	dnnl_memory_create(&am, &amd, eng, a16);
	dnnl_memory_create(&bm, &bmd, eng, b16);
	dnnl_memory_create(&cm, &cmd, eng, C);
	dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
	double best;
	TIME_BEST(best, 2.0 * s->M * s->N * s->K, reps,
		  (dnnl_primitive_execute(prim, st, 3, args), dnnl_stream_wait(st)));
	const char *impl = NULL;
	dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
	static int said = 0;
	if (!said++)
		fprintf(stderr, "onednn impl: %s\n", impl ? impl : "?");
	dnnl_memory_destroy(am), dnnl_memory_destroy(bm), dnnl_memory_destroy(cm);
	dnnl_primitive_destroy(prim), dnnl_primitive_desc_destroy(pd), dnnl_stream_destroy(st),
		dnnl_engine_destroy(eng);
	free(a16), free(b16);
	return best;
}
#endif

static void usage(FILE *f) { fprintf(f, "usage: dnn_bf16_gemm [--reps R] [--shape M,N,K,tA,tB]...\n"); }

int main(int argc, char **argv)
{
	int reps = 10, ns = 0;
	shape user[16];
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
			reps = atoi(argv[++i]);
			if (reps < 1) {
				fprintf(stderr, "dnn_bf16_gemm: --reps: expected a positive count\n");
				return 2;
			}
		} else if (!strcmp(argv[i], "--shape") && i + 1 < argc && ns < 16) {
			shape *s = &user[ns++];
			s->what = "user";
			if (sscanf(argv[++i], "%d,%d,%d,%d,%d", &s->M, &s->N, &s->K, &s->tA, &s->tB) != 5 || s->M < 1 ||
			    s->N < 1 || s->K < 1) {
				fprintf(stderr, "dnn_bf16_gemm: --shape '%s': expected M,N,K,tA,tB\n", argv[i]);
				return 2;
			}
		} else if (!strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	openblas_set_num_threads(1);
	char desc[512];
	dnn_cpu_kernels_describe(desc, sizeof(desc));
	dnn_gemm_bf16(0, 0, 1, 1, 1, 1.0f, (const float[]){1}, 1, (const float[]){1}, 1, 0.0f, (float[]){0}, 1);
	printf("# %s\n# bf16 gemm: %s\n# avx512_bf16: %s; OpenBLAS cblas_sbgemm exported: %s\n", desc,
	       dnn_gemm_bf16_impl(), dnn_cpu_has_bf16() ? "yes" : "no",
	       dlsym(RTLD_DEFAULT, "cblas_sbgemm") ? "yes" : "no");
	printf("shape,M,N,K,tA,tB,sgemm_gflops,ours_gflops,onednn_gflops,ours_over_sgemm,onednn_over_sgemm\n");
	const shape *list = ns ? user : defaults;
	const int n = ns ? ns : (int)(sizeof(defaults) / sizeof(defaults[0]));
	for (int i = 0; i < n; i++) {
		const shape *s = &list[i];
		const size_t na = (size_t)s->M * s->K, nb = (size_t)s->K * s->N, nc = (size_t)s->M * s->N;
		float *A = malloc(na * 4), *B = malloc(nb * 4), *C = malloc(nc * 4);
		if (!A || !B || !C) {
			fprintf(stderr, "dnn_bf16_gemm: out of memory\n");
			return 1;
		}
		for (size_t j = 0; j < na; j++)
			A[j] = (float)((j * 2654435761u) % 1000) / 1000.0f - 0.5f;
		for (size_t j = 0; j < nb; j++)
			B[j] = (float)((j * 40503u) % 1000) / 1000.0f - 0.5f;
		const int lda = s->tA ? s->M : s->K, ldb = s->tB ? s->K : s->N;
		const double fl = 2.0 * s->M * s->N * s->K;
		double ts, tb, to = -1;
		TIME_BEST(ts, fl, reps,
			  cblas_sgemm(CblasRowMajor, s->tA ? CblasTrans : CblasNoTrans,
				      s->tB ? CblasTrans : CblasNoTrans, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f,
				      C, s->N));
		TIME_BEST(tb, fl, reps,
			  dnn_gemm_bf16(s->tA, s->tB, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N));
#ifdef DNN_HAVE_DNNL
		to = onednn_time(s, A, B, C, reps);
#endif
		printf("%s,%d,%d,%d,%d,%d,%.1f,%.1f,%.1f,%.2f,%.2f\n", s->what, s->M, s->N, s->K, s->tA, s->tB,
		       fl / ts * 1e-9, fl / tb * 1e-9, to > 0 ? fl / to * 1e-9 : 0.0, ts / tb, to > 0 ? ts / to : 0.0);
		fflush(stdout);
		free(A), free(B), free(C);
	}
	return 0;
}
