/* dnn_runtime.c — StarPU (+ StarPU-MPI) start-up. */
#include "dnn_runtime.h"

#include <cblas.h>
#include <errno.h>
#include <starpu.h>
#include <starpu_mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnn_codelet.h"
#include "dnn_cuda.h"
#include "dnn_sim_model.h"

/* OpenBLAS: one thread per StarPU worker, or the workers would oversubscribe the cores. */
void openblas_set_num_threads(int num_threads);

static int g_use_mpi, g_rank, g_nranks = 1;

int dnn_runtime_init(int *argc, char ***argv, int use_mpi)
{
	openblas_set_num_threads(1);
	/* DNN_CUDA_MATH / DNN_CUDA_WORKSPACE_MB (dnn_codelet.h): a bad value is a usage error, in
	 * every build and before StarPU starts, so it is caught on a machine without a GPU too. */
	char err[1024];
	dnn_cuda_env env;
	if (dnn_cuda_env_read(&env, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		exit(2);
	}
	struct starpu_conf conf;
	int rc = starpu_conf_init(&conf);
	if (rc != 0) {
		fprintf(stderr, "error: starpu_conf_init failed: %s\n", strerror(-rc));
		exit(1);
	}
	if (use_mpi) {
		rc = starpu_mpi_init_conf(argc, argv, 1, MPI_COMM_WORLD, &conf);
		if (rc == 0) {
			int r1 = starpu_mpi_comm_rank(MPI_COMM_WORLD, &g_rank);
			int r2 = starpu_mpi_comm_size(MPI_COMM_WORLD, &g_nranks);
			if (r1 != 0 || r2 != 0) {
				fprintf(stderr, "error: starpu_mpi_comm_%s failed (%d)\n", r1 != 0 ? "rank" : "size",
					r1 != 0 ? r1 : r2);
				exit(1);
			}
		}
	} else {
		rc = starpu_init(&conf);
	}
	if (rc == -ENODEV)
		return -ENODEV;
	if (rc != 0) {
		fprintf(stderr, "error: StarPU failed to start: %s\n", strerror(-rc));
		exit(1);
	}
	g_use_mpi = use_mpi;
	if (dnn_sim_models_install(err, sizeof(err)) != 0) { /* the simulation build only */
		fprintf(stderr, "error: %s\n", err);
		exit(1);
	}
#ifdef DNN_HAVE_CUDA
	if (dnn_cuda_init(err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		exit(1);
	}
#endif
	return 0;
}

static void release_scratch(void *arg)
{
	(void)arg;
	dnn_cpu_scratch_release();
}

void dnn_runtime_shutdown(void)
{
	int rc = starpu_task_wait_for_all();
	if (rc != 0)
		fprintf(stderr, "error: starpu_task_wait_for_all at shutdown: %s\n", strerror(-rc));
	char msg[512]; /* a task's error that no step reported (dnn_codelet.h) */
	if (dnn_worker_error_unreported(msg, sizeof(msg)))
		fprintf(stderr, "error: a task failed: %s\n", msg);
	/* CPU kernels keep a per-thread scratch buffer (im2col columns): free the workers' ones. */
	starpu_execute_on_each_worker(release_scratch, NULL, STARPU_CPU);
	dnn_cpu_scratch_release();
#ifdef DNN_HAVE_CUDA
	dnn_cuda_shutdown();
#endif
	if (g_use_mpi) {
		int mrc = starpu_mpi_shutdown();
		if (mrc != 0)
			fprintf(stderr, "error: starpu_mpi_shutdown: %s\n", strerror(mrc < 0 ? -mrc : mrc));
	} else {
		starpu_shutdown();
	}
}

int dnn_runtime_rank(void) { return g_rank; }
int dnn_runtime_nranks(void) { return g_nranks; }
