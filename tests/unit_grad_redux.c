/* unit_grad_redux — the foundation's vertical slice: many tasks accumulate into one gradient
 * handle in STARPU_REDUX mode; StarPU reduces the per-worker copies with cl_grad_zero /
 * cl_grad_accum. The result must equal the double-precision sum of all contributions. */
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>

#include "grad_accum.h"
#include "test_util.h"

#define NTASKS 400
#define N 1537 /* odd length: no vector-width luck */

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	test_rng_seed(42);

	float *grad = malloc(N * sizeof(float));
	float *contrib = malloc((size_t)NTASKS * N * sizeof(float));
	double *ref = calloc(N, sizeof(double));
	for (int i = 0; i < N; i++)
		grad[i] = test_rng_uniform(-1, 1); /* REDUX adds to the existing value */
	for (int i = 0; i < N; i++)
		ref[i] = grad[i];
	test_fill_uniform(contrib, (size_t)NTASKS * N, -1, 1);
	for (int t = 0; t < NTASKS; t++)
		for (int i = 0; i < N; i++)
			ref[i] += contrib[(size_t)t * N + i];

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
	test_close("redux sum", grad, ref, N, 1e-5);
	starpu_data_release(hgrad);

	/* Second round on the same handle, after a zero task: the redux must restart from zero. */
	dnn_insert_grad_zero(hgrad);
	for (int t = 0; t < NTASKS / 2; t++)
		dnn_insert_grad_accum(hgrad, STARPU_REDUX, hcontrib[t]);
	starpu_data_acquire(hgrad, STARPU_R);
	for (int i = 0; i < N; i++) {
		ref[i] = 0;
		for (int t = 0; t < NTASKS / 2; t++)
			ref[i] += contrib[(size_t)t * N + i];
	}
	test_close("redux after zero", grad, ref, N, 1e-5);
	starpu_data_release(hgrad);

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
	return test_report("unit_grad_redux");
}
