/* jobstop.h — ending a training run early without changing it, as a cluster's job limits force:
 * --stop-after-steps N (this job trains N steps), --time-limit S (this job stops once S seconds
 * have passed since it started), and SIGTERM / SIGUSR1 (what Slurm sends before the wall-time
 * limit). The current steps finish, the checkpoint is written and the process exits with
 * DNN_EXIT_STOPPED; `--resume` then continues the same run: the learning-rate schedule, the data
 * order and every sum stay as the uninterrupted run defines them.
 *
 * Under mpirun every rank must stop after the same step, or the others would wait forever for
 * its part of the next all-reduce. The step count is the same on every rank; the clock and the
 * signals are not, so rank 0 decides: after reading back a step it sends its verdict to every
 * rank, which reads it when it reads back that step. The ranks then stop submitting at the same
 * step. The verdict goes with the step of the next exchange, about DNN_JOBSTOP_EVERY_S later at
 * the steps' pace (never past --time-limit), so fast steps do not each wait for a message:
 * exchanged every step, it cost lenet5 on 2 ranks 5-7% of its images/s (bench/jobstop_cost.sh,
 * docs/studies/2026-12-07-deterministic-cost.md). */
#ifndef DNN_JOBSTOP_H
#define DNN_JOBSTOP_H

#include <starpu.h>
#include <stdint.h>

/* The exit status of a run stopped before its end with its checkpoint written (resume it). */
#define DNN_EXIT_STOPPED 3

/* How often the ranks agree at most, in seconds, and in steps. A stop comes that much later (a
 * SIGTERM before a wall-time limit comes tens of seconds ahead). */
#define DNN_JOBSTOP_EVERY_S 0.1
#define DNN_JOBSTOP_MAX_GAP 1000

typedef enum { DNN_STOP_NONE = 0, DNN_STOP_STEPS, DNN_STOP_TIME, DNN_STOP_SIGNAL } dnn_stop_reason;

typedef struct {
	long stop_after;     /* --stop-after-steps: steps this job trains (0 = no limit) */
	double time_limit;   /* --time-limit: seconds from t0 (0 = no limit) */
	double t0;           /* when the job started (dnn_now) */
	long job_steps;      /* steps submitted by this job */
	int rank, nranks;
	dnn_stop_reason reason; /* agreed by every rank; NONE until then */
	int signal;          /* the signal that stopped it (DNN_STOP_SIGNAL) */
	uint64_t next_at;    /* the step whose verdict is exchanged next (0: the first one read back) */
	double last_t;       /* rank 0: when it last exchanged, after step last_step */
	uint64_t last_step;
	int64_t msg[2];      /* rank 0's verdict and next_at, sent to the others */
	starpu_data_handle_t verdict_h;
} dnn_jobstop;

/* Installs the SIGTERM and SIGUSR1 handlers (they only set a flag) and, under mpirun, registers
 * the verdict's handle. 0, or -1 with one line in err. */
int dnn_jobstop_init(dnn_jobstop *j, long stop_after, double time_limit, double t0, int rank, int nranks, char *err,
		     size_t errlen);
/* The step `gstep` (1-based, global) has been read back on this rank: agree with the others on
 * whether to stop (a message from rank 0 under mpirun). 0, or -1 with one line in err. */
int dnn_jobstop_after_step(dnn_jobstop *j, uint64_t gstep, char *err, size_t errlen);
/* Before submitting a step: 1 if this job must submit no more steps (the agreed verdict, or
 * --stop-after-steps, which every rank counts alike). Counts the step otherwise. */
int dnn_jobstop_before_submit(dnn_jobstop *j);
/* What stopped the run, for messages and the result line: "steps", "time", "SIGTERM", ... */
const char *dnn_jobstop_reason(const dnn_jobstop *j);
/* Unregisters the handle and restores the default signal handlers. */
void dnn_jobstop_free(dnn_jobstop *j);

#endif
