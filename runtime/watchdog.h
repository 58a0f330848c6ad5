/* watchdog.h — `--step-timeout`: the step watchdog of multi-rank training runs.
 * Multi-rank runs only. A rank whose peer or host became unreachable (link down, partition)
 * waits in StarPU-MPI for data that never comes, and Open MPI notices a lost TCP peer only
 * after the kernel's retransmission timeout (~15 min). A watchdog thread ends such a run: when
 * no step completes (and no evaluation or checkpoint ends) for step_timeout seconds, it names
 * the rank, its host and the stalled step, flushes the metrics rows and calls MPI_Abort (with
 * a SIGALRM backstop should MPI_Abort itself block). The last checkpoint is untouched: it is
 * written atomically, so an abort mid-step leaves the previous one intact. */
#ifndef DNN_WATCHDOG_H
#define DNN_WATCHDOG_H
#include <stdint.h>
#include <stdio.h>

typedef struct {
	double timeout;           /* --step-timeout, seconds */
	uint64_t done;            /* global steps completed at the start (a resumed run's) */
	FILE *metrics;            /* flushed before the abort (may be NULL) */
	const char *metrics_path;
	int rank, nranks;
} dnn_watchdog_cfg;

/* Starts the thread; nothing for one rank, a timeout of 0, or the simulation build. A thread
 * that cannot start is a warning (the run goes on without it). */
void dnn_watchdog_start(const dnn_watchdog_cfg *c);
/* Progress: done = the global steps completed so far (or (uint64_t)-1: a phase ended, same count). */
void dnn_watchdog_progress(uint64_t done);
/* Stops and joins the thread, if it runs. */
void dnn_watchdog_stop(void);
#endif
