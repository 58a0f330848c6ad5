/* breakdown.c — the per-rank time breakdown of DNN_BREAKDOWN=1 (breakdown.h). */
#include "breakdown.h"

#include <starpu.h>
#include <starpu_mpi.h>
#include <starpu_perf_monitoring.h>
#include <stdlib.h>
#include <string.h>

#include "critpath.h"
#include "dnn_runtime.h"
#include "errline.h"
#include "knobs.h"
#include "optim.h"
#include "vec.h"

enum { BD_COMPUTE, BD_ALLREDUCE, BD_UPDATE, BD_IDLE, BD_OTHER, BD_N };
/* After the BD_N shares, the critical path's fields (critpath.h): the span in seconds, then the
 * chain's parts, queued and ideal as shares of the span. */
enum { CP_SPAN = BD_N, CP_PART, CP_QUEUED = CP_PART + DNN_CP_NPARTS, CP_IDEAL, BD_ROW };
static const char *const bd_names[BD_ROW] = {"compute", "allreduce", "update", "idle", "other",
					     "cp_span_s", "cp_compute", "cp_allreduce", "cp_update", "cp_comm",
					     "cp_reduce", "cp_wait", "cp_sched", "cp_transfer", "cp_submit", "cp_queued", "cp_ideal"};

/* The codelets timed apart, and their cumulated execution time (µs) as last reported. */
static struct starpu_codelet *const bd_vec[] = {&cl_vec_zero, &cl_vec_redux_add, &cl_vec_add,
						&cl_vec_axpy, &cl_vec_slice_get, &cl_vec_slice_put,
						&cl_vec_add_clear};
#define BD_NCL (int)(sizeof(bd_vec) / sizeof(bd_vec[0]) + 1) /* + cl_optim_update */
static struct starpu_codelet *bd_cl(int i) { return i < BD_NCL - 1 ? bd_vec[i] : &cl_optim_update; }
static double bd_cumul[BD_NCL], bd_base[BD_NCL];
static int bd_on, bd_counter = -1, bd_nranks;
static struct starpu_perf_counter_listener *bd_listener;
static float *bd_all; /* rank 0: [rank * BD_ROW + k], a rank's row */

static void on_codelet(struct starpu_perf_counter_listener *l, struct starpu_perf_counter_sample *s, void *ctx)
{
	(void)l;
	for (int i = 0; i < BD_NCL; i++)
		if (ctx == bd_cl(i))
			bd_cumul[i] = starpu_perf_counter_sample_get_double_value(s, bd_counter);
}

/* A codelet's class on the critical path: the same as the shares'. */
static int bd_class(const struct starpu_codelet *cl)
{
	for (int i = 0; i < BD_NCL; i++)
		if (cl == bd_cl(i))
			return i < BD_NCL - 1 ? DNN_CP_ALLREDUCE : DNN_CP_UPDATE;
	return DNN_CP_COMPUTE;
}

void dnn_breakdown_setup(void)
{
	if (bd_on)
		return;
	bd_on = 1;
	dnn_cp_enable(bd_class, dnn_runtime_rank(), dnn_runtime_nranks());
	starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
	const enum starpu_perf_counter_scope scope = starpu_perf_counter_scope_per_codelet;
	bd_counter = starpu_perf_counter_name_to_id(scope, "starpu.task.c_cumul_execution_time");
	struct starpu_perf_counter_set *set = starpu_perf_counter_set_alloc(scope);
	starpu_perf_counter_set_enable_id(set, bd_counter);
	bd_listener = starpu_perf_counter_listener_init(set, on_codelet, NULL);
	for (int i = 0; i < BD_NCL; i++)
		starpu_perf_counter_set_per_codelet_listener(bd_cl(i), bd_listener);
	starpu_perf_counter_collection_start();
}

void dnn_breakdown_start(void)
{
	if (!bd_on)
		return;
	starpu_task_wait_for_all(); /* nothing in flight: every counter starts from a quiet point */
	const unsigned nw = starpu_worker_get_count();
	for (unsigned w = 0; w < nw; w++)
		starpu_profiling_worker_get_info((int)w, NULL); /* reset */
	memcpy(bd_base, bd_cumul, sizeof(bd_base));
	dnn_cp_reset(starpu_timing_now());
}

/* This rank's shares of its workers' summed timed span. */
static void local_shares(float *out)
{
	double total = 0, exec = 0, sleep = 0, vec = 0, upd = 0;
	const unsigned nw = starpu_worker_get_count();
	for (unsigned w = 0; w < nw; w++) {
		struct starpu_profiling_worker_info info;
		if (starpu_profiling_worker_get_info((int)w, &info) != 0)
			continue;
		total += starpu_timing_timespec_to_us(&info.total_time);
		exec += starpu_timing_timespec_to_us(&info.executing_time);
		sleep += starpu_timing_timespec_to_us(&info.sleeping_time);
	}
	for (int i = 0; i < BD_NCL; i++)
		*(i < BD_NCL - 1 ? &vec : &upd) += bd_cumul[i] - bd_base[i];
	if (total <= 0)
		total = 1;
	out[BD_ALLREDUCE] = (float)(vec / total), out[BD_UPDATE] = (float)(upd / total);
	out[BD_COMPUTE] = (float)((exec - vec - upd) / total), out[BD_IDLE] = (float)(sleep / total);
	out[BD_OTHER] = (float)(1.0 - (exec + sleep) / total);
}

/* This rank's critical-path fields, out[CP_SPAN ..]. 0 or -1 (out of memory). */
static int local_critpath(float *out)
{
	dnn_cp_result cp;
	if (dnn_cp_finish(&cp, dnn_knobs_get()->breakdown == 2 ? stderr : NULL) != 0)
		return -1;
	const double span = cp.span > 0 ? cp.span : 1;
	out[CP_SPAN] = (float)(cp.span / 1e6);
	for (int k = 0; k < DNN_CP_NPARTS; k++)
		out[CP_PART + k] = (float)(cp.part[k] / span);
	out[CP_QUEUED] = (float)(cp.queued / span), out[CP_IDEAL] = (float)(cp.ideal / span);
	return 0;
}

/* Rank 0 receives every rank's row into all[rank * BD_ROW] (all NULL: received and dropped, so that
 * no rank waits forever): plain StarPU-MPI messages, whose data crosses for real in a simulation
 * too, where no summing kernel runs. 0 or a StarPU error. */
static int gather_rows(float *all, float *row, int rank, int nranks)
{
	const starpu_mpi_tag_t tag = (starpu_mpi_tag_t)1 << 40; /* above every handle's tag (dist.c) */
	int rc = 0;
	if (rank != 0) {
		starpu_data_handle_t h;
		starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)row, BD_ROW, sizeof(float));
		rc = starpu_mpi_send(h, 0, tag, MPI_COMM_WORLD);
		starpu_data_unregister(h);
		return rc;
	}
	if (all)
		memcpy(all, row, sizeof(float) * BD_ROW);
	for (int j = 1; j < nranks && rc == 0; j++) {
		starpu_data_handle_t h;
		MPI_Status st;
		float *dst = all ? all + (size_t)j * BD_ROW : row;
		starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)dst, BD_ROW, sizeof(float));
		rc = starpu_mpi_recv(h, j, tag, MPI_COMM_WORLD, &st);
		starpu_data_unregister(h);
	}
	return rc;
}

int dnn_breakdown_finish(int rank, int nranks, char *err, size_t errlen)
{
	if (!bd_on)
		return 0;
	starpu_task_wait_for_all();
	float mine[BD_ROW];
	local_shares(mine);
	const int cp_rc = local_critpath(mine); /* on failure every rank still sends its row: none waits */
	if (cp_rc != 0)
		memset(mine + BD_N, 0, sizeof(float) * (BD_ROW - BD_N));
	free(bd_all);
	bd_all = rank == 0 ? calloc((size_t)nranks * BD_ROW, sizeof(float)) : NULL; /* rank 0 prints */
	bd_nranks = nranks;
	int rc = gather_rows(bd_all, mine, rank, nranks);
	if (rc != 0) {
		dnn_set_err(err, errlen, "DNN_BREAKDOWN", "gathering the ranks' breakdown failed (error %d)", rc);
		return -1;
	}
	if (cp_rc != 0) {
		dnn_set_err(err, errlen, "DNN_BREAKDOWN", "out of memory for the critical path's task record");
		return -1;
	}
	if (rank == 0 && !bd_all) {
		dnn_set_err(err, errlen, "DNN_BREAKDOWN", "out of memory");
		return -1;
	}
	return 0;
}

void dnn_breakdown_print(FILE *f)
{
	if (!bd_on || !bd_all)
		return;
	for (int k = 0; k < BD_ROW; k++) {
		double sum = 0;
		for (int r = 0; r < bd_nranks; r++)
			sum += bd_all[r * BD_ROW + k];
		fprintf(f, k == CP_SPAN ? " bd_%s=%.4f" : " bd_%s=%.3f", bd_names[k], sum / bd_nranks);
	}
	for (int k = 0; k < BD_ROW && bd_nranks > 1; k++) {
		fprintf(f, " bd_rank_%s=", bd_names[k]);
		for (int r = 0; r < bd_nranks; r++)
			fprintf(f, k == CP_SPAN ? "%s%.3f" : "%s%.2f", r ? "/" : "", bd_all[r * BD_ROW + k]);
	}
}
