/* rule_harness.c — the two bf16 passes ONEDNN_CONV_RULE re-decides, F(2x2) Winograd against oneDNN's conv, through the
 * library's own entry points (dnn_conv2d_forward_cpu / dnn_conv2d_backward_data_cpu with a->algo WINOGRAD or ONEDNN),
 * as a --precision bf16 step runs them: the forward reads a bf16 x and writes a bf16 y, backward data reads fp32 dy
 * and writes fp32 dx. Unlike dnn_op_bench (best of warm repeats), each call finds its inputs cold: a 32 MiB buffer is
 * written between calls, as in a training step where the tensors were last touched by other layers. Each round runs
 * the four variants in rotated order; thread CPU time; prints per variant the median and best over the rounds
 * (docs/studies/2026-12-07-winotrans-bf16.md).
 * Build (from the repository root, after the library's build):
 *   gcc -O2 -std=gnu11 -Icodelets -Iutil -Iinclude -Igraph -isystem $HOME/.cache/starpu-anp/starpu-1.4.10-cuda1/include/starpu/1.4 \
 *       -isystem /usr/local/cuda/include -isystem /usr/lib/x86_64-linux-gnu/openmpi/include docs/studies/2026-12-07-winotrans-bf16/rule_harness.c \
 *       -o /tmp/winotrans_rule $(sed 's|\.\./libdnn.a|build/libdnn.a|; s/"//g' build/bench/CMakeFiles/dnn_op_bench.dir/linkLibs.rsp) -lstdc++
 * Run: /tmp/winotrans_rule ROUNDS N C H K   (3x3, stride 1, pad 1) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conv2d.h"
#include "gemm_bf16.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

enum { V_FW, V_FO, V_DW, V_DO, NV };
static const char *names[NV] = {"fwd winograd", "fwd onednn", "dat winograd", "dat onednn"};

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: %s ROUNDS N C H K\n", argv[0]);
		return 2;
	}
	const int rounds = atoi(argv[1]), N = atoi(argv[2]), C = atoi(argv[3]), H = atoi(argv[4]), K = atoi(argv[5]);
	if (rounds < 1 || N < 1 || C < 1 || H < 3 || H > 4096 || K < 1) {
		fprintf(stderr, "%s: bad arguments\n", argv[0]);
		return 2;
	}
	dnn_conv2d_args a = {.N = N, .C = C, .H = H, .W = H, .K = K, .R = 3, .S = 3, .stride = 1, .pad = 1,
			     .dilation = 1, .bf16 = 1};
	if (dnn_conv2d_args_finish(&a) != 0) {
		fprintf(stderr, "%s: bad shape\n", argv[0]);
		return 2;
	}
	const size_t nx = (size_t)N * C * H * H, ny = (size_t)N * K * a.P * a.Q, nw = (size_t)K * C * 9;
	float *x = malloc(nx * 4), *dx = malloc(nx * 4), *dy = malloc(ny * 4), *w = malloc(nw * 4);
	uint16_t *xh = malloc(nx * 2), *yh = malloc(ny * 2);
	const size_t nev = 8u << 20;
	float *ev = calloc(nev, 4);
	double *t = malloc(sizeof(double) * NV * rounds);
	if (!x || !dx || !dy || !w || !xh || !yh || !ev || !t) {
		fprintf(stderr, "%s: out of memory\n", argv[0]);
		return 1;
	}
	srand(1);
	for (size_t i = 0; i < nx; i++) /* a relu's output: half zeros */
		x[i] = rand() % 2 ? (float)rand() / RAND_MAX : 0.0f;
	for (size_t i = 0; i < ny; i++)
		dy[i] = (float)rand() / RAND_MAX - 0.5f;
	for (size_t i = 0; i < nw; i++)
		w[i] = (float)rand() / RAND_MAX - 0.5f;
	dnn_bf16_convert(xh, x, nx);
	for (int r = 0; r < rounds; r++)
		for (int k = 0; k < NV; k++) {
			const int v = (k + r) % NV;
			for (size_t i = 0; i < nev; i += 16)
				ev[i] += 1.0f;
			dnn_conv2d_args b = a;
			b.algo = v == V_FW || v == V_DW ? DNN_CONV_ALGO_WINOGRAD : DNN_CONV_ALGO_ONEDNN;
			double t0 = now();
			if (v <= V_FO) {
				b.x_bf16 = 1, b.y_bf16 = 1;
				dnn_conv2d_forward_cpu((float *)(void *)yh, (const float *)(void *)xh, w, &b);
			} else {
				dnn_conv2d_backward_data_cpu(dx, dy, w, &b);
			}
			t[v * rounds + r] = now() - t0;
		}
	printf("# N%d C%d %dx%d K%d, %d rounds, winograd forward F(%d), backward data F(%d)\n", N, C, H, H, K, rounds,
	       dnn_conv2d_cpu_winograd_tile(&(dnn_conv2d_args){.N = N, .C = C, .H = H, .W = H, .K = K, .R = 3, .S = 3,
							      .stride = 1, .pad = 1, .dilation = 1, .P = a.P,
							      .Q = a.Q, .algo = DNN_CONV_ALGO_WINOGRAD, .bf16 = 1},
					    0),
	       dnn_conv2d_cpu_winograd_tile(&(dnn_conv2d_args){.N = N, .C = C, .H = H, .W = H, .K = K, .R = 3, .S = 3,
							      .stride = 1, .pad = 1, .dilation = 1, .P = a.P,
							      .Q = a.Q, .algo = DNN_CONV_ALGO_WINOGRAD, .bf16 = 1},
					    1));
	for (int v = 0; v < NV; v++) {
		qsort(t + v * rounds, rounds, sizeof(double), cmpd);
		printf("C%d_%dx%d_K%d,%s,%.4f,%.4f\n", C, H, H, K, names[v], t[v * rounds + rounds / 2] * 1e3,
		       t[v * rounds] * 1e3);
	}
	return 0;
}
