/* breakdown.h — DNN_BREAKDOWN=1: where each rank's workers spent the timed span of a train or
 * bench run (from the end of the warm-up steps to the end of the run; a train run's evaluations
 * are inside it, bench has none), from StarPU's own counters, so that it works in simulation too (the SimGrid StarPU
 * has no FxT). Per rank, over its workers' summed time (docs/SIMULATION.md "Where a step goes"):
 *   compute   executing any task but the vector and update (optim) codelets (forward, backward, loads)
 *   allreduce executing the vector codelets (codelets/vec.h: the all-reduce's zeroing, sums,
 *             slice copies and bucket packing, the REDUX methods, the statistics' sums)
 *   update    executing optim_update
 *   idle      sleeping: no task to run (waiting for a dependency: a gradient from another rank,
 *             a transfer, the next step's submission)
 *   other     the rest: the worker awake but not executing (fetching a task's data before it
 *             runs: PCIe staging for StarPU-MPI, GPU-to-GPU copies; the scheduler's own cost)
 * Executing time comes from starpu_profiling_worker_get_info, per codelet from StarPU's
 * per-codelet performance counters (starpu.task.c_cumul_execution_time).
 * Also each rank's critical path of the same span (critpath.h: the observed chain of tasks and
 * waits, and the ideal longest path), the bd_cp_* fields. */
#ifndef DNN_BREAKDOWN_H
#define DNN_BREAKDOWN_H
#include <stdio.h>

#include <stddef.h>

/* Switches StarPU's worker profiling and the per-codelet counters on (once; StarPU running). */
void dnn_breakdown_setup(void);
/* The timed span starts: every counter from here. */
void dnn_breakdown_start(void);
/* The timed span ends: each rank's shares, gathered on rank 0 (every rank calls it), for
 * dnn_breakdown_print. 0, or -1 with one line in err. */
int dnn_breakdown_finish(int rank, int nranks, char *err, size_t errlen);
/* Rank 0, after dnn_breakdown_finish: the result-line fields, " bd_compute=0.612 ... bd_cp_span_s=1.2345
 * bd_cp_compute=0.901 ..." averaged over the ranks and " bd_rank_compute=0.61/0.60/..." per rank
 * (nothing when the breakdown is off). */
void dnn_breakdown_print(FILE *f);
#endif
