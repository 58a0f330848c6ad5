/* allreduce_bench.c — `starpu_anp bench --allreduce-bytes S`: the all-reduce microbenchmark
 * (docs/NETWORK.md "The all-reduce microbenchmark", bench/allreduce_bench.sh).
 *
 * Times the app's own cross-rank sum, not plain MPI: one parameter tensor of S bytes per rank,
 * all-reduced by graph/dist.c exactly as a training step does it for one parameter
 * (dnn_dist_allreduce_param: --allreduce tree, ring or rhd, with the same tasks, StarPU-MPI
 * transfers, priorities and the SGD update that reads the sum), --warmup times untimed, then
 * --steps times back to back (each waits for the previous one's update through the data, as
 * consecutive training steps do), until every rank is done (starpu_mpi_wait_for_all).
 * allreduce_s = the timed span / --steps. The tensor is the weight of a one-layer net built here
 * (input 1 x H x W, dense out=2, loss: 2 H W = S / 4 floats); its forward and backward never run
 * and its 2-float bias is not all-reduced. The same code runs in the simulation build (simulated
 * time; docs/SIMULATION.md), so the two can be compared cell by cell. */
#include <errno.h>
#include <starpu.h>
#include <starpu_mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "dnn_runtime.h"
#include "graph.h"
#include "knobs.h"
#include "model.h"
#include "progress.h"

/* The one-layer net whose dense weight holds `bytes` bytes (2 x H x W floats): its text. -1 when
 * bytes is not 8 x H x W with H, W <= DNN_MAX_SPATIAL. */
static int net_text(long bytes, char *buf, size_t len)
{
	if (bytes < 64 || bytes % 8)
		return -1;
	long k = bytes / 8, w = k < DNN_MAX_SPATIAL ? k : DNN_MAX_SPATIAL;
	while (w > 1 && k % w)
		w--;
	if (k / w > DNN_MAX_SPATIAL)
		return -1;
	snprintf(buf, len, "input x 1 %ld %ld\ndense f x out=2\nsoftmax_xent loss f\n", k / w, w);
	return 0;
}

static int wait_all(const char *what)
{
	int rc = starpu_mpi_wait_for_all(MPI_COMM_WORLD);
	if (rc != 0)
		fprintf(stderr, "error: starpu_mpi_wait_for_all after the %s all-reduces: %s\n", what, strerror(rc < 0 ? -rc : rc));
	return rc;
}

/* `n` all-reduces of parameter 0 (the dense weight), submitted back to back. */
static int submit(dnn_plan *p, long n, const dnn_optim_config *optim)
{
	for (long i = 0; i < n; i++) {
		int rc = dnn_dist_allreduce_param(p, 0, optim);
		if (rc != 0) {
			fprintf(stderr, "error: submitting all-reduce %ld: %s\n", i, strerror(-rc));
			return -1;
		}
	}
	return 0;
}

static void print_result(const dnn_train_opts *o, int nranks, long reps, double span, double wall)
{
	const double s = span / (double)reps;
	printf("result: cmd=bench allreduce_bytes=%ld ranks=%d allreduce=%s grad_precision=%s bucket_mb=%g reps=%ld "
	       "warmup=%d ncpu=%u sched=%s",
	       o->allreduce_bytes, nranks, dnn_allreduce_name(o->allreduce), o->grad_bf16 ? "bf16" : "fp32",
	       o->bucket_mb, reps, o->warmup,
	       starpu_cpu_worker_get_count(), getenv("STARPU_SCHED") ? getenv("STARPU_SCHED") : "lws");
#ifdef DNN_SIMGRID
	const char *plat = dnn_knobs_get()->sim.platform;
	printf(" simulated=1 platform=%s", plat && *plat && !strpbrk(plat, " =") ? plat : "unnamed");
#endif
	/* algbw: the tensor's bytes over the time (NCCL's convention) */
	printf(" allreduce_s=%.6f algbw_gbps=%.4f wall_s=%.2f\n", s, s > 0 ? o->allreduce_bytes * 8.0 / s / 1e9 : 0, wall);
	fflush(stdout);
}

/* Set up the net, model, ranks and plan, run, report; the exit status. */
static int run(const dnn_train_opts *o, dnn_graph *g, dnn_model *m, dnn_plan *p, int *have_m, int *have_p)
{
	char err[512];
	const int nranks = dnn_runtime_nranks();
	const double t_begin = dnn_now();
	if (nranks < 2) {
		fprintf(stderr, "error: --allreduce-bytes: the all-reduce needs 2 or more ranks (run under mpirun)\n");
		return 2;
	}
	if (dnn_allreduce_check_ranks(o->allreduce, nranks, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return 2;
	}
	if (o->bucket_mb > 0 && !dnn_allreduce_takes_buckets(o->allreduce)) {
		fprintf(stderr, "error: --allreduce %s takes no --bucket-mb (each tensor is its own exchange): use --bucket-mb 0\n",
			dnn_allreduce_name(o->allreduce));
		return 2;
	}
	if (dnn_model_create(m, g, o->seed, err, sizeof(err)) != 0)
		goto fail;
	*have_m = 1;
	const size_t bucket_elems = (size_t)(o->bucket_mb * 1024.0 * 1024.0 / sizeof(float));
	if (dnn_model_enable_dist(m, DNN_MODE_SYNC, o->allreduce, o->grad_bf16, dnn_runtime_ranks_on_one_node(),
				  bucket_elems, 0, 0, 1, err, sizeof(err)) != 0 ||
	    dnn_plan_create_sharded(p, m, nranks, 1, 1, dnn_knobs_get(), err, sizeof(err)) != 0)
		goto fail;
	*have_p = 1;
	const long reps = o->max_steps - o->warmup; /* bench's --steps (max_steps counts the warm-up too) */
	if (submit(p, o->warmup, &o->optim) != 0 || wait_all("warm-up") != 0)
		return 1;
	const double t0 = dnn_now();
	if (submit(p, reps, &o->optim) != 0 || wait_all("timed") != 0)
		return 1;
	const double span = dnn_now() - t0;
	if (dnn_runtime_rank() == 0)
		print_result(o, nranks, reps, span, dnn_now() - t_begin);
	return 0;
fail:
	fprintf(stderr, "error: %s\n", err);
	return 1;
}

int dnn_cmd_allreduce_bench(const dnn_train_opts *o)
{
	char text[256], err[512];
	if (net_text(o->allreduce_bytes, text, sizeof(text)) != 0) {
		fprintf(stderr, "error: --allreduce-bytes %ld: expected a multiple of 8 bytes, 64 to %ld\n", o->allreduce_bytes,
			8L * DNN_MAX_SPATIAL * DNN_MAX_SPATIAL);
		return 2;
	}
	dnn_graph g;
	if (dnn_graph_parse(&g, text, "allreduce-bench", err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	dnn_model m;
	dnn_plan p;
	int have_m = 0, have_p = 0;
	dnn_train_opts ro = *o; /* --allreduce auto resolved: the result line names what ran */
	ro.allreduce = dnn_allreduce_resolve(o->allreduce, dnn_runtime_nranks(), dnn_runtime_ranks_on_one_node());
	/* --bucket-mb auto: off. One tensor in a bucket of its own only adds the pack and unpack
	 * copies; an explicit size still times that path. */
	if (ro.bucket_mb < 0)
		ro.bucket_mb = 0;
	int rc = run(&ro, &g, &m, &p, &have_m, &have_p);
	starpu_mpi_wait_for_all(MPI_COMM_WORLD);
	if (have_p)
		dnn_plan_destroy(&p);
	if (have_m)
		dnn_model_destroy(&m);
	dnn_graph_free(&g);
	return rc;
}
