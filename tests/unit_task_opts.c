/* unit_task_opts — where an insert helper's local task runs (codelets/dnn_codelet.h, dnn_task_opts).
 * {.pinned = 1, .worker = w} runs the task on worker w (--pin-chunks gives each chunk's tasks
 * their worker this way, graph/model.c), through both insert macros (DNN_TASK_INSERT: vec_add;
 * DNN_TASK_INSERT_CL_ARGS: vec_axpy); NULL and an options block without .pinned leave the choice
 * to the scheduler (dnn_task_worker: -1), whatever .worker holds. Both ways of pinning
 * (dnn_task_opts.pin_queue): 0 [default], w's mask (STARPU_TASK_WORKERIDS, dnn_task_wmask);
 * 1, w's local queue (STARPU_EXECUTE_ON_WORKER, dnn_task_worker). Counted from StarPU's per-worker
 * profiling: K independent tasks pinned to w must all have run on w and none elsewhere, on each
 * CPU worker in turn, either way; and they computed what they should. Needs 2 CPU workers (else 77). */
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnn_codelet.h"
#include "exec_config.h"
#include "test_util.h"
#include "vec.h"

#define K 24   /* tasks per worker: unpinned, a scheduler would spread them over the workers */
#define N 4096 /* floats per task */

/* Tasks worker w ran since the last call (the call resets its counters); -1 when StarPU cannot say. */
static int executed_since_last(int w)
{
	struct starpu_profiling_worker_info info;
	return starpu_profiling_worker_get_info(w, &info) == 0 ? info.executed_tasks : -1;
}

int main(int argc, char **argv)
{
	const dnn_task_opts unpinned = {.worker = 1, .name = "x"}, pinned = {.pinned = 1, .worker = 1};
	TEST_CHECK(dnn_task_worker(NULL) == -1, "NULL options: worker %d, want -1", dnn_task_worker(NULL));
	TEST_CHECK(dnn_task_worker(&unpinned) == -1, "options without .pinned: worker %d, want -1",
		   dnn_task_worker(&unpinned));
	const dnn_exec_config dflt = DNN_EXEC_CONFIG_DEFAULTS;
	TEST_CHECK(dflt.pin_by_mask == 1 && pinned.pin_queue == 0, "pinning by mask is not the default");
	TEST_CHECK(dnn_task_worker(&pinned) == -1 && dnn_task_wlen(&pinned) == 1 && dnn_task_wmask(&pinned) &&
			   dnn_task_wmask(&pinned)[0] == 1u << 1,
		   "pinned to worker 1 by mask: worker %d, mask of %u words", dnn_task_worker(&pinned), dnn_task_wlen(&pinned));
	TEST_CHECK(dnn_task_wlen(&unpinned) == 0 && !dnn_task_wmask(&unpinned), "options without .pinned: a mask");
	const dnn_task_opts w40 = {.pinned = 1, .worker = 40};
	TEST_CHECK(dnn_task_wlen(&w40) == 2 && dnn_task_wmask(&w40)[0] == 0 && dnn_task_wmask(&w40)[1] == 1u << 8,
		   "pinned to worker 40 by mask: %u words", dnn_task_wlen(&w40));
	const dnn_task_opts queued = {.pinned = 1, .worker = 1, .pin_queue = 1};
	TEST_CHECK(dnn_task_worker(&queued) == 1 && dnn_task_wlen(&queued) == 0 && !dnn_task_wmask(&queued),
		   "pinned to worker 1's queue: worker %d", dnn_task_worker(&queued));

	test_starpu_init(&argc, &argv);
	int cpus[STARPU_NMAXWORKERS];
	const int P = (int)starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, cpus, STARPU_NMAXWORKERS);
	if (P < 2) {
		test_starpu_shutdown();
		printf("SKIP: %d CPU worker(s); pinning is only visible with 2 or more (run with STARPU_NCPU>=2)\n", P);
		return test_failures ? 1 : TEST_SKIP;
	}
	starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
	test_rng_seed(7);
	float *dst = alloc_f((size_t)K * N), *src = alloc_f(N);
	test_fill_uniform(dst, (size_t)K * N, -1, 1);
	test_fill_uniform(src, N, -1, 1);
	float *want = alloc_f((size_t)K * N);
	memcpy(want, dst, sizeof(float) * K * N);
	starpu_data_handle_t hdst[K], hsrc = reg_f(src, N);
	for (int k = 0; k < K; k++)
		hdst[k] = reg_f(dst + (size_t)k * N, N);
	const int nw = (int)starpu_worker_get_count();
	for (int i = 0; i < 2 * P; i++) { /* each worker by its queue, then by its mask */
		const int w = cpus[i % P];
		starpu_task_wait_for_all();
		for (int j = 0; j < nw; j++)
			executed_since_last(j);
		const dnn_task_opts o = {.pinned = 1, .worker = w, .pin_queue = i < P};
		for (int k = 0; k < K; k++) {
			int rc = k % 2 ? dnn_insert_vec_add(&o, hdst[k], STARPU_RW, hsrc)
				       : dnn_insert_vec_axpy(&o, hdst[k], 0.5f, hsrc);
			TEST_CHECK(rc == 0, "insert %d pinned to worker %d: %d", k, w, rc);
		}
		starpu_task_wait_for_all();
		for (int j = 0; j < nw; j++) {
			int n = executed_since_last(j);
			if (j == w)
				TEST_CHECK(n == K, "worker %d ran %d of the %d tasks pinned to it", w, n, K);
			else
				TEST_CHECK(n == 0, "worker %d ran %d tasks pinned to worker %d", j, n, w);
		}
		printf("pinned to CPU worker %d (%s): %d tasks there\n", w, i >= P ? "mask" : "queue", K);
	}
	for (int k = 0; k < K; k++) /* the same float operations in the same order (alpha * src is exact) */
		for (int e = 0; e < N; e++)
			for (int i = 0; i < 2 * P; i++)
				want[(size_t)k * N + e] += (k % 2 ? 1.0f : 0.5f) * src[e];
	for (int k = 0; k < K; k++)
		starpu_data_unregister(hdst[k]);
	starpu_data_unregister(hsrc);
	int bad = 0;
	for (size_t e = 0; e < (size_t)K * N; e++)
		bad += dst[e] != want[e];
	TEST_CHECK(bad == 0, "%d of %d elements differ from 2P rounds of dst += src / dst += 0.5 * src", bad, K * N);
	test_starpu_shutdown();
	free(dst);
	free(src);
	free(want);
	return test_report("unit_task_opts");
}
