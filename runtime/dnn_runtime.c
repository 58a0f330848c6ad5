/* dnn_runtime.c — StarPU (+ StarPU-MPI) start-up. */
#include "dnn_runtime.h"

#include <cblas.h>
#include <errno.h>
#include <starpu.h>
#include <starpu_mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "dnn_codelet.h"
#include "dnn_cuda.h"
#include "dnn_sim_model.h"
#include "gemm_bf16.h"
#include "knobs.h"

/* OpenBLAS: one thread per StarPU worker, or the workers would oversubscribe the cores. */
void openblas_set_num_threads(int num_threads);

static int g_use_mpi, g_rank, g_nranks = 1;

/* After StarPU started, a set-up step failed: one process stops StarPU again; a rank of an MPI
 * job leaves it running (starpu_mpi_shutdown waits for the other ranks) and its caller exits. */
static int started_failed(int use_mpi)
{
#ifdef DNN_HAVE_CUDA
	dnn_cuda_shutdown();
#endif
	if (!use_mpi)
		starpu_shutdown();
	return -1;
}

static int start_mpi(int *argc, char ***argv, struct starpu_conf *conf, char *err, size_t errlen)
{
	int rc = starpu_mpi_init_conf(argc, argv, 1, MPI_COMM_WORLD, conf);
	if (rc != 0)
		return rc;
	int r1 = starpu_mpi_comm_rank(MPI_COMM_WORLD, &g_rank);
	int r2 = starpu_mpi_comm_size(MPI_COMM_WORLD, &g_nranks);
	if (r1 != 0 || r2 != 0) {
		snprintf(err, errlen, "starpu_mpi_comm_%s failed (%d)", r1 != 0 ? "rank" : "size", r1 != 0 ? r1 : r2);
		return -EPROTO;
	}
	return 0;
}

int dnn_runtime_init(int *argc, char ***argv, int use_mpi, char *err, size_t errlen)
{
	/* The DNN_* knobs (knobs.h), if the caller has not loaded them: checked before StarPU starts,
	 * in every build, so a bad value is caught on a machine without a GPU too. */
	if (!dnn_knobs_loaded() && dnn_knobs_load(err, errlen) != 0)
		return -1;
	/* Then the BLAS must run the CPU's kernels: this may re-execute the program (cpu_kernels.h),
	 * so it comes before anything is started. */
	const dnn_exec_config *cfg = dnn_knobs_get();
	if (dnn_cpu_kernels_init(argv ? *argv : NULL, cfg->blas_coretype, cfg->blas_reexec_from, err, errlen) != 0)
		return -1;
	openblas_set_num_threads(1);
	struct starpu_conf conf;
	int rc = starpu_conf_init(&conf);
	if (rc != 0) {
		snprintf(err, errlen, "starpu_conf_init failed: %s", strerror(-rc));
		return -1;
	}
	err[0] = '\0';
	rc = use_mpi ? start_mpi(argc, argv, &conf, err, errlen) : starpu_init(&conf);
	if (rc == -EPROTO) /* MPI started but cannot say who we are */
		return -1;
	if (rc == -ENODEV) {
		snprintf(err, errlen, "StarPU found no worker to run on (check STARPU_NCPU / STARPU_NCUDA)");
		return -ENODEV;
	}
	if (rc != 0) {
		snprintf(err, errlen, "StarPU failed to start: %s", strerror(-rc));
		return -1;
	}
	g_use_mpi = use_mpi;
	if (g_rank == 0 && dnn_cpu_kernels_short()) { /* one line, naming the fix */
		char line[1024];
		dnn_cpu_kernels_describe(line, sizeof(line));
		const char *warn = strstr(line, "\nwarning: ");
		if (warn)
			fprintf(stderr, "%s\n", warn + 1);
	}
	if (dnn_sim_models_install(&cfg->sim, err, errlen) != 0) /* the simulation build only */
		return started_failed(use_mpi);
#ifdef DNN_HAVE_CUDA
	if (dnn_cuda_init(&cfg->cuda, err, errlen) != 0)
		return started_failed(use_mpi);
#endif
	return 0;
}

static void release_scratch(void *arg)
{
	(void)arg;
	dnn_cpu_scratch_release();
	dnn_gemm_bf16_release(); /* --precision bf16's per-thread copies and oneDNN primitives */
	dnn_conv2d_onednn_release(); /* the conv's oneDNN primitives (codelets/conv2d_onednn.c) */
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
	release_scratch(NULL);
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

int dnn_runtime_check_bf16(char *err, size_t errlen)
{
	/* CPU workers compute bf16 only with AVX512_BF16 (dnn_cpu_has_bf16; DNN_CPU_MASK hides it);
	 * CUDA workers only with bf16 tensor cores. A run without CPU workers (STARPU_NCPU=0) needs
	 * no bf16 CPU: every codelet of a step has a CUDA function. */
	const unsigned ncpu = starpu_cpu_worker_get_count(), ncuda = starpu_cuda_worker_get_count();
	if (ncpu > 0 && !dnn_cpu_has_bf16()) {
		snprintf(err, errlen, "--precision bf16: this CPU has no AVX512_BF16 (cpuid) and the run has %u CPU "
				      "worker%s; use --precision fp32%s", ncpu, ncpu == 1 ? "" : "s",
			 ncuda ? ", or run on the GPUs alone (STARPU_NCPU=0)" : "");
		return -1;
	}
#ifdef DNN_HAVE_CUDA
	return dnn_cuda_check_bf16(err, errlen);
#else
	return 0;
#endif
}

int dnn_runtime_rank(void) { return g_rank; }
int dnn_runtime_nranks(void) { return g_nranks; }

int dnn_runtime_ranks_on_one_node(void)
{
	if (g_nranks < 2)
		return 1;
	const char *v = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
	if (!v)
		v = getenv("MPI_LOCALNRANKS");
	if (!v)
		return 0;
	char *end;
	errno = 0;
	long n = strtol(v, &end, 10);
	return errno == 0 && end != v && *end == '\0' && n == g_nranks;
}
