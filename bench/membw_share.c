/* membw_share — memory-bandwidth sharing between CPU workers: the per-task time of this machine's
 * memory-bound kernels with 1 and with 2 concurrent workers, against what the simulation's CPU
 * node model (codelets/dnn_sim_model.h, dnn_sim_cpu_task_us) predicts for 2 from the time with 1.
 *
 * The machine's own constants come first, measured here the way the model counts them:
 *   - one core's FP32 peak: an AVX-512 FMA loop where the BLAS runs AVX-512 kernels, else AVX2 (the
 *     width the calibrated kernels use), 12 independent accumulators, timed by the thread's CPU time;
 *   - the stream rates: a copy of 2 x 64 MiB (STREAM's count: each buffer once), one thread alone
 *     (core_gbs) and two threads at once, one per core (socket_gbs = their sum).
 * Then each kernel, on buffers well beyond the last-level cache (each thread its own): its time
 * alone on core 0 (t1), and both threads calling it at once, released together by a barrier each
 * round (t2: the mean of the two threads' times). Bytes are the task's buffers, as the simulation
 * sees them (StarPU's handles). The model's prediction for 2 workers:
 *   dnn_sim_cpu_task_us(here, here, t1, bytes, 2): the compute part unchanged, the memory part at
 *   min(core_gbs, socket_gbs / 2).
 * Each figure is the median over the clean rounds of --reps (every thread held its core: CPU time
 * >= 95% of wall time), and again as the median CPU time per call over all rounds (cpu_* columns:
 * robust where no round is clean); the peak the best of 5 by CPU time. Prints a CSV (--csv FILE,
 * else stdout).
 */
#define _GNU_SOURCE
#include <cblas.h>
#include <getopt.h>
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "batchnorm.h"
#include "batchnorm_simd.h"
#include "conv2d_winograd.h"
#include "cpu_kernels.h"
#include "dnn_sim_model.h"
#include "knobs.h"
#include "vec.h"

void openblas_set_num_threads(int num_threads);

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ------------------------------------------------------------------ kernels, one context each */
typedef struct {
	float *a, *b, *c, *d, *e, *g, *work;
	dnn_batchnorm_args bn;
	dnn_wino_shape ws;
	size_t n;
	int m; /* sgemm size */
} kctx;

typedef struct {
	const char *name;
	void (*run)(kctx *);
	double (*bytes)(const kctx *); /* the task's buffers, as the simulation counts them */
	double (*flops)(const kctx *);
} kernel;

static void k_copy(kctx *k) { memcpy(k->a, k->b, k->n * sizeof(float)); }
static double b_copy(const kctx *k) { return 2.0 * k->n * sizeof(float); }
static void k_vec_add(kctx *k) { dnn_vec_add_cpu(k->a, k->b, k->n); }
static double b_vec_add(const kctx *k) { return 2.0 * k->n * sizeof(float); }
static void k_bn_fwd(kctx *k) { dnn_batchnorm_forward_train_cpu(k->a, k->g, k->b, k->c, k->d, &k->bn); }
/* x, y, gamma, beta, saved */
static double bn_n(const kctx *k) { return (double)k->bn.N * k->bn.C * k->bn.HW; }
static double b_bn_fwd(const kctx *k) { return (2.0 * bn_n(k) + 5.0 * k->bn.C) * sizeof(float); }
static void k_bn_bwd(kctx *k)
{
	/* dx = e, dgamma and dbeta after gamma and beta, x = b, gamma = c, saved = g, dy = a */
	dnn_batchnorm_backward_cpu(k->e, k->c + k->bn.C, k->d + k->bn.C, k->b, k->c, k->g, k->a, &k->bn);
}
/* dx, dgamma, dbeta, x, gamma, saved, dy */
static double b_bn_bwd(const kctx *k) { return (3.0 * bn_n(k) + 6.0 * k->bn.C) * sizeof(float); }
static void k_wino(kctx *k) { dnn_wino_forward(k->a, k->b, k->c, &k->ws, 0.0f, k->work); }
static double b_wino(const kctx *k)
{
	const dnn_wino_shape *s = &k->ws;
	return ((double)s->N * s->C * s->H * s->W + (double)s->N * s->K * s->P * s->Q + (double)s->K * s->C * 9) *
	       sizeof(float);
}
static double f_wino(const kctx *k)
{
	const dnn_wino_shape *s = &k->ws;
	return 2.0 * s->N * s->K * s->P * s->Q * s->C * 9;
}
static void k_sgemm(kctx *k)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, k->m, k->m, k->m, 1.0f, k->a, k->m, k->b, k->m, 0.0f, k->c,
		    k->m);
}
static double b_sgemm(const kctx *k) { return 3.0 * k->m * k->m * sizeof(float); }
static double f_sgemm(const kctx *k) { return 2.0 * k->m * k->m * k->m; }
static double f_zero(const kctx *k) { (void)k; return 0; }

static const kernel kernels[] = {
	{"copy", k_copy, b_copy, f_zero},
	{"vec_add", k_vec_add, b_vec_add, f_zero},
	{"batchnorm_fwd", k_bn_fwd, b_bn_fwd, f_zero},
	{"batchnorm_bwd", k_bn_bwd, b_bn_bwd, f_zero},
	{"winograd_fwd", k_wino, b_wino, f_wino},
	{"sgemm", k_sgemm, b_sgemm, f_sgemm},
};
#define NKERNELS ((int)(sizeof(kernels) / sizeof(kernels[0])))

static float *falloc(size_t n)
{
	float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
	if (!p) {
		fprintf(stderr, "error: membw_share: out of memory (%zu floats)\n", n);
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		p[i] = (float)((i * 2654435761u) % 1000) * 1e-3f + 0.5f;
	return p;
}

/* Shapes beyond this machine's last-level cache (32 MiB) for the pair: 32 MiB per vector, 16 MiB
 * per activation tensor (batch norm, Winograd: x and y, 32 MiB per task, 64 MiB for two). Short
 * enough (a few ms) that many rounds run without another job taking the core. */
static void kctx_init(kctx *k)
{
	memset(k, 0, sizeof(*k));
	k->n = (size_t)8 << 20; /* the vectors: 8 Mi floats */
	k->bn = (dnn_batchnorm_args){.N = 64, .C = 64, .HW = 1024, .eps = 1e-5f, .momentum = 0.1f}; /* 4 Mi floats */
	k->ws = (dnn_wino_shape){.N = 16, .C = 64, .H = 64, .W = 64, .K = 64, .P = 64, .Q = 64, .pad_h = 1, .pad_w = 1};
	size_t wn = (size_t)k->ws.N * k->ws.C * k->ws.H * k->ws.W; /* 4 Mi floats */
	k->a = falloc(k->n > wn ? k->n : wn), k->b = falloc(k->n > wn ? k->n : wn);
	k->c = falloc(k->n), k->d = falloc(2 * (size_t)k->bn.C), k->e = falloc(k->n), k->g = falloc(3 * (size_t)k->bn.C);
	k->work = falloc(dnn_wino_work(&k->ws));
	k->m = 512;
}

/* ------------------------------------------------------------------ threads */
typedef struct {
	int cpu, reps;
	const kernel *kern;
	kctx *ctx;
	pthread_barrier_t *bar;
	double *times, *cpu_times; /* per round: wall and the thread's CPU time */
} worker;

static double thread_cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *worker_main(void *arg)
{
	worker *w = arg;
	pin(w->cpu);
	w->kern->run(w->ctx); /* warm-up: pages touched, caches in their steady state */
	for (int r = 0; r < w->reps; r++) {
		if (w->bar)
			pthread_barrier_wait(w->bar);
		double t = now_s(), c = thread_cpu_s();
		w->kern->run(w->ctx);
		w->times[r] = now_s() - t, w->cpu_times[r] = thread_cpu_s() - c;
	}
	return NULL;
}

/* The median per-call time (s) of kern on nthreads cores at once (mean over the threads), over
 * the clean rounds: those in which every thread held its core (CPU time >= 95% of wall time). On
 * this shared machine another job's thread can take a core mid-call; such a round times that job,
 * not the kernel, and with 2 threads it also leaves the other thread alone on the memory. *clean
 * gets the clean rounds' count; with none, every round counts (and *clean is 0). */
static double measure(const kernel *kern, kctx *ctx, int nthreads, int reps, int *clean, double *cpu_median)
{
	pthread_t th[2];
	worker w[2];
	pthread_barrier_t bar;
	double *times = malloc(sizeof(double) * (size_t)reps * 4), *cpu = times + (size_t)reps * 2;
	double *keep = malloc(sizeof(double) * (size_t)reps);
	if (!times || !keep) {
		fprintf(stderr, "error: membw_share: out of memory\n");
		exit(1);
	}
	if (nthreads == 2)
		pthread_barrier_init(&bar, NULL, 2);
	for (int i = 0; i < nthreads; i++) {
		w[i] = (worker){.cpu = i, .reps = reps, .kern = kern, .ctx = &ctx[i], .bar = nthreads == 2 ? &bar : NULL,
				.times = times + (size_t)i * reps, .cpu_times = cpu + (size_t)i * reps};
		pthread_create(&th[i], NULL, worker_main, &w[i]);
	}
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	/* the CPU time of every round: a thread that loses its core stops counting, so this figure
	 * holds even where no round was clean (a memory stall still counts as CPU time) */
	double sum = 0, csum = 0;
	for (int i = 0; i < nthreads; i++) {
		memcpy(keep, cpu + (size_t)i * reps, sizeof(double) * (size_t)reps);
		csum += median(keep, reps);
	}
	*cpu_median = csum / nthreads;
	*clean = 0;
	for (int r = 0; r < reps; r++) {
		int ok = 1;
		for (int i = 0; i < nthreads; i++)
			ok &= cpu[(size_t)i * reps + r] >= 0.95 * times[(size_t)i * reps + r];
		*clean += ok;
	}
	for (int i = 0; i < nthreads; i++) {
		int n = 0;
		for (int r = 0; r < reps; r++) {
			int ok = 1;
			for (int j = 0; j < nthreads; j++)
				ok &= cpu[(size_t)j * reps + r] >= 0.95 * times[(size_t)j * reps + r];
			if (ok || !*clean)
				keep[n++] = times[(size_t)i * reps + r];
		}
		sum += median(keep, n);
	}
	if (nthreads == 2)
		pthread_barrier_destroy(&bar);
	free(times), free(keep);
	return sum / nthreads;
}

/* One core's FP32 FMA peak, GFLOP/s: 12 independent vector FMAs per iteration. */
__attribute__((target("avx512f"))) static double peak_avx512(long iters)
{
	__m512 acc[12], x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
	for (int i = 0; i < 12; i++)
		acc[i] = _mm512_set1_ps((float)i);
	double t = thread_cpu_s(); /* the core's rate, not the share of it this shared machine gave us */
	for (long it = 0; it < iters; it++)
		for (int i = 0; i < 12; i++)
			acc[i] = _mm512_fmadd_ps(acc[i], x, y);
	t = thread_cpu_s() - t;
	float s = 0, out[16];
	for (int i = 0; i < 12; i++) {
		_mm512_storeu_ps(out, acc[i]);
		s += out[0];
	}
	if (s == 12345.678f) /* keep the loop */
		printf("#\n");
	return 12.0 * 16 * 2 * iters / t / 1e9;
}

__attribute__((target("avx2,fma"))) static double peak_avx2(long iters)
{
	__m256 acc[12], x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(0.9999999f);
	for (int i = 0; i < 12; i++)
		acc[i] = _mm256_set1_ps((float)i);
	double t = thread_cpu_s();
	for (long it = 0; it < iters; it++)
		for (int i = 0; i < 12; i++)
			acc[i] = _mm256_fmadd_ps(acc[i], x, y);
	t = thread_cpu_s() - t;
	float s = 0, out[8];
	for (int i = 0; i < 12; i++) {
		_mm256_storeu_ps(out, acc[i]);
		s += out[0];
	}
	if (s == 12345.678f)
		printf("#\n");
	return 12.0 * 8 * 2 * iters / t / 1e9;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: dnn_membw_share [--reps N (default 21)] [--csv FILE] [--here-only]\n"
		   "  per-task time of memory-bound kernels with 1 and 2 concurrent workers (cores 0 and 1)\n"
		   "  against the simulation's bandwidth-sharing model (codelets/dnn_sim_model.h)\n"
		   "  --here-only: print this machine's cores as ANP_SIM_CPU_HERE wants them, and stop\n");
}

int main(int argc, char **argv)
{
	int reps = 21;
	const char *csv = NULL;
	int here_only = 0;
	static const struct option opts[] = {{"reps", required_argument, 0, 'r'},
					     {"csv", required_argument, 0, 'c'},
					     {"here-only", no_argument, 0, 'o'},
					     {"help", no_argument, 0, 'h'},
					     {0, 0, 0, 0}};
	for (int o; (o = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		char *end;
		switch (o) {
		case 'r':
			reps = (int)strtol(optarg, &end, 10);
			if (*end || reps < 3 || reps > 10000) {
				fprintf(stderr, "error: --reps '%s': expected 3..10000\n", optarg);
				return 2;
			}
			break;
		case 'c': csv = optarg; break;
		case 'o': here_only = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "error: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	char kerr[512], kline[1024];
	if (dnn_knobs_load(kerr, sizeof(kerr)) != 0 ||
	    dnn_cpu_kernels_init(argv, dnn_knobs_get()->blas_coretype, dnn_knobs_get()->blas_reexec_from, kerr,
				 sizeof(kerr)) != 0) { /* the BLAS at this CPU's ISA; may re-execute (cpu_kernels.h) */
		fprintf(stderr, "error: %s\n", kerr);
		return 2;
	}
	dnn_cpu_kernels_describe(kline, sizeof(kline));
	if (!dnn_wino_supported()) {
		fprintf(stderr, "error: membw_share: this CPU lacks AVX2/FMA (the Winograd kernel's)\n");
		return 1;
	}
	openblas_set_num_threads(1);
	FILE *out = csv ? fopen(csv, "w") : stdout;
	if (!out) {
		fprintf(stderr, "error: --csv %s: cannot write\n", csv);
		return 1;
	}
	pin(0);
	/* The peak of the vector width the BLAS runs (what a calibration with these kernels timed):
	 * with OPENBLAS_CORETYPE=Haswell on an AVX-512 CPU, 8-wide AVX2 FMAs, half the 16-wide peak. */
	const int wide = __builtin_cpu_supports("avx512f") && strstr(kline, "(avx512 kernels") != NULL;
	double peak = 0;
	for (int i = 0; i < 5; i++) {
		double p = wide ? peak_avx512(50000000) : peak_avx2(50000000);
		peak = p > peak ? p : peak;
	}
	kctx ctx[2];
	kctx_init(&ctx[0]), kctx_init(&ctx[1]);
	/* the stream rates from the copy: core_gbs alone, socket_gbs with both cores */
	/* every kernel alone and in pairs first; the stream rates then come from the copy's row */
	double t1[NKERNELS], t2[NKERNELS], u1[NKERNELS], u2[NKERNELS]; /* wall (clean rounds), CPU time */
	int ok1[NKERNELS], ok2[NKERNELS];
	for (int i = NKERNELS - 1; i >= 0; i--) { /* the copy (row 0) last, the pages all touched by then */
		if (here_only && i != 0)
			continue;
		t1[i] = measure(&kernels[i], ctx, 1, reps, &ok1[i], &u1[i]) * 1e6;
		t2[i] = measure(&kernels[i], ctx, 2, reps, &ok2[i], &u2[i]) * 1e6;
		u1[i] *= 1e6, u2[i] *= 1e6;
	}
	/* no clean round of the copy (a busy machine): its CPU time, which a lost core does not lengthen */
	const int clean = ok1[0] > 0 && ok2[0] > 0;
	const double cb = b_copy(&ctx[0]), c1 = (clean ? t1[0] : u1[0]) * 1e-6, c2 = (clean ? t2[0] : u2[0]) * 1e-6;
	/* this machine as one socket of its online CPUs (2 here) around its last-level cache, as sysfs
	 * gives it (glibc's sysconf said 384 MiB in this VM: the host's, where sysfs and lscpu say 32) */
	const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	long l3 = 0;
	FILE *fc = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "r");
	if (fc) {
		char unit = 0;
		if (fscanf(fc, "%ld%c", &l3, &unit) >= 1)
			l3 *= unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1;
		fclose(fc);
	}
	dnn_sim_cpu here = {.peak_gflops = peak, .core_gbs = cb / c1 / 1e9, .socket_gbs = 2 * cb / c2 / 1e9,
			    .cores_per_socket = ncpu > 0 ? (int)ncpu : 1, .llc_mb = l3 > 0 ? l3 / 1e6 : 0};
	if (here.socket_gbs < here.core_gbs)
		here.socket_gbs = here.core_gbs; /* the model's rule: a socket streams at least as one core */
	snprintf(here.name, sizeof(here.name), "here");
	if (here_only) {
		printf("here:%.1f:%.2f:%.2f:%d:%.1f\n", here.peak_gflops, here.core_gbs, here.socket_gbs,
		       here.cores_per_socket, here.llc_mb);
		return 0;
	}
	fprintf(out, "# here: peak %.1f GFLOP/s per core (%s FMA), core_gbs %.2f, socket_gbs %.2f (2 cores), reps %d\n",
		peak, wide ? "AVX-512" : "AVX2", here.core_gbs, here.socket_gbs, reps);
	fprintf(out, "# %s; winograd GEMMs %s, batch norm %s\n", kline, dnn_wino_set_avx512(1) ? "avx512" : "avx2",
		dnn_batchnorm_set_simd(1) ? "avx2" : "portable");
	fprintf(out, "# ANP_SIM_CPU_HERE=here:%.1f:%.2f:%.2f:%d:%.1f\n", peak, here.core_gbs, here.socket_gbs,
		here.cores_per_socket, here.llc_mb);
	fprintf(out, "kernel,bytes,mflop,t1_us,t2_us,measured_ratio,model_mem1_us,predicted_t2_us,predicted_ratio,error,"
		     "clean_rounds_1,clean_rounds_2,cpu_t1_us,cpu_t2_us,cpu_measured_ratio,cpu_predicted_t2_us,"
		     "cpu_predicted_ratio,cpu_error\n");
	for (int i = 0; i < NKERNELS; i++) {
		const kernel *k = &kernels[i];
		const double bytes = k->bytes(&ctx[0]);
		double mem1 = 0;
		dnn_sim_cpu_task_us(&here, &here, t1[i], bytes, 1, &mem1, NULL);
		const double pred = dnn_sim_cpu_task_us(&here, &here, t1[i], bytes, 2, NULL, NULL);
		const double cpred = dnn_sim_cpu_task_us(&here, &here, u1[i], bytes, 2, NULL, NULL);
		fprintf(out, "%s,%.0f,%.1f,%.1f,%.1f,%.3f,%.1f,%.1f,%.3f,%+.3f,", k->name, bytes, k->flops(&ctx[0]) / 1e6,
			t1[i], t2[i], t2[i] / t1[i], mem1, pred, pred / t1[i], pred / t2[i] - 1);
		fprintf(out, "%d,%d,%.1f,%.1f,%.3f,%.1f,%.3f,%+.3f\n", ok1[i], ok2[i], u1[i], u2[i], u2[i] / u1[i], cpred,
			cpred / u1[i], cpred / u2[i] - 1);
	}
	if (csv)
		fclose(out);
	return 0;
}
