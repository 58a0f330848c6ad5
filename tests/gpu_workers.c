/* gpu_workers — the CUDA worker count StarPU starts with, and a test that one starts where a GPU
 * exists. Prints one line
 *   workers: cuda=N cpu=M total=T
 * (starpu_cuda_worker_get_count(), starpu_cpu_worker_get_count()) and one line per worker with
 * StarPU's name for it. Exit 0 with at least one CUDA worker (and cuBLAS/cuDNN set up on it, which
 * dnn_runtime_init does), 77 when starpu_cuda_worker_get_count() is 0, 1 on an error.
 * scripts/gpu-check.sh and the GPU script tests (tests/scripts/gpu_*.sh) read that line to decide
 * whether a CUDA worker exists; gpu-check.sh treats 77 as a failure on the GPU machine. */
#include <starpu.h>
#include <stdio.h>

#include "test_util.h"

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	unsigned ncuda = starpu_cuda_worker_get_count(), ncpu = starpu_cpu_worker_get_count();
	unsigned total = starpu_worker_get_count();
	printf("workers: cuda=%u cpu=%u total=%u\n", ncuda, ncpu, total);
	for (unsigned w = 0; w < total; w++) {
		char name[128];
		starpu_worker_get_name((int)w, name, sizeof name);
		printf("worker %u: %s\n", w, name);
	}
	fflush(stdout);
	test_starpu_shutdown();
#ifndef DNN_HAVE_CUDA
	printf("SKIP: built without CUDA\n");
	return TEST_SKIP;
#endif
	if (ncuda == 0) {
		printf("SKIP: starpu_cuda_worker_get_count() = 0\n");
		return TEST_SKIP;
	}
	return 0;
}
