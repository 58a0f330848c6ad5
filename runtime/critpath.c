/* critpath.c — the task record and critical path of DNN_BREAKDOWN=1 (critpath.h). */
#include "critpath.h"

#include <pthread.h>
#include <starpu_mpi.h>
#include <stdlib.h>
#include <string.h>

#include "dnn_codelet.h"

const char *const dnn_cp_part_name[DNN_CP_NPARTS] = {"compute", "allreduce", "update",   "comm",  "reduce",
						     "wait",    "sched",     "transfer", "submit"};

/* ---------------------------------------------------------------- the analysis (pure) */

/* Order of "ended later": by end, then by id. */
static int later(const dnn_cp_task *t, long a, long b) { return t[a].end > t[b].end || (t[a].end == t[b].end && a > b); }

static const dnn_cp_task *g_sort_t; /* qsort's context (the analysis runs on one thread at a time) */
static int by_worker_end(const void *pa, const void *pb)
{
	const long a = *(const long *)pa, b = *(const long *)pb;
	const dnn_cp_task *t = g_sort_t;
	if (t[a].worker != t[b].worker)
		return t[a].worker < t[b].worker ? -1 : 1;
	return later(t, a, b) ? 1 : later(t, b, a) ? -1 : 0;
}

/* The task before x on x's worker: of the timed tasks of that worker ending no later than x's start,
 * the one that ended last, provided it comes before x in the "ended later" order; -1 if none.
 * ord: the timed tasks sorted by (worker, end, id); m of them. */
static long worker_pred(const dnn_cp_task *t, const long *ord, long m, long x)
{
	long lo = 0, hi = m; /* the first entry of a worker above x's, or of x's worker ending after x's start */
	while (lo < hi) {
		long mid = (lo + hi) / 2, k = ord[mid];
		if (t[k].worker < t[x].worker || (t[k].worker == t[x].worker && t[k].end <= t[x].start))
			lo = mid + 1;
		else
			hi = mid;
	}
	for (long i = lo - 1; i >= 0 && t[ord[i]].worker == t[x].worker; i--)
		if (ord[i] != x && later(t, x, ord[i]))
			return ord[i];
	return -1;
}

/* x's gate (critpath.h), -1 for none; *by_worker: 1 when it is x's worker predecessor only. */
static long gate_of(const dnn_cp_task *t, const dnn_cp_range *ranges, const uint32_t *ids, const long *ord, long m,
		    long x, int *by_worker)
{
	const double eps = 1.0; /* µs: the real clock's grain between an end and a successor's start */
	long g = -1;
	for (uint32_t r = 0; r < t[x].nranges; r++) {
		const dnn_cp_range *rg = &ranges[t[x].range_off + r];
		for (uint32_t i = 0; i < rg->n; i++) {
			long p = ids[rg->off + i];
			if (p >= x || !t[p].timed || t[p].end > t[x].start + eps || !later(t, x, p))
				continue;
			if (g < 0 || later(t, p, g))
				g = p;
		}
	}
	long w = t[x].worker >= 0 ? worker_pred(t, ord, m, x) : -1;
	*by_worker = w >= 0 && (g < 0 || later(t, w, g));
	return *by_worker ? w : g;
}

static double clamp(double v, double lo, double hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The observed chain, from the task that ended last back to t0 (critpath.h). */
static void walk_chain(const dnn_cp_task *t, long n, const dnn_cp_range *ranges, const uint32_t *ids, const long *ord,
		       long m, double t0, dnn_cp_result *res, dnn_cp_step_fn step, void *ctx)
{
	long x = -1;
	for (long i = 0; i < n; i++)
		if (t[i].timed && (x < 0 || later(t, i, x)))
			x = i;
	if (x < 0)
		return;
	res->span = t[x].end - t0;
	while (x >= 0) {
		int by_worker = 0;
		const long g = gate_of(t, ranges, ids, ord, m, x, &by_worker);
		const double from = g >= 0 ? (t[g].end > t0 ? t[g].end : t0) : t0;
		const double start = t[x].start > from ? t[x].start : from;
		const double exec = t[x].end > start ? t[x].end - start : 0;
		double part[DNN_CP_NPARTS] = {0};
		part[t[x].cls < DNN_CP_COMM ? t[x].cls : DNN_CP_COMPUTE] = exec;
		if (by_worker)
			res->queued += exec;
		const double sub = clamp(t[x].submit, from, start), rdy = clamp(t[x].ready, sub, start),
			     fet = clamp(t[x].fetch, rdy, start);
		part[DNN_CP_SUBMIT] = sub - from;
		part[t[x].remote ? DNN_CP_COMM : t[x].after_redux ? DNN_CP_REDUCE : DNN_CP_WAIT] = rdy - sub;
		part[DNN_CP_SCHED] = fet - rdy;
		part[DNN_CP_TRANSFER] = start - fet;
		for (int k = 0; k < DNN_CP_NPARTS; k++)
			res->part[k] += part[k];
		if (step)
			step(ctx, x, part);
		res->length++;
		x = g;
	}
}

int dnn_cp_analyse(const dnn_cp_task *t, long n, const dnn_cp_range *ranges, const uint32_t *ids, double t0,
		   dnn_cp_result *res, dnn_cp_step_fn step, void *ctx)
{
	memset(res, 0, sizeof(*res));
	if (n <= 0)
		return 0;
	long *ord = malloc(sizeof(long) * (size_t)n);
	double *len = malloc(sizeof(double) * (size_t)n);
	if (!ord || !len) {
		free(ord), free(len);
		return -1;
	}
	long m = 0;
	for (long i = 0; i < n; i++) {
		if (t[i].timed && t[i].worker >= 0)
			ord[m++] = i;
		/* ideal: the longest path ending with i, by execution times (an untimed task weighs 0) */
		double best = 0;
		for (uint32_t r = 0; r < t[i].nranges; r++) {
			const dnn_cp_range *rg = &ranges[t[i].range_off + r];
			for (uint32_t k = 0; k < rg->n; k++)
				if (ids[rg->off + k] < (uint32_t)i && len[ids[rg->off + k]] > best)
					best = len[ids[rg->off + k]];
		}
		len[i] = best + (t[i].timed && t[i].end > t[i].start ? t[i].end - t[i].start : 0);
		if (len[i] > res->ideal)
			res->ideal = len[i];
	}
	g_sort_t = t;
	qsort(ord, (size_t)m, sizeof(long), by_worker_end);
	walk_chain(t, n, ranges, ids, ord, m, t0, res, step, ctx);
	free(ord), free(len);
	return 0;
}

/* ---------------------------------------------------------------- the record */

#define CP_BLOCK 4096 /* tasks per block: a block never moves, its callbacks write into it */
typedef struct {
	starpu_data_handle_t h;
	int mode;           /* the open group's access mode (0: no group yet) */
	int mpi_redux;      /* a STARPU_MPI_REDUX contribution since the last write: its readers wait for
			     * StarPU-MPI's inter-rank reduction */
	int mpi;            /* seen in a task of starpu_mpi_task_build: registered with StarPU-MPI (the
			     * app registers those for the whole run, graph/dist.c and bnstats.c; one
			     * unregistered within the span, whose address a plain handle then took,
			     * would be asked about, and StarPU-MPI would assert) */
	dnn_cp_range prev;  /* the group before the open one */
	uint32_t *open, nopen; /* the open group's tasks */
	size_t cap;
} cp_handle;
typedef struct {
	dnn_cp_task *rec;
	void (*func)(void *);
	void *arg;
	int arg_free;
} cp_chain;

static pthread_mutex_t cp_lock = PTHREAD_MUTEX_INITIALIZER;
static int (*cp_cls)(const struct starpu_codelet *cl);
static int cp_on, cp_rank, cp_nranks = 1, cp_oom;
static double cp_t0;
static dnn_cp_task **cp_blocks;
static long cp_n, cp_blocks_cap;
static dnn_cp_range *cp_ranges;
static uint32_t *cp_ids;
static size_t cp_nranges, cp_ranges_cap, cp_nids, cp_ids_cap;
static cp_handle *cp_hs; /* open addressing on the handle's address */
static size_t cp_hs_cap, cp_hs_n;

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : 8;
	while (c < need)
		c *= 2;
	void *q = realloc(*p, c * elem);
	if (!q)
		return -1;
	*p = q, *cap = c;
	return 0;
}

static size_t slot_of(cp_handle *hs, size_t cap, starpu_data_handle_t h)
{
	size_t i = ((uintptr_t)h >> 4) * 0x9E3779B97F4A7C15ull & (cap - 1);
	while (hs[i].h && hs[i].h != h)
		i = (i + 1) & (cap - 1);
	return i;
}

static cp_handle *handle_state(starpu_data_handle_t h)
{
	if (2 * (cp_hs_n + 1) > cp_hs_cap) {
		size_t cap = cp_hs_cap ? 2 * cp_hs_cap : 1024;
		cp_handle *hs = calloc(cap, sizeof(*hs));
		if (!hs)
			return NULL;
		for (size_t i = 0; i < cp_hs_cap; i++)
			if (cp_hs[i].h)
				hs[slot_of(hs, cap, cp_hs[i].h)] = cp_hs[i];
		free(cp_hs);
		cp_hs = hs, cp_hs_cap = cap;
	}
	cp_handle *s = &cp_hs[slot_of(cp_hs, cp_hs_cap, h)];
	if (!s->h)
		s->h = h, cp_hs_n++;
	return s;
}

static int concurrent(int a, int b)
{
	return (a == STARPU_R && b == STARPU_R) || (a == STARPU_REDUX && b == STARPU_REDUX) ||
	       ((a & STARPU_W) && (a & STARPU_COMMUTE) && (b & STARPU_W) && (b & STARPU_COMMUTE));
}

/* Whether an access in mode to h (a StarPU-MPI handle) waits for communication: it reads a handle
 * another rank owns (received), or the result of an inter-rank reduction, or it overwrites a
 * handle that StarPU-MPI is sending (its cache says "sent" since the last write: the write waits
 * for the send). */
static int waits_for_mpi(cp_handle *s, starpu_data_handle_t h, int mode)
{
	int owner = starpu_mpi_data_get_rank(h), r = 0;
	if (mode & STARPU_MPI_REDUX) {
		s->mpi_redux = 1;
		return 0;
	}
	r = (mode & STARPU_R) && ((owner >= 0 && owner != cp_rank) || s->mpi_redux);
	if ((mode & (STARPU_W | STARPU_REDUX)) && starpu_mpi_cache_is_enabled())
		for (int d = 0; d < cp_nranks && !r; d++)
			r = d != cp_rank && starpu_mpi_cached_send(h, d);
	if (mode & STARPU_W)
		s->mpi_redux = 0;
	return r;
}

/* Task `id`'s access to h in mode: its predecessor range, and h's groups (critpath.h); *remote
 * set when it waits for communication (waits_for_mpi). mpi: the task is StarPU-MPI's. */
static int access_handle(uint32_t id, starpu_data_handle_t h, int mode, int mpi, uint8_t *remote, uint8_t *after_redux)
{
	cp_handle *s = handle_state(h);
	if (!s)
		return -1;
	s->mpi |= mpi;
	if (s->mpi && cp_nranks > 1)
		*remote |= (uint8_t)waits_for_mpi(s, h, mode);
	if (!(s->mode && s->nopen && concurrent(s->mode, mode))) { /* close the open group */
		*after_redux |= s->nopen && s->mode == STARPU_REDUX;
		if (s->nopen) {
			if (grow((void **)&cp_ids, &cp_ids_cap, cp_nids + s->nopen, sizeof(uint32_t)) != 0)
				return -1;
			memcpy(cp_ids + cp_nids, s->open, sizeof(uint32_t) * s->nopen);
			s->prev = (dnn_cp_range){(uint32_t)cp_nids, s->nopen};
			cp_nids += s->nopen;
		}
		s->nopen = 0, s->mode = mode;
	}
	if (grow((void **)&s->open, &s->cap, s->nopen + 1, sizeof(uint32_t)) != 0)
		return -1;
	s->open[s->nopen++] = id;
	if (s->prev.n) {
		if (grow((void **)&cp_ranges, &cp_ranges_cap, cp_nranges + 1, sizeof(dnn_cp_range)) != 0)
			return -1;
		cp_ranges[cp_nranges++] = s->prev;
	}
	return 0;
}

static void fill_times(dnn_cp_task *r, struct starpu_task *task)
{
	struct starpu_profiling_task_info *pi = task->profiling_info;
	if (!pi)
		return;
	r->submit = starpu_timing_timespec_to_us(&pi->submit_time);
	r->start = starpu_timing_timespec_to_us(&pi->start_time);
	/* not set (a task StarPU did not push or fetch for): the gap goes to the stage before */
	r->ready = pi->push_start_time.tv_sec || pi->push_start_time.tv_nsec
			   ? starpu_timing_timespec_to_us(&pi->push_start_time) : r->start;
	r->fetch = pi->acquire_data_start_time.tv_sec || pi->acquire_data_start_time.tv_nsec
			   ? starpu_timing_timespec_to_us(&pi->acquire_data_start_time) : r->start;
	r->end = starpu_timing_timespec_to_us(&pi->end_time);
	r->worker = pi->workerid;
	r->timed = 1;
}

static void on_done(void *arg) { fill_times(arg, starpu_task_get_current()); }

static void on_done_chained(void *arg)
{
	cp_chain *c = arg;
	fill_times(c->rec, starpu_task_get_current());
	if (c->func)
		c->func(c->arg);
	if (c->arg_free)
		free(c->arg);
	free(c);
}

/* A new record for task (under cp_lock); NULL when out of memory. */
static dnn_cp_task *new_record(const struct starpu_task *task, int mpi)
{
	if (cp_n % CP_BLOCK == 0) {
		long b = cp_n / CP_BLOCK;
		if (b >= cp_blocks_cap) {
			long cap = cp_blocks_cap ? 2 * cp_blocks_cap : 64;
			dnn_cp_task **nb = realloc(cp_blocks, sizeof(*nb) * (size_t)cap);
			if (!nb)
				return NULL;
			cp_blocks = nb, cp_blocks_cap = cap;
		}
		if (!(cp_blocks[b] = malloc(sizeof(dnn_cp_task) * CP_BLOCK)))
			return NULL;
	}
	dnn_cp_task *r = &cp_blocks[cp_n / CP_BLOCK][cp_n % CP_BLOCK];
	memset(r, 0, sizeof(*r));
	r->worker = -1;
	r->cls = (uint8_t)cp_cls(task->cl);
	r->name = task->cl->name ? task->cl->name : task->cl->model ? task->cl->model->symbol : NULL;
	r->range_off = (uint32_t)cp_nranges;
	const uint32_t id = (uint32_t)cp_n++;
	const unsigned nb = STARPU_TASK_GET_NBUFFERS(task);
	for (unsigned i = 0; i < nb && task->sequential_consistency; i++) {
		starpu_data_handle_t h = STARPU_TASK_GET_HANDLE(task, i);
		int mode = (int)STARPU_TASK_GET_MODE(task, i) & ~(STARPU_SSEND | STARPU_LOCALITY | STARPU_NOFOOTPRINT);
		if (!starpu_data_get_sequential_consistency_flag(h))
			continue;
		if (access_handle(id, h, mode, mpi, &r->remote, &r->after_redux) != 0)
			return NULL;
	}
	r->nranges = (uint32_t)(cp_nranges - r->range_off);
	return r;
}

static void on_submit(struct starpu_task *task, int mpi)
{
	if (!cp_on || !task->cl)
		return;
	pthread_mutex_lock(&cp_lock);
	dnn_cp_task *r = cp_oom ? NULL : new_record(task, mpi);
	cp_chain *c = NULL;
	if (r && (task->callback_func || task->callback_arg) && !(c = malloc(sizeof(*c))))
		r = NULL;
	if (!r) {
		cp_oom = 1; /* dnn_cp_finish reports it */
	} else if (c) {
		*c = (cp_chain){r, task->callback_func, task->callback_arg, task->callback_arg_free};
		task->callback_func = on_done_chained, task->callback_arg = c, task->callback_arg_free = 0;
	} else {
		task->callback_func = on_done, task->callback_arg = r;
		task->callback_arg_free = 0; /* set by starpu_mpi_task_build: r is not StarPU's to free */
	}
	pthread_mutex_unlock(&cp_lock);
}

static void drop_record(void)
{
	for (long b = 0; b * CP_BLOCK < cp_n; b++)
		free(cp_blocks[b]);
	for (size_t i = 0; i < cp_hs_cap; i++)
		free(cp_hs[i].open);
	free(cp_blocks), free(cp_ranges), free(cp_ids), free(cp_hs);
	cp_blocks = NULL, cp_ranges = NULL, cp_ids = NULL, cp_hs = NULL;
	cp_n = cp_blocks_cap = 0, cp_nranges = cp_ranges_cap = cp_nids = cp_ids_cap = cp_hs_cap = cp_hs_n = 0;
	cp_oom = 0;
}

void dnn_cp_enable(int (*cls)(const struct starpu_codelet *cl), int rank, int nranks)
{
	cp_cls = cls, cp_rank = rank, cp_nranks = nranks;
	dnn_task_set_submit_hook(on_submit);
}

void dnn_cp_reset(double t0)
{
	pthread_mutex_lock(&cp_lock);
	drop_record();
	cp_t0 = t0, cp_on = 1;
	pthread_mutex_unlock(&cp_lock);
}

/* The report by codelet (dnn_cp_finish): the chain's parts summed per codelet name. */
#define CP_NAMES 256
typedef struct {
	const dnn_cp_task *t;
	const char *name[CP_NAMES];
	double part[CP_NAMES][DNN_CP_NPARTS], total[CP_NAMES];
	int n;
} cp_by_name;

static void by_name_step(void *ctx, long task, const double part[DNN_CP_NPARTS])
{
	cp_by_name *b = ctx;
	const char *name = b->t[task].name ? b->t[task].name : "?";
	int i = 0;
	while (i < b->n && strcmp(b->name[i], name) != 0)
		i++;
	if (i == b->n && b->n == CP_NAMES)
		i = CP_NAMES - 1, name = "(others)"; /* more names than slots: the last one collects them */
	else if (i == b->n)
		b->name[b->n++] = name;
	for (int k = 0; k < DNN_CP_NPARTS; k++)
		b->part[i][k] += part[k], b->total[i] += part[k];
}

static void by_name_print(const cp_by_name *b, const dnn_cp_result *res, FILE *f)
{
	fprintf(f, "critpath: rank %d: span %.1f ms, chain of %ld tasks; by codelet, ms:", cp_rank, res->span / 1e3,
		res->length);
	char done[CP_NAMES] = {0};
	for (int shown = 0; shown < 8 && shown < b->n; shown++) {
		int best = -1;
		for (int i = 0; i < b->n; i++)
			if (!done[i] && (best < 0 || b->total[i] > b->total[best]))
				best = i;
		done[best] = 1;
		fprintf(f, "%s %s %.1f (", shown ? ";" : "", b->name[best], b->total[best] / 1e3);
		for (int k = 0, first = 1; k < DNN_CP_NPARTS; k++)
			if (b->part[best][k] >= 50) /* µs */
				fprintf(f, "%s%s %.1f", first ? "" : " ", dnn_cp_part_name[k], b->part[best][k] / 1e3), first = 0;
		fprintf(f, ")");
	}
	fprintf(f, "\n");
}

int dnn_cp_finish(dnn_cp_result *res, FILE *report)
{
	pthread_mutex_lock(&cp_lock);
	cp_on = 0;
	int rc = cp_oom ? -1 : 0;
	dnn_cp_task *all = rc == 0 && cp_n ? malloc(sizeof(dnn_cp_task) * (size_t)cp_n) : NULL;
	if (cp_n && !all)
		rc = -1;
	for (long b = 0; all && b * CP_BLOCK < cp_n; b++) {
		long k = cp_n - b * CP_BLOCK < CP_BLOCK ? cp_n - b * CP_BLOCK : CP_BLOCK;
		memcpy(all + b * CP_BLOCK, cp_blocks[b], sizeof(dnn_cp_task) * (size_t)k);
	}
	cp_by_name *b = rc == 0 && report ? calloc(1, sizeof(*b)) : NULL;
	if (b)
		b->t = all;
	if (rc == 0)
		rc = dnn_cp_analyse(all, cp_n, cp_ranges, cp_ids, cp_t0, res, b ? by_name_step : NULL, b);
	if (rc == 0 && b)
		by_name_print(b, res, report);
	free(b);
	free(all);
	drop_record();
	pthread_mutex_unlock(&cp_lock);
	return rc;
}
