/* jobstop.c — --stop-after-steps, --time-limit and SIGTERM/SIGUSR1 (see jobstop.h). */
#include "jobstop.h"

#include <signal.h>
#include <starpu_mpi.h>
#include <stdio.h>
#include <string.h>

#include "progress.h"

/* The one process-wide state here, and it must be: a signal handler has no other way to speak.
 * It only records the signal; the training loop reads it between steps. */
static volatile sig_atomic_t g_stop_signal;

static void on_stop_signal(int sig)
{
	g_stop_signal = sig;
}

/* Above every handle's tag (graph/dist.c counts from 1) and breakdown.c's (1 << 40). */
#define JOBSTOP_TAG_BASE ((starpu_mpi_tag_t)1 << 41)

int dnn_jobstop_init(dnn_jobstop *j, long stop_after, double time_limit, double t0, int rank, int nranks, char *err,
		     size_t errlen)
{
	memset(j, 0, sizeof(*j));
	j->stop_after = stop_after, j->time_limit = time_limit, j->t0 = t0;
	j->rank = rank, j->nranks = nranks;
	g_stop_signal = 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGUSR1, &sa, NULL) != 0) {
		snprintf(err, errlen, "sigaction(SIGTERM, SIGUSR1): %s", strerror(errno));
		return -1;
	}
	if (nranks > 1)
		starpu_variable_data_register(&j->verdict_h, STARPU_MAIN_RAM, (uintptr_t)j->msg, sizeof(j->msg));
	return 0;
}

/* Rank 0's (or a lone process's) own reading: the signal flag, then the clock. */
static int32_t local_verdict(const dnn_jobstop *j, int *sig)
{
	*sig = (int)g_stop_signal;
	if (*sig)
		return DNN_STOP_SIGNAL;
	if (j->time_limit > 0 && dnn_now() - j->t0 >= j->time_limit)
		return DNN_STOP_TIME;
	return DNN_STOP_NONE;
}

/* Rank 0: the step after which the verdict is exchanged next, about DNN_JOBSTOP_EVERY_S from now at
 * the pace of the steps since the last exchange (every step until there is one), and never past
 * --time-limit: the run stops as near the limit as with an exchange every step. */
static uint64_t next_exchange(dnn_jobstop *j, uint64_t gstep)
{
	const double now = dnn_now();
	uint64_t gap = 1;
	if (j->last_t > 0 && gstep > j->last_step) {
		const double per_step = (now - j->last_t) / (double)(gstep - j->last_step);
		double steps = per_step > 0 ? DNN_JOBSTOP_EVERY_S / per_step : DNN_JOBSTOP_MAX_GAP;
		if (j->time_limit > 0 && per_step > 0) {
			const double left = (j->t0 + j->time_limit - now) / per_step;
			steps = left < steps ? left : steps;
		}
		gap = steps >= DNN_JOBSTOP_MAX_GAP ? DNN_JOBSTOP_MAX_GAP : steps >= 1 ? (uint64_t)steps : 1;
	}
	j->last_t = now, j->last_step = gstep;
	return gstep + gap;
}

int dnn_jobstop_after_step(dnn_jobstop *j, uint64_t gstep, char *err, size_t errlen)
{
	if (j->reason != DNN_STOP_NONE)
		return 0; /* agreed already: every rank stopped exchanging at the same step */
	int sig = 0;
#ifdef DNN_JOBSTOP_BENCH_NO_EXCHANGE
	/* bench/jobstop_cost.sh's baseline build only: no message, each rank decides alone, so ranks
	 * can disagree (and hang) as soon as a stop comes. It measures what the exchange costs. */
	if (1) {
#else
	if (j->nranks <= 1) {
#endif
		j->reason = (dnn_stop_reason)local_verdict(j, &sig);
		j->signal = sig;
		return 0;
	}
	/* Between exchanges no rank decides anything: each learnt the same next step from rank 0. */
	if (j->next_at != 0 && gstep < j->next_at)
		return 0;
	const starpu_mpi_tag_t tag = JOBSTOP_TAG_BASE + (starpu_mpi_tag_t)gstep;
	int rc = 0;
	if (j->rank == 0) {
		/* The handle is only ever used by this thread, and every send of the last verdict has
		 * been handed its copy: acquire waits for them before the new value goes in. */
		if ((rc = starpu_data_acquire(j->verdict_h, STARPU_W)) != 0)
			goto fail;
		j->msg[0] = local_verdict(j, &sig);
		j->msg[1] = (int64_t)next_exchange(j, gstep);
		j->signal = sig;
		starpu_data_release(j->verdict_h);
		for (int r = 1; r < j->nranks && rc == 0; r++)
			rc = starpu_mpi_isend_detached(j->verdict_h, r, tag, MPI_COMM_WORLD, NULL, NULL);
		if (rc != 0)
			goto fail;
	} else {
		MPI_Status st;
		if ((rc = starpu_mpi_recv(j->verdict_h, 0, tag, MPI_COMM_WORLD, &st)) != 0)
			goto fail;
		if ((rc = starpu_data_acquire(j->verdict_h, STARPU_R)) != 0)
			goto fail;
		starpu_data_release(j->verdict_h);
		j->signal = (int)g_stop_signal; /* ours, for the message only: rank 0 decided */
	}
	j->reason = (dnn_stop_reason)j->msg[0];
	j->next_at = (uint64_t)j->msg[1];
	return 0;
fail:
	snprintf(err, errlen, "agreeing on the step to stop at (step %llu): %s", (unsigned long long)gstep,
		 strerror(rc < 0 ? -rc : rc));
	return -1;
}

int dnn_jobstop_before_submit(dnn_jobstop *j)
{
	if (j->reason == DNN_STOP_NONE && j->stop_after > 0 && j->job_steps >= j->stop_after)
		j->reason = DNN_STOP_STEPS;
	if (j->reason != DNN_STOP_NONE)
		return 1;
	j->job_steps++;
	return 0;
}

const char *dnn_jobstop_reason(const dnn_jobstop *j)
{
	switch (j->reason) {
	case DNN_STOP_STEPS: return "steps";
	case DNN_STOP_TIME: return "time";
	case DNN_STOP_SIGNAL: return j->signal == SIGUSR1 ? "SIGUSR1" : "SIGTERM";
	default: return "none";
	}
}

void dnn_jobstop_free(dnn_jobstop *j)
{
	if (j->verdict_h) {
		starpu_data_unregister(j->verdict_h);
		j->verdict_h = NULL;
	}
	signal(SIGTERM, SIG_DFL);
	signal(SIGUSR1, SIG_DFL);
}
