/* unit_dropout — the dropout kernels (codelets/dropout.h) against their definition:
 *  - eval and p = 0 are the identity;
 *  - in training a fraction p of the elements is dropped (binomial bound), kept ones are x/(1-p);
 *  - the mask is a function of (seed, step, sample position, element) only: a chunk computed at
 *    sample0 = s gives the rows s.. of a whole-batch run (chunk invariance), and another step or
 *    seed gives another mask;
 *  - backward is dy * mask / (1-p), overwrite and accumulate, with the forward's mask. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dropout.h"
#include "test_util.h"

#define NS 16
#define PER 1000

int main(void)
{
	static float x[NS * PER], y[NS * PER], y2[NS * PER], dy[NS * PER], dx[NS * PER];
	test_rng_seed(7);
	for (int i = 0; i < NS * PER; i++)
		x[i] = test_rng_uniform(0.5f, 2.0f); /* never 0: a dropped element is told by y == 0 */
	dnn_dropout_args a = {.per_sample = PER, .N = NS, .train = 0, .p = 0.3f, .seed = 42, .step = 5, .sample0 = 0};

	/* eval, and p = 0 in training: y = x exactly */
	dnn_dropout_forward_cpu(y, x, &a);
	TEST_CHECK(memcmp(x, y, sizeof(x)) == 0, "eval mode is not the identity");
	a.train = 1, a.p = 0.0f;
	dnn_dropout_forward_cpu(y, x, &a);
	TEST_CHECK(memcmp(x, y, sizeof(x)) == 0, "p = 0 is not the identity");

	/* training: the dropped fraction and the scale of the kept elements */
	const float rates[] = {0.1f, 0.5f, 0.9f};
	for (int r = 0; r < 3; r++) {
		a.p = rates[r];
		dnn_dropout_forward_cpu(y, x, &a);
		long dropped = 0, bad_scale = 0;
		for (int i = 0; i < NS * PER; i++) {
			if (y[i] == 0.0f)
				dropped++;
			else if (fabsf(y[i] - x[i] / (1.0f - a.p)) > 1e-6f * fabsf(y[i]))
				bad_scale++;
		}
		const double n = NS * PER, frac = dropped / n, sd = sqrt(a.p * (1 - a.p) / n);
		printf("p=%.1f: dropped %.4f of %d elements (5 sd = %.4f)\n", a.p, frac, NS * PER, 5 * sd);
		TEST_CHECK(fabs(frac - a.p) < 5 * sd, "p=%.1f: dropped fraction %.4f", a.p, frac);
		TEST_CHECK(bad_scale == 0, "p=%.1f: %ld kept elements not scaled by 1/(1-p)", a.p, bad_scale);
	}

	/* chunk invariance: samples [5, 12) as their own chunk give the same rows */
	a.p = 0.5f;
	dnn_dropout_forward_cpu(y, x, &a);
	dnn_dropout_args chunk = a;
	chunk.N = 7, chunk.sample0 = 5;
	dnn_dropout_forward_cpu(y2, x + 5 * PER, &chunk);
	TEST_CHECK(memcmp(y2, y + 5 * PER, sizeof(float) * 7 * PER) == 0, "a chunk at sample0=5 differs from the batch rows");
	/* masks differ between samples, steps and seeds */
	int same_rows = 1;
	for (int e = 0; e < PER; e++)
		same_rows &= (y[e] == 0.0f) == (y[PER + e] == 0.0f);
	TEST_CHECK(!same_rows, "samples 0 and 1 have the same mask");
	dnn_dropout_args other = a;
	other.step = 6;
	dnn_dropout_forward_cpu(y2, x, &other);
	TEST_CHECK(memcmp(y, y2, sizeof(y)) != 0, "step 6 has step 5's mask");
	other = a, other.seed = 43;
	dnn_dropout_forward_cpu(y2, x, &other);
	TEST_CHECK(memcmp(y, y2, sizeof(y)) != 0, "seed 43 has seed 42's mask");

	/* backward: dx = dy * mask / (1 - p); then += */
	for (int i = 0; i < NS * PER; i++)
		dy[i] = test_rng_uniform(-1.0f, 1.0f);
	a.accumulate_dx = 0;
	dnn_dropout_backward_cpu(dx, dy, &a);
	long bad = 0;
	for (int i = 0; i < NS * PER; i++) {
		const float want = y[i] == 0.0f ? 0.0f : dy[i] * 2.0f;
		bad += fabsf(dx[i] - want) > 1e-6f;
	}
	TEST_CHECK(bad == 0, "backward: %ld elements differ from dy * mask / (1-p)", bad);
	a.accumulate_dx = 1;
	dnn_dropout_backward_cpu(dx, dy, &a);
	bad = 0;
	for (int i = 0; i < NS * PER; i++) {
		const float want = y[i] == 0.0f ? 0.0f : dy[i] * 4.0f;
		bad += fabsf(dx[i] - want) > 1e-6f;
	}
	TEST_CHECK(bad == 0, "backward accumulate: %ld elements differ", bad);
	/* eval backward passes dy through */
	a.train = 0, a.accumulate_dx = 0;
	dnn_dropout_backward_cpu(dx, dy, &a);
	TEST_CHECK(memcmp(dx, dy, sizeof(dx)) == 0, "eval backward is not the identity");
	return test_report("unit_dropout");
}
