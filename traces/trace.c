/* trace.c — `--trace DIR`: FxT recording through StarPU's environment, conversion at exit.
 *
 * The conversion runs the tools as child processes (StarPU's starpu_fxt_tool, ViTE, the summary
 * script), each with its output in a log file in DIR, so a crash or a complaint of one of them
 * becomes one error line here and never takes the app down.
 */
#include "trace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <starpu_config.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dnn_runtime.h"
#include "knobs.h"

#ifndef DNN_STARPU_BINDIR
#define DNN_STARPU_BINDIR ""
#endif

#define PROF_SUFFIX "prof_file" /* StarPU appends _<rank> */
#define MAX_RANKS 64            /* STARPU_FXT_MAX_FILES in StarPU's default build */

static char g_dir[PATH_MAX];   /* absolute trace directory; empty when tracing is off */
static time_t g_start;         /* prof files older than this belong to an earlier run */

int dnn_trace_available(void)
{
#ifdef STARPU_USE_FXT
	return 1;
#else
	return 0;
#endif
}

/* mkdir -p */
static int make_dirs(const char *path)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return errno = ENAMETOOLONG, -1;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
		return -1;
	return 0;
}

int dnn_trace_setup(const char *dir, char *err, size_t errlen)
{
	if (!dnn_trace_available()) {
		snprintf(err, errlen,
			 "--trace: the StarPU in use was built without FxT (no STARPU_USE_FXT); rebuild it with "
			 "--with-fxt (scripts/bootstrap.sh does)");
		return -1;
	}
	struct stat st;
	if (!dir[0]) {
		snprintf(err, errlen, "--trace: empty directory name");
		return -1;
	}
	if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "--trace: '%s' exists and is not a directory", dir);
		return -1;
	}
	if (make_dirs(dir) != 0) {
		snprintf(err, errlen, "--trace: cannot create directory '%s': %s", dir, strerror(errno));
		return -1;
	}
	if (access(dir, W_OK | X_OK) != 0) {
		snprintf(err, errlen, "--trace: directory '%s' is not writable: %s", dir, strerror(errno));
		return -1;
	}
	if (!realpath(dir, g_dir)) {
		snprintf(err, errlen, "--trace: '%s': %s", dir, strerror(errno));
		return -1;
	}
	char prefix[PATH_MAX + 2];
	snprintf(prefix, sizeof(prefix), "%s/", g_dir);
	if (setenv("STARPU_FXT_TRACE", "1", 1) != 0 || setenv("STARPU_FXT_PREFIX", prefix, 1) != 0 ||
	    setenv("STARPU_FXT_SUFFIX", PROF_SUFFIX, 1) != 0 ||
	    unsetenv("STARPU_GENERATE_TRACE") != 0) { /* we convert ourselves, once, on rank 0 */
		snprintf(err, errlen, "--trace: cannot set StarPU's FxT environment: %s", strerror(errno));
		return -1;
	}
	g_start = time(NULL);
	return 0;
}

/* ---------------------------------------------------------------- child processes */

/* Run argv[0] (a path) with stdout+stderr into log, in cwd, with one extra "K=V" (or NULL).
 * Returns its exit status, 127 when it could not start, -1 when it ran past timeout_s (killed),
 * 128+N when killed by signal N. */
static int run_tool(char *const argv[], const char *cwd, const char *log, int timeout_s, const char *env_kv)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0)
		return 127;
	if (pid == 0) {
		if (cwd && chdir(cwd) != 0)
			_exit(127);
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		int nul = open("/dev/null", O_RDONLY);
		if (nul >= 0) {
			dup2(nul, 0);
			close(nul);
		}
		unsetenv("STARPU_FXT_TRACE");
		if (env_kv)
			putenv((char *)env_kv);
		execv(argv[0], argv);
		fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	struct timespec tick = {0, 20 * 1000 * 1000};
	long waited_ms = 0;
	for (;;) {
		int status;
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		if (r < 0 && errno != EINTR)
			return 127;
		if (waited_ms >= (long)timeout_s * 1000) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		nanosleep(&tick, NULL);
		waited_ms += 20;
	}
}

static int is_exec(const char *p) { return access(p, X_OK) == 0; }

/* Find an executable: $STARPU_PREFIX/bin (when in_starpu), StarPU's build-time bin dir, $PATH. */
static int find_exec(const char *name, int in_starpu, char *out, size_t n)
{
	const char *pre = getenv("STARPU_PREFIX");
	if (in_starpu && pre && *pre) {
		snprintf(out, n, "%s/bin/%s", pre, name);
		if (is_exec(out))
			return 0;
	}
	if (in_starpu && DNN_STARPU_BINDIR[0]) {
		snprintf(out, n, "%s/%s", DNN_STARPU_BINDIR, name);
		if (is_exec(out))
			return 0;
	}
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		const char *colon = strchr(path, ':');
		size_t len = colon ? (size_t)(colon - path) : strlen(path);
		if (len > 0) {
			snprintf(out, n, "%.*s/%s", (int)len, path, name);
			if (is_exec(out))
				return 0;
		}
		path += len + (colon ? 1 : 0);
	}
	return -1;
}

/* The traces/ folder with the scripts: $DNN_TRACES_DIR, the source tree we were built from,
 * or next to the executable (<build>/apps/starpu_anp -> <build>/../traces). */
static int find_traces_dir(char *out, size_t n)
{
	char probe[PATH_MAX + 32];
	const char *env = dnn_knobs_get()->traces_dir; /* DNN_TRACES_DIR, checked at start-up */
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[len > 0 ? len : 0] = '\0';
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	const char *cands[4] = {env, DNN_SOURCE_DIR "/traces", NULL, NULL};
	char c2[PATH_MAX + 16], c3[PATH_MAX + 16];
	if (exe[0]) {
		snprintf(c2, sizeof(c2), "%s/../../traces", exe);
		snprintf(c3, sizeof(c3), "%s/../traces", exe);
		cands[2] = c2, cands[3] = c3;
	}
	for (int i = 0; i < 4; i++) {
		if (!cands[i] || !cands[i][0])
			continue;
		snprintf(probe, sizeof(probe), "%s/trace_summary.py", cands[i]);
		if (access(probe, R_OK) == 0) {
			snprintf(out, n, "%s", cands[i]);
			return 0;
		}
	}
	return -1;
}

static int find_python(char *out, size_t n)
{
	if (is_exec("/usr/bin/python3")) {
		snprintf(out, n, "/usr/bin/python3");
		return 0;
	}
	return find_exec("python3", 0, out, n);
}

/* ---------------------------------------------------------------- conversion */

typedef struct {
	int rank;
	char path[PATH_MAX + 320];
	off_t size;
} prof_file;

static int cmp_rank(const void *a, const void *b)
{
	return ((const prof_file *)a)->rank - ((const prof_file *)b)->rank;
}

/* This run's prof files in g_dir (name prof_file_<rank>, written since g_start), sorted by rank. */
static int list_prof_files(prof_file *f, int max)
{
	DIR *d = opendir(g_dir);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	const size_t plen = strlen(PROF_SUFFIX "_");
	while ((e = readdir(d)) && n < max) {
		if (strncmp(e->d_name, PROF_SUFFIX "_", plen) != 0)
			continue;
		const char *num = e->d_name + plen;
		if (!*num || strspn(num, "0123456789") != strlen(num) || strlen(num) > 6)
			continue;
		snprintf(f[n].path, sizeof(f[n].path), "%s/%s", g_dir, e->d_name);
		struct stat st;
		if (stat(f[n].path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_mtime + 2 < g_start)
			continue;
		f[n].rank = atoi(num);
		f[n].size = st.st_size;
		n++;
	}
	closedir(d);
	qsort(f, (size_t)n, sizeof(*f), cmp_rank);
	return n;
}

static int nonempty(const char *dir, const char *name)
{
	char p[PATH_MAX + 64];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return stat(p, &st) == 0 && st.st_size > 0;
}

/* Does a line of the log start with s? (ViTE reports parse problems only in its output.) */
static int log_has_line(const char *log, const char *s)
{
	FILE *f = fopen(log, "r");
	if (!f)
		return 0;
	char line[1024];
	int found = 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strncmp(line, s, strlen(s)) == 0;
	fclose(f);
	return found;
}

int dnn_trace_finish(void)
{
	if (!g_dir[0] || dnn_runtime_rank() != 0)
		return 0;
	const int nranks = dnn_runtime_nranks();
	/* Under MPI the other ranks write their files as they shut down: wait for all of them, then
	 * until their sizes stop changing. */
	static prof_file files[MAX_RANKS], again[MAX_RANKS];
	int n = 0;
	struct timespec pause = {0, 200 * 1000 * 1000};
	for (int tries = 0; tries < 600; tries++) { /* 2 minutes at most */
		n = list_prof_files(files, MAX_RANKS);
		if (n >= nranks)
			break;
		nanosleep(&pause, NULL);
	}
	if (n == 0) {
		fprintf(stderr, "error: --trace: StarPU wrote no FxT file (%s/" PROF_SUFFIX "_<rank>); is STARPU_FXT_TRACE "
				"overridden?\n", g_dir);
		return 1;
	}
	if (n < nranks)
		fprintf(stderr, "warning: --trace: found %d of %d ranks' FxT files in %s; converting those\n", n, nranks,
			g_dir);
	if (nranks > 1) {
		for (int tries = 0; tries < 100; tries++) {
			nanosleep(&pause, NULL);
			int m = list_prof_files(again, MAX_RANKS), same = m == n;
			for (int i = 0; same && i < n; i++)
				same = again[i].size == files[i].size;
			memcpy(files, again, sizeof(files));
			n = m;
			if (same)
				break;
		}
	}

	/* 1. starpu_fxt_tool: all ranks' files at once, so an MPI run gives one merged trace. */
	char fxt[PATH_MAX], log[PATH_MAX + 64];
	if (find_exec("starpu_fxt_tool", 1, fxt, sizeof(fxt)) != 0) {
		fprintf(stderr, "error: --trace: starpu_fxt_tool not found (looked in $STARPU_PREFIX/bin, %s, $PATH)\n",
			DNN_STARPU_BINDIR[0] ? DNN_STARPU_BINDIR : "StarPU's bin dir");
		return 1;
	}
	char *argv[8 + MAX_RANKS];
	int a = 0;
	argv[a++] = fxt;
	argv[a++] = "-d";
	argv[a++] = g_dir;
	argv[a++] = "-i";
	for (int i = 0; i < n; i++)
		argv[a++] = files[i].path;
	argv[a] = NULL;
	snprintf(log, sizeof(log), "%s/fxt_tool.log", g_dir);
	int rc = run_tool(argv, g_dir, log, 1800, NULL);
	if (rc != 0 || !nonempty(g_dir, "paje.trace") || !nonempty(g_dir, "tasks.rec")) {
		fprintf(stderr, "error: --trace: starpu_fxt_tool %s (see %s)\n",
			rc == -1 ? "ran past 30 min" : rc ? "failed" : "wrote no paje.trace/tasks.rec", log);
		return 1;
	}

	/* 2. ViTE's own SVG export: proves ViTE parses the trace, and gives a picture. */
	char vite[PATH_MAX];
	int have_svg = 0;
	if (find_exec("vite", 0, vite, sizeof(vite)) == 0) {
		char *vargv[] = {vite, "paje.trace", "-e", "trace.svg", NULL};
		snprintf(log, sizeof(log), "%s/vite.log", g_dir);
		rc = run_tool(vargv, g_dir, log, 600, "QT_QPA_PLATFORM=offscreen");
		have_svg = rc == 0 && nonempty(g_dir, "trace.svg");
		if (!have_svg)
			fprintf(stderr, "warning: --trace: ViTE's SVG export failed (see %s)\n", log);
		else if (!log_has_line(log, "0 errors and 0 warnings"))
			fprintf(stderr, "warning: --trace: ViTE reported problems parsing paje.trace (see %s)\n", log);
	} else {
		fprintf(stderr, "warning: --trace: ViTE (vite) not found; no trace.svg\n");
	}

	/* 3. The summary: summary.txt and gantt.png. */
	char py[PATH_MAX], tdir[PATH_MAX], script[PATH_MAX + 32];
	int have_summary = 0;
	if (find_python(py, sizeof(py)) == 0 && find_traces_dir(tdir, sizeof(tdir)) == 0) {
		snprintf(script, sizeof(script), "%s/trace_summary.py", tdir);
		char *sargv[] = {py, script, "--quiet", g_dir, NULL};
		snprintf(log, sizeof(log), "%s/trace_summary.log", g_dir);
		rc = run_tool(sargv, g_dir, log, 600, NULL);
		have_summary = rc == 0 && nonempty(g_dir, "summary.txt");
		if (!have_summary)
			fprintf(stderr, "warning: --trace: trace summary failed (see %s)\n", log);
	} else {
		fprintf(stderr, "warning: --trace: python3 or traces/trace_summary.py not found; no summary.txt\n");
	}
	fprintf(stderr, "trace: %s: paje.trace tasks.rec dag.dot%s%s%s from %d FxT file%s (view: vite %s/paje.trace)\n",
		g_dir, have_svg ? " trace.svg" : "", have_summary ? " summary.txt" : "",
		have_summary && nonempty(g_dir, "gantt.png") ? " gantt.png" : "", n, n > 1 ? "s" : "", g_dir);
	return 0;
}

/* ---------------------------------------------------------------- starpu_anp trace-summary|sweep */

int dnn_trace_tool_main(const char *tool, int argc, char **argv)
{
	char tdir[PATH_MAX], script[PATH_MAX + 32], interp[PATH_MAX];
	const int summary = strcmp(tool, "trace-summary") == 0;
	if (find_traces_dir(tdir, sizeof(tdir)) != 0) {
		fprintf(stderr, "starpu_anp %s: traces/ scripts not found (set DNN_TRACES_DIR)\n", tool);
		return 1;
	}
	snprintf(script, sizeof(script), "%s/%s", tdir, summary ? "trace_summary.py" : "sweep.sh");
	if (summary ? find_python(interp, sizeof(interp)) : find_exec("bash", 0, interp, sizeof(interp))) {
		fprintf(stderr, "starpu_anp %s: %s not found\n", tool, summary ? "python3" : "bash");
		return 1;
	}
	if (!summary && !dnn_knobs_get()->self_exe) { /* STARPU_ANP: the sweep runs this very binary */
		char exe[PATH_MAX];
		ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (len > 0) {
			exe[len] = '\0';
			if (setenv("STARPU_ANP", exe, 1) != 0) {
				fprintf(stderr, "starpu_anp %s: cannot set STARPU_ANP: %s\n", tool, strerror(errno));
				return 1;
			}
		}
	}
	char **args = calloc((size_t)argc + 3, sizeof(char *));
	if (!args)
		return 1;
	args[0] = interp;
	args[1] = script;
	for (int i = 0; i < argc; i++)
		args[i + 2] = argv[i];
	fflush(stdout);
	execv(interp, args);
	fprintf(stderr, "starpu_anp %s: cannot run %s: %s\n", tool, interp, strerror(errno));
	free(args);
	return 1;
}
