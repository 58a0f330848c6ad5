/* unit_critpath — DNN_BREAKDOWN's critical path (runtime/critpath.h).
 * 1. dnn_cp_analyse on hand-built DAGs with known times: the exact observed chain (its parts,
 *    queued time, length), the ideal longest path, gates by worker against gates by data, the
 *    submit/comm/wait/sched/transfer split of a gap, ties, a predecessor id that is not below
 *    its task's.
 * 2. The record on real StarPU tasks submitted through dnn_task_submit_ (the insert macros' one
 *    submission point): a diamond A(W h) -> B(R h), C(R h) -> D(RW h) of 30 ms tasks next to an
 *    independent E(W g). The ideal must hold A, one reader and D (>= 90 ms: the readers'
 *    dependency of D is recorded) and no more than the span when B and C ran side by side (the
 *    readers are not serialised); the chain's parts add up to the span. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "critpath.h"
#include "dnn_codelet.h"
#include "test_util.h"

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

/* A task of the hand-built DAGs: times (ready, fetch: -1 = its start), worker, class, remote (1:
 * remote, 2: after_redux), predecessors (-1 ends the list). */
typedef struct {
	double submit, ready, fetch, start, end;
	int worker, cls, remote;
	int preds[4];
} spec;

static int run(const spec *s, int n, double t0, dnn_cp_result *res)
{
	dnn_cp_task t[16];
	dnn_cp_range rg[16];
	uint32_t ids[64];
	int nid = 0;
	for (int i = 0; i < n; i++) {
		t[i] = (dnn_cp_task){.submit = s[i].submit, .ready = s[i].ready < 0 ? s[i].start : s[i].ready,
				     .fetch = s[i].fetch < 0 ? s[i].start : s[i].fetch, .start = s[i].start, .end = s[i].end, .worker = s[i].worker,
				     .cls = (uint8_t)s[i].cls, .remote = s[i].remote == 1, .after_redux = s[i].remote == 2, .timed = 1,
				     .range_off = (uint32_t)i, .nranges = 1};
		rg[i].off = (uint32_t)nid;
		for (int k = 0; k < 4 && s[i].preds[k] >= 0; k++)
			ids[nid++] = (uint32_t)s[i].preds[k];
		rg[i].n = (uint32_t)nid - rg[i].off;
	}
	return dnn_cp_analyse(t, n, rg, ids, t0, res, NULL, NULL);
}

static void check_parts(const char *what, const dnn_cp_result *r, const double want[DNN_CP_NPARTS], double queued,
			double ideal, double span, long length)
{
	for (int k = 0; k < DNN_CP_NPARTS; k++)
		TEST_CHECK(NEAR(r->part[k], want[k]), "%s: %s %g, want %g", what, dnn_cp_part_name[k], r->part[k], want[k]);
	TEST_CHECK(NEAR(r->queued, queued), "%s: queued %g, want %g", what, r->queued, queued);
	TEST_CHECK(NEAR(r->ideal, ideal), "%s: ideal %g, want %g", what, r->ideal, ideal);
	TEST_CHECK(NEAR(r->span, span), "%s: span %g, want %g", what, r->span, span);
	TEST_CHECK(r->length == length, "%s: chain of %ld tasks, want %ld", what, r->length, length);
}

static void hand_built(void)
{
	dnn_cp_result r;
	/* Two workers. 0: compute 10..30 on w0, ready at 0, fetching from 8. 1: compute 12..20 on w1
	 * (no pred). 2: all-reduce work on w1, reads 0 and 1, remote (a received handle), submitted
	 * at 0, ready at 40, fetching from 43, starts 45, ends 50. 3: update on w0, pred 2,
	 * submitted at 55 (after 2's end), ready 56, fetching from 58, starts 58, ends 60. 4: compute
	 * on w0, pred 1 only, 31..40. The last task is 3. */
	const spec a[] = {
		{0, 0, 8, 10, 30, 0, DNN_CP_COMPUTE, 0, {-1}},
		{0, -1, -1, 12, 20, 1, DNN_CP_COMPUTE, 0, {-1}},
		{0, 40, 43, 45, 50, 1, DNN_CP_ALLREDUCE, 1, {0, 1, -1}},
		{55, 56, 58, 58, 60, 0, DNN_CP_UPDATE, 0, {2, -1}},
		{0, -1, -1, 31, 40, 0, DNN_CP_COMPUTE, 0, {1, -1}},
	};
	TEST_CHECK(run(a, 5, 0, &r) == 0, "analyse a");
	/* The chain: 3 <- 2 (its data predecessor, ended 50, against 4, its worker's, ended 40) <- 0
	 * (of 0 and 1, the one that ended last; 1, its worker's, ended 20) <- t0 (nothing before 0 on
	 * w0). Span 60: 0: 8 sched + 2 transfer + 20 compute; 2: 10 comm (30..40, not ready) + 3
	 * sched + 2 transfer + 5 all-reduce; 3: 5 submit + 1 wait + 2 sched + 2 update. Ideal:
	 * 0 -> 2 -> 3, 27. */
	{
		const double want[DNN_CP_NPARTS] = {20, 5, 2, 10, 0, 1, 8 + 3 + 2, 2 + 2, 5};
		check_parts("a", &r, want, 0, 27, 60, 3);
	}
	/* The same with the span starting at 5: 0's sched is 5..8. */
	TEST_CHECK(run(a, 5, 5, &r) == 0, "analyse a, t0 5");
	{
		const double want[DNN_CP_NPARTS] = {20, 5, 2, 10, 0, 1, 3 + 3 + 2, 2 + 2, 5};
		check_parts("a, t0 = 5", &r, want, 0, 27, 55, 3);
	}
	/* Gated by the worker: 0 on w0 10..30; 1 on w0 30..50 with no data pred (queued behind 0);
	 * 2 on w1 52..60 reads 1, the first access after REDUX contributions (its 2 ms gap: reduce).
	 * Chain 2 <- 1 (data) <- 0 (worker) <- t0. Ideal: 20 + 8 = 28 (1 and 0 are independent:
	 * only the worker ordered them). */
	const spec b[] = {
		{0, -1, -1, 10, 30, 0, DNN_CP_COMPUTE, 0, {-1}},
		{0, -1, -1, 30, 50, 0, DNN_CP_COMPUTE, 0, {-1}},
		{0, -1, -1, 52, 60, 1, DNN_CP_COMPUTE, 2, {1, -1}},
	};
	TEST_CHECK(run(b, 3, 0, &r) == 0, "analyse b");
	{
		const double want[DNN_CP_NPARTS] = {20 + 20 + 8, 0, 0, 0, 2, 10, 0, 0, 0};
		check_parts("b", &r, want, 20, 28, 60, 3);
	}
	/* Ties and a bad id: 0 and 1 both end at 10 on different workers, 2 (w2, 10..15) reads both:
	 * the gate is the higher id (1, later in the order). 1 also lists 2 as a predecessor (not
	 * below its own id: ignored, no loop). A zero-length task 3 on w2 at 15..15 after 2. */
	const spec c[] = {
		{0, -1, -1, 0, 10, 0, DNN_CP_COMPUTE, 0, {-1}},
		{0, -1, -1, 4, 10, 1, DNN_CP_ALLREDUCE, 0, {2, -1}},
		{0, -1, -1, 10, 15, 2, DNN_CP_COMPUTE, 0, {0, 1, -1}},
		{0, -1, -1, 15, 15, 2, DNN_CP_UPDATE, 0, {2, -1}},
	};
	TEST_CHECK(run(c, 4, 0, &r) == 0, "analyse c");
	{
		/* chain 3 <- 2 <- 1 (allreduce 6, wait 4 from t0) */
		const double want[DNN_CP_NPARTS] = {5, 6, 0, 0, 0, 4, 0, 0, 0};
		check_parts("c", &r, want, 0, 15, 15, 3);
	}
	TEST_CHECK(run(c, 0, 0, &r) == 0 && r.span == 0 && r.length == 0 && r.ideal == 0, "no task");
}

/* ---------------------------------------------------------------- the record on StarPU tasks */
static void sleep_cpu(void *buffers[], void *arg)
{
	(void)buffers, (void)arg;
	usleep(30000);
}
static struct starpu_codelet cl_sleep = {.cpu_funcs = {sleep_cpu}, .nbuffers = STARPU_VARIABLE_NBUFFERS, .name = "test_sleep"};
static void nothing_cpu(void *buffers[], void *arg) { (void)buffers, (void)arg; }
static struct starpu_codelet cl_init = {.cpu_funcs = {nothing_cpu}, .nbuffers = 1, .modes = {STARPU_W}, .name = "test_init"};
static struct starpu_codelet cl_redux = {.cpu_funcs = {sleep_cpu}, .nbuffers = 2, .modes = {STARPU_RW | STARPU_COMMUTE, STARPU_R},
					 .name = "test_redux"};
static int cls_all_compute(const struct starpu_codelet *cl)
{
	(void)cl;
	return DNN_CP_COMPUTE;
}

static void recorded(void)
{
	float x[4] = {0}, y[4] = {0};
	starpu_data_handle_t h = reg_f(x, 4), g = reg_f(y, 4);
	dnn_cp_enable(cls_all_compute, 0, 1);
	starpu_task_wait_for_all();
	dnn_cp_reset(starpu_timing_now());
	const int modes[] = {STARPU_W, STARPU_R, STARPU_R, STARPU_RW};
	int rc = 0;
	for (int i = 0; i < 4; i++)
		rc |= dnn_task_submit_(starpu_task_build(&cl_sleep, modes[i], h, 0));
	rc |= dnn_task_submit_(starpu_task_build(&cl_sleep, STARPU_W, g, 0));
	TEST_CHECK(rc == 0, "submitting the diamond");
	starpu_task_wait_for_all();
	dnn_cp_result r;
	TEST_CHECK(dnn_cp_finish(&r, stdout) == 0, "dnn_cp_finish");
	double sum = 0;
	for (int k = 0; k < DNN_CP_NPARTS; k++)
		sum += r.part[k];
	printf("recorded: span %.1f ms, chain of %ld tasks (compute %.1f, wait %.1f, sched %.1f, transfer %.1f, "
	       "submit %.1f ms), ideal %.1f ms\n",
	       r.span / 1e3, r.length, r.part[DNN_CP_COMPUTE] / 1e3, r.part[DNN_CP_WAIT] / 1e3, r.part[DNN_CP_SCHED] / 1e3,
	       r.part[DNN_CP_TRANSFER] / 1e3, r.part[DNN_CP_SUBMIT] / 1e3, r.ideal / 1e3);
	TEST_CHECK(fabs(sum - r.span) < 1e-6 * r.span + 1e-6, "the chain's parts add up to %g, the span is %g", sum, r.span);
	TEST_CHECK(r.ideal >= 3 * 30000 * 0.99, "ideal %g us: A, a reader and D are 3 x 30 ms in a row", r.ideal);
	TEST_CHECK(r.length >= 3, "chain of %ld tasks: at least A, a reader, D", r.length);
	if (starpu_cpu_worker_get_count() >= 2) /* then B and C ran side by side */
		TEST_CHECK(r.ideal <= r.span + 1, "ideal %g us > span %g us: the readers were serialised", r.ideal, r.span);
	/* Two REDUX contributions to k, then a reader: StarPU's reduction task between them (30 ms,
	 * not recorded) is the reader's wait for data, and the reader ends the chain: reduce. */
	float z[4] = {0};
	starpu_data_handle_t k = reg_f(z, 4);
	starpu_data_set_reduction_methods(k, &cl_redux, &cl_init);
	dnn_cp_reset(starpu_timing_now());
	rc = dnn_task_submit_(starpu_task_build(&cl_sleep, STARPU_REDUX, k, 0));
	rc |= dnn_task_submit_(starpu_task_build(&cl_sleep, STARPU_REDUX, k, 0));
	rc |= dnn_task_submit_(starpu_task_build(&cl_sleep, STARPU_R, k, 0));
	TEST_CHECK(rc == 0, "submitting the REDUX case");
	starpu_task_wait_for_all();
	TEST_CHECK(dnn_cp_finish(&r, stdout) == 0, "dnn_cp_finish, REDUX");
	TEST_CHECK(r.part[DNN_CP_REDUCE] >= 30000 * 0.99, "REDUX: the reader's reduce %g us, want >= 30 ms (its wait %g us)",
		   r.part[DNN_CP_REDUCE], r.part[DNN_CP_WAIT]);
	starpu_data_unregister(k);
	/* Recording stopped: a task now is not recorded, and a new span starts empty. */
	dnn_cp_reset(starpu_timing_now());
	TEST_CHECK(dnn_cp_finish(&r, NULL) == 0 && r.length == 0 && r.span == 0, "an empty span: %ld tasks", r.length);
	dnn_task_set_submit_hook(NULL);
	starpu_data_unregister(h);
	starpu_data_unregister(g);
}

int main(int argc, char **argv)
{
	hand_built();
	setenv("STARPU_NCPU", "2", 0);
	test_starpu_init(&argc, &argv);
	starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
	recorded();
	test_starpu_shutdown();
	return test_report("unit_critpath");
}
