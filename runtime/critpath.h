/* critpath.h — DNN_BREAKDOWN=1's critical path of a rank's timed span (docs/SIMULATION.md, study 5
 * "Critical path"), from its own record of the tasks, so that it works in simulation too (no FxT).
 *
 * The record: every task the insert macros submit (codelets/dnn_codelet.h, dnn_task_submit_ and
 * dnn_mpi_task_insert_: the app's one submission point) while recording is on: its codelet's class,
 * whether it reads a handle another rank owns (StarPU-MPI received it), its local predecessors
 * and, from its profiling info in a callback, its submission, start and end times and worker.
 * Predecessors follow StarPU's sequential-consistency rule per handle
 * (src/core/dependencies/implicit_data_deps.c): consecutive accesses in one "concurrent" mode,
 * plain R, STARPU_REDUX, or W|STARPU_COMMUTE, form a group; a task joins the open group when its
 * mode matches (it then depends on the group before it), otherwise it depends on the whole open
 * group and opens a new one. So a reader depends on the last writer, a writer on every reader since,
 * a REDUX or COMMUTE contribution on what came before the run of contributions, and the first
 * reader after a REDUX run on every contribution (StarPU's own reduction tasks between them are
 * not recorded: their time shows as waiting). Handles or tasks without sequential consistency add
 * no edge; StarPU-MPI's own tasks (the tree's starpu_mpi_redux_data) are not recorded either.
 *
 * The analysis (dnn_cp_analyse, a pure function):
 *   observed chain: from the task that ended last, step to its gate: of its data predecessors and
 *     of the task before it on its worker, the one that ended last (no later than its start; on
 *     ties the lower id). Each step's time is the task's execution (its class) and the gap
 *     between the gate's end (or the span's start) and the task's start, split by the task's
 *     profiling times: submit (until it was submitted), then until it was ready (pushed to the
 *     scheduler: its last dependency released) comm when it waits for StarPU-MPI (it reads a
 *     handle that arrived over MPI: one another rank owns, or the result of a STARPU_MPI_REDUX
 *     reduction; or it overwrites a handle being sent, which StarPU-MPI's cache says was sent
 *     since its last write: exposed communication, the other ranks' lateness included), else
 *     reduce when it is the first access after a run of STARPU_REDUX contributions (StarPU's own
 *     reduction tasks, which sum the per-worker copies, with their transfers), and wait
 *     otherwise (a dependency the record does not hold, e.g. the tree's StarPU-MPI reduction
 *     tasks), then sched (ready, in a scheduler or worker
 *     queue, its data possibly prefetched meanwhile) until its worker began fetching its data,
 *     then transfer (the fetch: copies between memory nodes) until it started. The parts add up
 *     to the span, from its start to the last task's end. queued: the execution time of chain tasks whose gate was their worker
 *     (they were ready and waited for the worker: the chain is the worker's own work there).
 *   ideal: the longest path through the data predecessors by execution times alone, the span
 *     with unlimited workers and free transfers and communication. */
#ifndef DNN_CRITPATH_H
#define DNN_CRITPATH_H

#include <starpu.h>
#include <stdint.h>
#include <stdio.h>

enum {
	DNN_CP_COMPUTE, DNN_CP_ALLREDUCE, DNN_CP_UPDATE, /* execution, by the codelet's class */
	DNN_CP_COMM, DNN_CP_REDUCE, DNN_CP_WAIT, DNN_CP_SCHED, DNN_CP_TRANSFER, DNN_CP_SUBMIT, /* gaps */
	DNN_CP_NPARTS
};
/* Their names, in that order: "compute", "allreduce", ..., "submit". */
extern const char *const dnn_cp_part_name[DNN_CP_NPARTS];

/* One task: times in µs, on StarPU's clock (simulated time in a simulation): submitted, ready
 * (pushed to the scheduler), its worker began fetching its data, started, ended. */
typedef struct {
	double submit, ready, fetch, start, end;
	int32_t worker;           /* -1: unknown */
	uint8_t cls;              /* DNN_CP_COMPUTE, DNN_CP_ALLREDUCE or DNN_CP_UPDATE */
	uint8_t remote;           /* reads a handle that arrived over MPI (see above) */
	uint8_t timed;            /* start/end known (its callback ran) */
	uint8_t after_redux;      /* the first access after a run of STARPU_REDUX contributions */
	uint32_t range_off, nranges; /* its predecessors: the ids of ranges[range_off .. + nranges) */
	const char *name;         /* its codelet's name (for the report by codelet), or NULL */
} dnn_cp_task;
typedef struct {
	uint32_t off, n; /* ids[off .. off + n) */
} dnn_cp_range;

typedef struct {
	double span;                /* µs, from t0 to the last task's end (0 when no task ran) */
	double part[DNN_CP_NPARTS]; /* µs of the observed chain per part; they add up to span */
	double queued;              /* µs of the chain's execution gated by the task's worker */
	double ideal;               /* µs, the longest path by execution times */
	long length;                /* tasks on the observed chain */
} dnn_cp_result;

/* The analysis of n tasks in submission order (a predecessor id not below its task's is
 * ignored), the span starting at t0; step (or NULL) is called with each task of the chain, last
 * first, and the µs of each part it adds. 0, or -1 when out of memory. */
typedef void (*dnn_cp_step_fn)(void *ctx, long task, const double part[DNN_CP_NPARTS]);
int dnn_cp_analyse(const dnn_cp_task *t, long n, const dnn_cp_range *ranges, const uint32_t *ids, double t0,
		   dnn_cp_result *res, dnn_cp_step_fn step, void *ctx);

/* The record: dnn_cp_enable installs the submission hook (once; cls gives a codelet's class),
 * dnn_cp_reset drops what was recorded and records from t0 on (nothing in flight), dnn_cp_finish
 * (every task done) analyses this rank's record, frees it and stops recording: 0 or -1 (memory).
 * report (or NULL): one line there, "critpath: rank R: ...", the chain's time by codelet (the
 * codelets with the most, each with its parts in ms: where the chain's waits are). */
void dnn_cp_enable(int (*cls)(const struct starpu_codelet *cl), int rank, int nranks);
void dnn_cp_reset(double t0);
int dnn_cp_finish(dnn_cp_result *res, FILE *report);
#endif
