/* winotrans_harness.c — F(2x2)'s bf16 passes, the former transforms and the new ones timed side by side in one process
 * (docs/studies/2026-12-07-winotrans-bf16.md), with a hash of each result to show the same bits:
 *   fwd rows, fwd groups   the forward with a bf16 y: output_row_y_bf16 per tile row (dnn_wino_set_ygroups(0)) or
 *                          output_rows_y_bf16 32 tiles at a time
 *   wgr rows, wgr groups   the weight gradient: D's pairs per tile row (grad_row_pairs, dnn_wino_set_dgroups(0)) or
 *                          32 tiles at a time (grad_rows_pairs)
 * x is read in bf16 as in a --precision bf16 step (where the split can), dy in fp32. Each round runs both variants in rotated
 * order, with a 32 MiB buffer written between calls (x, dy cold, as in a training step); thread CPU time; prints per
 * variant the median and the best over the rounds.
 * Build (from the repository root, after the library's build):
 *   gcc -O2 -std=gnu11 -Icodelets -Iutil -Iinclude -Igraph docs/studies/2026-12-07-winotrans-bf16/winotrans_harness.c \
 *       -o /tmp/winotrans_harness $(sed "s|\.\./libdnn.a|build/libdnn.a|" build/bench/CMakeFiles/dnn_op_bench.dir/linkLibs.rsp) -lstdc++
 * Run: /tmp/winotrans_harness ROUNDS N C H K [ONLY]   (3x3, pad 1; N the task's images; ONLY: only the variant whose
 * name starts with it, for a profile under perf record) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conv2d_winograd.h"
#include "gemm_bf16.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static unsigned long long hash(const float *p, size_t n)
{
	unsigned long long h = 1469598103934665603ULL;
	const unsigned char *b = (const unsigned char *)p;
	for (size_t i = 0; i < n * 4; i++)
		h = (h ^ b[i]) * 1099511628211ULL;
	return h;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

enum { V_FROWS, V_FGROUPS, V_ROWS, V_GROUPS, NV };
static const char *names[NV] = {"fwd rows", "fwd groups", "wgr rows", "wgr groups"};

int main(int argc, char **argv)
{
	if (argc != 6 && argc != 7) {
		fprintf(stderr, "usage: %s ROUNDS N C H K [ONLY]\n", argv[0]);
		return 2;
	}
	const int rounds = atoi(argv[1]), N = atoi(argv[2]), C = atoi(argv[3]), H = atoi(argv[4]), K = atoi(argv[5]);
	if (rounds < 1 || N < 1 || C < 1 || H < 3 || H > 4096 || K < 1) {
		fprintf(stderr, "%s: bad arguments\n", argv[0]);
		return 2;
	}
	dnn_wino_shape s = {.N = N, .C = C, .H = H, .W = H, .K = K, .P = H, .Q = H, .pad_h = 1, .pad_w = 1, .bf16 = 1};
	const size_t nx = (size_t)N * C * H * H, ny = (size_t)N * K * H * H, nw = (size_t)K * C * 9;
	float *x = malloc(nx * 4), *dy = malloc(ny * 4), *dw = malloc(nw * 4), *w = malloc(nw * 4);
	uint16_t *yh = malloc(ny * 2);
	uint16_t *xh = malloc(nx * 2);
	s.x_bf16 = 1;
	const int direct = dnn_wino_reads_bf16(&s);
	s.x_bf16 = direct;
	size_t wk = dnn_wino_filter_work(&s), wf = dnn_wino_work(&s);
	wk = wk > wf ? wk : wf;
	float *work = aligned_alloc(64, (wk * 4 + 63) / 64 * 64);
	const size_t nev = 8u << 20;
	float *ev = calloc(nev, 4);
	double *t = malloc(sizeof(double) * NV * rounds);
	if (!x || !dy || !dw || !w || !yh || !xh || !work || !ev || !t) {
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
	if (!direct)
		dnn_bf16_widen(x, xh, nx);
	const float *in = direct ? (const float *)(void *)xh : x;
	unsigned long long h[NV] = {0};
	for (int r = 0; r < rounds; r++)
		for (int k = 0; k < NV; k++) {
			const int v = (k + r) % NV;
			if (argc == 7 && strncmp(names[v], argv[6], strlen(argv[6])) != 0)
				continue;
			for (size_t i = 0; i < nev; i += 16)
				ev[i] += 1.0f;
			dnn_wino_set_dgroups(v == V_GROUPS);
			dnn_wino_set_ygroups(v == V_FGROUPS);
			memset(dw, 0, nw * 4);
			double t0 = now();
			if (v >= V_ROWS) {
				dnn_wino_backward_filter(dw, in, dy, &s, work);
			} else {
				s.y_bf16 = 1;
				dnn_wino_forward((float *)(void *)yh, in, w, &s, 0.0f, work);
				s.y_bf16 = 0;
			}
			t[v * rounds + r] = now() - t0;
			h[v] = v >= V_ROWS ? hash(dw, nw) : hash((const float *)(void *)yh, ny / 2);
		}
	dnn_wino_set_dgroups(1);
	dnn_wino_set_ygroups(1);
	printf("# N%d C%d %dx%d K%d, %d rounds, bf16 x read in the split: %s\n", N, C, H, H, K, rounds,
	       direct ? "yes" : "no (widened)");
	for (int v = 0; v < NV; v++) {
		if (argc == 7 && strncmp(names[v], argv[6], strlen(argv[6])) != 0)
			continue;
		qsort(t + v * rounds, rounds, sizeof(double), cmpd);
		printf("C%d_%dx%d_K%d,%s,%.4f,%.4f,%016llx\n", C, H, H, K, names[v], t[v * rounds + rounds / 2] * 1e3,
		       t[v * rounds] * 1e3, h[v]);
	}
	return 0;
}
