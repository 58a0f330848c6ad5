/* unit_schedule — the cosine learning-rate schedule (runtime/schedule.h): lr at step 0, lr/2 at
 * total/2, 0 at total, never increasing, and constant when the schedule is off. Also the epoch
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
