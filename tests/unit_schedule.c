/* unit_schedule — the cosine learning-rate schedule (runtime/schedule.h): lr at step 0, lr/2 at
 * total/2, 0 at total, never increasing, and constant when the schedule is off; the linear
 * warm-up composed with it, and the linear scaling rule. Also the epoch
 * permutation: a permutation, the same for the same (seed, epoch), another for another epoch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "schedule.h"

static int fails;
#define CHECK(cond, ...)                                   \
	do {                                               \
		if (!(cond)) {                             \
			fprintf(stderr, "FAIL: " __VA_ARGS__); \
			fprintf(stderr, "\n");             \
			fails++;                           \
		}                                          \
	} while (0)

int main(void)
{
	const float lr = 0.05f;
	const long total = 1000;
	CHECK(dnn_scheduled_lr(lr, 1, 0, total) == lr, "cosine at step 0: %g, want %g", dnn_scheduled_lr(lr, 1, 0, total), lr);
	CHECK(fabsf(dnn_scheduled_lr(lr, 1, total / 2, total) - lr / 2) <= 1e-7f, "cosine at total/2: %g, want %g",
	      dnn_scheduled_lr(lr, 1, total / 2, total), lr / 2);
	CHECK(fabsf(dnn_scheduled_lr(lr, 1, total, total)) <= 1e-9f, "cosine at total: %g, want 0",
	      dnn_scheduled_lr(lr, 1, total, total));
	CHECK(fabsf(dnn_scheduled_lr(lr, 1, total / 4, total) - (float)(0.5 * lr * (1 + cos(M_PI / 4)))) <= 1e-7f,
	      "cosine at total/4");
	for (long s = 1; s <= total; s++)
		CHECK(dnn_scheduled_lr(lr, 1, s, total) <= dnn_scheduled_lr(lr, 1, s - 1, total), "increases at step %ld", s);
	for (long s = 0; s <= total; s += 7)
		CHECK(dnn_scheduled_lr(lr, 0, s, total) == lr, "constant schedule changes at step %ld", s);
	CHECK(dnn_scheduled_lr(lr, 1, 5, 0) == lr, "cosine with no total must be constant");

	/* Warm-up then cosine, against the formula written out here: peak*(s+1)/W for s < W, then
	 * 0.5*peak*(1 + cos(pi*(s-W)/(T-W))). */
	{
		const float peak = 0.4f;
		const long T = 1000, W = 100;
		double want[4][2] = {{0, peak * 1.0 / W}, {W / 2 - 1, peak * 0.5}, {W - 1, peak}, {T - 1, 0}};
		want[3][1] = 0.5 * peak * (1 + cos(M_PI * (double)(T - 1 - W) / (double)(T - W)));
		for (int k = 0; k < 4; k++) {
			float got = dnn_warm_lr(peak, 1, (long)want[k][0], T, W);
			CHECK(fabs(got - want[k][1]) <= 1e-7 * peak, "warm-up+cosine at step %ld: %.9g, want %.9g",
			      (long)want[k][0], got, want[k][1]);
		}
		CHECK(dnn_warm_lr(peak, 1, W, T, W) == peak, "cosine after warm-up starts at the peak: %g",
		      dnn_warm_lr(peak, 1, W, T, W));
		CHECK(dnn_warm_lr(peak, 0, T - 1, T, W) == peak, "warm-up+constant ends at the peak");
		CHECK(fabsf(dnn_warm_lr(peak, 0, 24, T, W) - peak * 0.25f) <= 1e-7f, "warm-up+constant at step 24");
		for (long s = 1; s < W; s++)
			CHECK(dnn_warm_lr(peak, 1, s, T, W) > dnn_warm_lr(peak, 1, s - 1, T, W), "warm-up not rising at %ld", s);
		for (long s = 0; s <= T; s += 13)
			CHECK(dnn_warm_lr(peak, 1, s, T, 0) == dnn_scheduled_lr(peak, 1, s, T), "no warm-up differs at %ld", s);
		CHECK(dnn_scaled_lr(0.1f, 1024, 256) == 0.4f, "scaling rule: 0.1 at 256 -> %g at 1024, want 0.4",
		      dnn_scaled_lr(0.1f, 1024, 256));
		CHECK(dnn_scaled_lr(0.1f, 1024, 0) == 0.1f, "no reference batch must not scale");
	}

	enum { N = 257 };
	int a[N], b[N], c[N], seen[N] = {0};
	dnn_epoch_permutation(a, N, 42, 3);
	dnn_epoch_permutation(b, N, 42, 3);
	dnn_epoch_permutation(c, N, 42, 4);
	int same = 1, differs = 0;
	for (int i = 0; i < N; i++) {
		CHECK(a[i] >= 0 && a[i] < N, "index %d out of range", a[i]);
		if (a[i] >= 0 && a[i] < N)
			seen[a[i]]++;
		same &= a[i] == b[i];
		differs |= a[i] != c[i];
	}
	for (int i = 0; i < N; i++)
		CHECK(seen[i] == 1, "sample %d appears %d times", i, seen[i]);
	CHECK(same, "the same (seed, epoch) gives another order");
	CHECK(differs, "another epoch gives the same order");
	if (fails) {
		fprintf(stderr, "%d check(s) failed\n", fails);
		return 1;
	}
	printf("unit_schedule: all checks passed\n");
	return 0;
}
