/* bn_fuse_kernels.c — the kernels of one conv A -> batchnorm -> relu -> conv B chain, unfused (DNN_FUSE=1's tasks)
 * against fused (DNN_FUSE=3's, codelets/conv2d_bnfuse.h), on one core: per pass, the best of R rounds of the
 * thread's CPU time (CLOCK_THREAD_CPUTIME_ID, which other processes on the core inflate far less than the wall
 * clock), the two variants alternating call by call.
 *
 *   dnn_bn_fuse_kernels [ROUNDS]     ROUNDS [30]
 * Each shape runs twice: `hot` (the tensors stay in the caches from call to call, as when one worker runs a chain's
 * tasks back to back) and `cold` (64 MiB are written, untimed, before every task's kernels, so each task reads
 * its inputs from memory, as in a step where other chunks' tasks ran in between).
 * Shapes: ResNet-20's three stages on a chunk of 16 images (a batch of 64 in 4 chunks): C = K = 16 at 32x32,
 * 32 at 16x16, 64 at 8x8, and ResNet-8's first (16 at 28x28). Output: CSV `shape,pass,variant,best_ms`
 * (shape ending in hot or cold), then `shape,pass,ratio,fused/unfused`. Passes:
 *   fwd  unfused: conv A, batchnorm+relu forward (y -> z), conv B on z;  fused: conv A + statistics, conv B
 *        normalising y in its input copy;
 *   bwd  unfused: batchnorm+relu backward (mask from z), conv B's weight gradient on z;  fused: the same backward
 *        with the mask recomputed from y, conv B's weight gradient normalising y in its input copy.
 * (conv B's backward data and conv A's backward are the same tasks in both.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batchnorm.h"
#include "conv2d.h"
#include "conv2d_bnfuse.h"

static double thread_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static float *falloc(size_t n, unsigned *seed)
{
	float *p = malloc(n * sizeof(float));
	if (!p) {
		fprintf(stderr, "error: out of memory for %zu floats\n", n);
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		p[i] = (float)rand_r(seed) / RAND_MAX - 0.5f;
	return p;
}

static float *evict_buf;
#define EVICT_FLOATS ((size_t)16 << 20) // 64 MiB: twice this machine's L3

/* Pushes the tensors out of the caches (cold runs); untimed. */
static void evict(int cold)
{
	if (!cold)
		return;
	for (size_t i = 0; i < EVICT_FLOATS; i += 16)
		evict_buf[i] += 1.0f;
}

static void run_shape(int N, int C, int H, int rounds, int cold)
{
	unsigned seed = 1;
	dnn_conv2d_args c = {.N = N, .C = C, .H = H, .W = H, .K = C, .R = 3, .S = 3, .stride = 1, .pad = 1, .dilation = 1};
	if (dnn_conv2d_args_finish(&c) != 0) {
		fprintf(stderr, "error: bad shape\n");
		exit(1);
	}
	const size_t nx = (size_t)N * C * H * H, nw = (size_t)C * C * 9;
	float *x = falloc(nx, &seed), *wa = falloc(nw, &seed), *wb = falloc(nw, &seed), *y = falloc(nx, &seed);
	float *z = falloc(nx, &seed), *yb = falloc(nx, &seed), *dyb = falloc(nx, &seed), *dz = falloc(nx, &seed);
	float *dy = falloc(nx, &seed), *dw = falloc(nw, &seed), *gamma = falloc(C, &seed), *beta = falloc(C, &seed);
	float *saved = falloc(3 * C, &seed), *dg = falloc(C, &seed), *db = falloc(C, &seed);
	for (int i = 0; i < C; i++)
		gamma[i] += 1.0f;
	dnn_batchnorm_args bn = {.N = N, .C = C, .HW = H * H, .eps = 1e-5f, .momentum = 0.1f, .relu = 1};
	dnn_conv2d_bn_args fa = {.conv = c, .out_bn = bn, .stats = 1}, fb = {.conv = c, .in_bn = bn, .apply = 1};
	double best[2][2] = {{1e30, 1e30}, {1e30, 1e30}}; // [pass][variant]
	for (int r = 0; r < rounds + 1; r++) /* round 0 warms the scratch and the caches' first touch */
		for (int v = 0; v < 2; v++) {
			double t[2] = {0, 0}, t0;
			/* each task's kernels timed on their own, the caches emptied before each in cold runs */
#define TASK(P, CALL) (evict(cold), t0 = thread_ms(), (CALL), t[P] += thread_ms() - t0)
			if (v == 0) {
				TASK(0, dnn_conv2d_forward_cpu(y, x, wa, &c));
				TASK(0, dnn_batchnorm_forward_train_cpu(z, saved, y, gamma, beta, &bn));
				TASK(0, dnn_conv2d_forward_cpu(yb, z, wb, &c));
				TASK(1, dnn_batchnorm_relu_backward_cpu(dy, dg, db, y, gamma, saved, dz, z, &bn));
				TASK(1, dnn_conv2d_backward_filter_cpu(dw, z, dyb, &c));
			} else {
				TASK(0, dnn_conv2d_bn_forward_cpu(y, saved, x, wa, NULL, NULL, NULL, &fa));
				TASK(0, dnn_conv2d_bn_forward_cpu(yb, NULL, y, wb, saved, gamma, beta, &fb));
				TASK(1, dnn_batchnorm_relu_backward_recompute_cpu(dy, dg, db, y, gamma, beta, saved, dz, &bn));
				TASK(1, dnn_conv2d_bn_backward_filter_cpu(dw, y, dyb, saved, gamma, beta, &fb));
			}
#undef TASK
			if (r > 0)
				for (int p = 0; p < 2; p++)
					best[p][v] = t[p] < best[p][v] ? t[p] : best[p][v];
		}
	static const char *const pass[2] = {"fwd", "bwd"}, *const var[2] = {"unfused", "fused"};
	for (int p = 0; p < 2; p++) {
		for (int v = 0; v < 2; v++)
			printf("N%d C%d %dx%d %s,%s,%s,%.3f\n", N, C, H, H, cold ? "cold" : "hot", pass[p], var[v],
			       best[p][v]);
		printf("N%d C%d %dx%d %s,%s,ratio,%.3f\n", N, C, H, H, cold ? "cold" : "hot", pass[p],
		       best[p][1] / best[p][0]);
	}
	free(x), free(wa), free(wb), free(y), free(z), free(yb), free(dyb), free(dz), free(dy), free(dw), free(gamma);
	free(beta), free(saved), free(dg), free(db);
}

int main(int argc, char **argv)
{
	int rounds = 30;
	if (argc > 2 || (argc == 2 && (rounds = atoi(argv[1])) < 1)) {
		fprintf(stderr, "usage: dnn_bn_fuse_kernels [ROUNDS]  (ROUNDS a positive integer, default 30)\n");
		return 2;
	}
	evict_buf = calloc(EVICT_FLOATS, sizeof(float));
	if (!evict_buf) {
		fprintf(stderr, "error: out of memory for the 64 MiB eviction buffer\n");
		return 1;
	}
	printf("shape,pass,variant,best_ms\n");
	for (int cold = 0; cold < 2; cold++) {
		run_shape(16, 16, 32, rounds, cold);
		run_shape(16, 32, 16, rounds, cold);
		run_shape(16, 64, 8, rounds, cold);
		run_shape(16, 16, 28, rounds, cold);
	}
	free(evict_buf);
	return 0;
}
