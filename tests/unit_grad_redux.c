/* unit_grad_redux — the foundation's vertical slice: many tasks accumulate into one gradient
 * handle in STARPU_REDUX mode; StarPU reduces the per-worker copies with cl_grad_zero /
 * cl_grad_accum. The result must equal the double-precision sum of all contributions within the
 * float32 summation bound: the order of the additions depends on the schedule, so each element
 * may differ from the exact sum by up to (n - 1) * FLT_EPSILON * sum of |terms| (Higham's bound for
 * recursive summation). A wrong reduction (a lost or doubled contribution, a missing zero) is off
 * by a whole term, far above that bound. */
#include <float.h>
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>

#include "grad_accum.h"
#include <string.h>
#include "test_util.h"

#define NTASKS 400
#define N 1537 /* odd length: no vector-width luck */

/* Per element: |got - ref| <= (nterms - 1) * FLT_EPSILON * absref. */
static void check_sum(const char *what, const float *got, const double *ref, const double *absref, int nterms)
{
	int bad = 0;
	for (int i = 0; i < N && bad < 5; i++) {
		double bound = (nterms - 1) * (double)FLT_EPSILON * absref[i];
		if (!(fabs((double)got[i] - ref[i]) <= bound)) {
			TEST_CHECK(0, "%s [%d]: got %.8g want %.8g (|diff| %.3g > bound %.3g)", what, i, (double)got[i],
				   ref[i], fabs((double)got[i] - ref[i]), bound);
			bad++;
		}
	}
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	test_rng_seed(42);

	float *grad = malloc(N * sizeof(float));
	float *contrib = malloc((size_t)NTASKS * N * sizeof(float));
	double *ref = calloc(N, sizeof(double)), *absref = calloc(N, sizeof(double));
	for (int i = 0; i < N; i++)
		grad[i] = test_rng_uniform(-1, 1); /* REDUX adds to the existing value */
	for (int i = 0; i < N; i++)
		ref[i] = grad[i], absref[i] = fabs(grad[i]);
	test_fill_uniform(contrib, (size_t)NTASKS * N, -1, 1);
	for (int t = 0; t < NTASKS; t++)
		for (int i = 0; i < N; i++) {
			ref[i] += contrib[(size_t)t * N + i];
			absref[i] += fabs(contrib[(size_t)t * N + i]);
		}

	starpu_data_handle_t hgrad, hcontrib[NTASKS];
	starpu_vector_data_register(&hgrad, STARPU_MAIN_RAM, (uintptr_t)grad, N, sizeof(float));
	dnn_grad_set_redux(hgrad);
	for (int t = 0; t < NTASKS; t++) {
		starpu_vector_data_register(&hcontrib[t], STARPU_MAIN_RAM,
					    (uintptr_t)(contrib + (size_t)t * N), N, sizeof(float));
		dnn_insert_grad_accum(hgrad, STARPU_REDUX, hcontrib[t]);
	}
	/* Acquiring the handle forces the reduction of the per-worker copies. */
	starpu_data_acquire(hgrad, STARPU_R);
	check_sum("redux sum", grad, ref, absref, NTASKS + 1);
	starpu_data_release(hgrad);

	/* Second round on the same handle, after a zero task: the redux must restart from zero. */
	dnn_insert_grad_zero(hgrad);
	for (int t = 0; t < NTASKS / 2; t++)
		dnn_insert_grad_accum(hgrad, STARPU_REDUX, hcontrib[t]);
	starpu_data_acquire(hgrad, STARPU_R);
	for (int i = 0; i < N; i++) {
		ref[i] = 0, absref[i] = 0;
		for (int t = 0; t < NTASKS / 2; t++) {
			ref[i] += contrib[(size_t)t * N + i];
			absref[i] += fabs(contrib[(size_t)t * N + i]);
		}
	}
	check_sum("redux after zero", grad, ref, absref, NTASKS / 2);
	starpu_data_release(hgrad);

	/* The scaled add of the async lookahead: grad += -2.5 * contrib[0], exact per element
	 * (one rounding of a product and one of a sum). */
	starpu_data_acquire(hgrad, STARPU_R);
	float *before = malloc(N * sizeof(float));
	memcpy(before, grad, N * sizeof(float));
	starpu_data_release(hgrad);
	dnn_insert_grad_axpy(hgrad, -2.5f, hcontrib[0]);
	starpu_data_acquire(hgrad, STARPU_R);
	for (int i = 0, bad = 0; i < N && bad < 5; i++) {
		float want = before[i] + -2.5f * contrib[i];
		if (grad[i] != want) {
			TEST_CHECK(0, "grad_axpy [%d]: got %.8g want %.8g", i, (double)grad[i], (double)want);
			bad++;
		}
	}
	starpu_data_release(hgrad);
	free(before);

	/* The reduction must really have run on several workers' copies when there are several. */
	printf("workers: %u (cpu %u, cuda %u)\n", starpu_worker_get_count(), starpu_cpu_worker_get_count(),
	       starpu_cuda_worker_get_count());

	for (int t = 0; t < NTASKS; t++)
		starpu_data_unregister(hcontrib[t]);
	starpu_data_unregister(hgrad);
	test_starpu_shutdown();
	free(grad);
	free(contrib);
	free(ref);
	free(absref);
	return test_report("unit_grad_redux");
}
