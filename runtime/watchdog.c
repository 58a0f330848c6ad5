/* watchdog.c — --step-timeout: the step watchdog of multi-rank runs (watchdog.h). */
#include "watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <starpu_mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "knobs.h"    /* ANP_HOST */
#include "progress.h" /* dnn_now */

typedef struct {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int running, stop;
	double timeout, last; /* seconds; dnn_now() of the last progress */
	uint64_t done;        /* global steps completed */
	FILE *metrics;
	const char *metrics_path;
	int rank, nranks;
} step_watchdog;

static step_watchdog g_wd = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* Progress: done = the global steps completed so far (or (uint64_t)-1: a phase ended, same count). */
void dnn_watchdog_progress(uint64_t done)
{
	if (!g_wd.running)
		return;
	pthread_mutex_lock(&g_wd.mu);
	g_wd.last = dnn_now();
	if (done != (uint64_t)-1)
		g_wd.done = done;
	pthread_mutex_unlock(&g_wd.mu);
}

static void *watchdog_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&g_wd.mu);
	while (!g_wd.stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&g_wd.cv, &g_wd.mu, &ts);
		if (g_wd.stop || dnn_now() - g_wd.last < g_wd.timeout)
			continue;
		uint64_t done = g_wd.done;
		pthread_mutex_unlock(&g_wd.mu);
		/* ANP_HOST: set by launchers whose hosts share one hostname (tests/net/agent.sh). */
		char host[256] = "?";
		const char *env_host = dnn_knobs_get()->host;
		if (env_host && *env_host)
			snprintf(host, sizeof(host), "%s", env_host);
		else if (gethostname(host, sizeof(host)) != 0)
			snprintf(host, sizeof(host), "?");
		host[sizeof(host) - 1] = 0;
		if (g_wd.metrics && (fflush(g_wd.metrics) != 0 || fsync(fileno(g_wd.metrics)) != 0))
			fprintf(stderr, "warning: --metrics %s: flushing failed: %s\n", g_wd.metrics_path, strerror(errno));
		fprintf(stderr, "error: rank %d of %d (host %s): step %llu has not completed in %g s (--step-timeout): "
				"a rank or its host is unreachable or stopped; rank %d stops the job\n",
			g_wd.rank, g_wd.nranks, host, (unsigned long long)done + 1, g_wd.timeout, g_wd.rank);
		fflush(stderr);
		alarm(10); /* should MPI_Abort block (its runtime unreachable too), SIGALRM ends the process */
		MPI_Abort(MPI_COMM_WORLD, 1);
		_exit(1);
	}
	pthread_mutex_unlock(&g_wd.mu);
	return NULL;
}

void dnn_watchdog_start(const dnn_watchdog_cfg *c)
{
#ifdef DNN_SIMGRID
	(void)c; /* simulated time: a real-time watchdog thread would measure nothing */
	return;
#endif
	if (c->nranks < 2 || !(c->timeout > 0))
		return;
	g_wd.timeout = c->timeout;
	g_wd.last = dnn_now();
	g_wd.done = c->done;
	g_wd.metrics = c->metrics, g_wd.metrics_path = c->metrics_path;
	g_wd.rank = c->rank, g_wd.nranks = c->nranks;
	g_wd.stop = 0;
	if (pthread_create(&g_wd.th, NULL, watchdog_main, NULL) != 0) {
		fprintf(stderr, "warning: --step-timeout: cannot start the watchdog thread; running without it\n");
		return;
	}
	g_wd.running = 1;
}

void dnn_watchdog_stop(void)
{
	if (!g_wd.running)
		return;
	pthread_mutex_lock(&g_wd.mu);
	g_wd.stop = 1;
	pthread_cond_signal(&g_wd.cv);
	pthread_mutex_unlock(&g_wd.mu);
	pthread_join(g_wd.th, NULL);
	g_wd.running = 0;
}
