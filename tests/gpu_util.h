/* gpu_util.h — what the gpu_* tests share (header only; the test glob
 * takes *_*.c files, so this is no test of its own).
 *
 * gpu_setup(): starts StarPU with DNN_CUDA_MATH=fp32 unless the caller's environment sets it
 * (cuBLAS/cuDNN without TF32, so CPU and CUDA can be compared at FP32 tolerances) and finds one
 * CUDA and one CPU worker. It returns TEST_SKIP (77) only when starpu_cuda_worker_get_count()
 * is 0 (or, with need_cpu, when no CPU worker exists, e.g. STARPU_NCPU=0), or when the build has
 * no CUDA at all; scripts/gpu-check.sh treats 77 as a failure on the GPU machine.
 *
 * gpu_task(): test_util's test_task() on one worker, which exits 1 when the task cannot be
 * inserted. */
#ifndef DNN_GPU_UTIL_H
#define DNN_GPU_UTIL_H
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static int gpu_cuda_worker = -1, gpu_cpu_worker = -1, gpu_fake, gpu_fake_ids[2];

static inline int gpu_setup(int *argc, char ***argv, const char *name, int need_cpu)
{
	setenv("DNN_CUDA_MATH", "fp32", 0);
	test_starpu_init(argc, argv);
#ifndef DNN_HAVE_CUDA
	printf("SKIP: %s: built without CUDA\n", name);
	test_starpu_shutdown();
	return TEST_SKIP;
#endif
	unsigned ncuda = starpu_cuda_worker_get_count(), ncpu = starpu_cpu_worker_get_count();
	printf("%s: starpu_cuda_worker_get_count() = %u, cpu workers %u\n", name, ncuda, ncpu);
	/* DNN_GPU_TEST_CPU_AS_CUDA=1, for checking a test's own logic on a machine without a GPU:
	 * a CPU worker stands in for the CUDA worker (nothing of CUDA is tested then; the line below
	 * says so). Never set by CTest or scripts/gpu-check.sh. */
	const char *fake = getenv("DNN_GPU_TEST_CPU_AS_CUDA");
	if (ncuda == 0 && fake && atoi(fake) > 0 && ncpu > 0) {
		unsigned got = starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, gpu_fake_ids, 2);
		gpu_cpu_worker = gpu_fake_ids[0];
		gpu_cuda_worker = gpu_fake_ids[got > 1 ? 1 : 0];
		gpu_fake = 1;
		printf("%s: DNN_GPU_TEST_CPU_AS_CUDA: CPU worker %d stands in for CUDA (NOT a GPU run)\n", name,
		       gpu_cuda_worker);
		return 0;
	}
	if (ncuda == 0 || (need_cpu && ncpu == 0)) {
		printf("SKIP: %s needs a CUDA worker%s (cuda %u, cpu %u)\n", name, need_cpu ? " and a CPU worker" : "",
		       ncuda, ncpu);
		test_starpu_shutdown();
		return TEST_SKIP;
	}
	if (starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, &gpu_cuda_worker, 1) != 1 ||
	    (need_cpu && starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, &gpu_cpu_worker, 1) != 1)) {
		fprintf(stderr, "FAIL: %s: worker ids not found\n", name);
		exit(1);
	}
	char wname[128];
	starpu_worker_get_name(gpu_cuda_worker, wname, sizeof wname);
	printf("%s: cuda worker %d (%s), cpu worker %d, DNN_CUDA_MATH=%s\n", name, gpu_cuda_worker, wname,
	       gpu_cpu_worker, getenv("DNN_CUDA_MATH"));
	return 0;
}

static inline void gpu_task(struct starpu_codelet *cl, int worker, const void *args, size_t argsz,
			    struct starpu_data_descr *d, int n, const char *name)
{
	if (test_task(cl, worker, args, argsz, d, n, name) != 0)
		exit(1); /* test_task said why */
}

/* max |got - ref| / max(1, max |ref|): a MIXED error, relative to the tensor's scale (its largest
 * |ref|) when that is above 1, absolute below (the form of gpu_conv2d.c, for results that are sums
 * of many products). Returns 1 when within tol. */
static inline int gpu_close_scaled(const char *what, const float *got, const float *ref, size_t n, double tol)
{
	double scale = 1, worst = 0;
	size_t wi = 0;
	for (size_t i = 0; i < n; i++)
		scale = fmax(scale, fabs((double)ref[i]));
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - (double)ref[i]);
		if (!(d <= worst)) { /* NaN counts as the worst */
			worst = isnan(d) ? INFINITY : d;
			wi = i;
		}
	}
	int ok = worst / scale <= tol;
	TEST_CHECK(ok, "%s: max|a-b|/scale = %.3g > %.3g at [%zu] (%g vs %g)", what, worst / scale, tol, wi,
		   n ? (double)got[wi] : 0.0, n ? (double)ref[wi] : 0.0);
	return ok;
}

static inline float *gpu_copy_f(const float *src, size_t n)
{
	float *p = alloc_f(n);
	memcpy(p, src, n * sizeof(float));
	return p;
}
#endif
