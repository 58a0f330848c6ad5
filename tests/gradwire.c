/* gradwire.c — the bf16 wire's accuracy check (a helper of tests/scripts/mpi_grad_bf16.sh, run under mpirun;
 * not a test by itself): `gradwire ALGO[,ALGO...] [N_ELEMS] [SEED]` (several algorithms in one job: one start-up).
 *
 * Every rank j fills the gradient of one dense weight of N_ELEMS floats (default 4098: chunks of 1025 and 1024 at
 * 4 ranks, so that the ring and rhd take it and cut it unevenly) with g_j[i], a hash of (SEED, j, i): a full
 * 24-bit mantissa in [-1, 1) times 2^e, e in [-6, 6], so the sums mix magnitudes and signs. The weight is then
 * all-reduced alone (dnn_dist_reduce_param, no update) by ALGO twice, --grad-precision fp32 then bf16, and every
 * rank checks its sums element by element against the exact one (a double sum of the same g_j[i], which every
 * rank can compute):
 *
 *   fp32: |r32 - S| <= ((1 + 2^-24)^(N-1) - 1) A              A = sum_j |g_j[i]|, S = sum_j g_j[i]
 *   bf16: |r16 - S| <= ((1 + 2^-8)^k (1 + 2^-24)^(N-1) - 1) A
 *         |r16 - r32| <= the sum of the two bounds (the bf16 reduction equals the fp32 one within them)
 *
 * Why: every message is a partial sum rounded to bf16 once (round to nearest: a relative error of at most
 * 2^-8, bf16's unit roundoff with its 8-bit significand), every add is fp32 (at most 2^-24 each), and each
 * contribution g_j reaches the result through at most k roundings and N - 1 adds, so the result is
 * sum_j g_j prod(1 + d) with at most k factors |d| <= 2^-8 and N - 1 factors |d| <= 2^-24 (normal numbers: the
 * values here are far from fp32's denormals). k = the roundings on the algorithm's longest path, which its file
 * in graph/allreduce/ derives: tree ceil(log2 N) + 1, ring N, rhd log2 N + 1, ps 2.
 *
 * Also: every bf16 sum is bf16-representable (its low 16 bits zero: the replicas hold what was sent), and the
 * negative controls must fail: the bf16 sums checked against the fp32 bound (they must exceed it somewhere, or
 * the wire did not round: a bf16 path that sent fp32 would pass everything else), and a copy of them with one
 * element moved by 1.5x its bound. Each rank prints `gradwire: rank R ALGO ... hash=H`, H an FNV-1a hash of its
 * bf16 sums' bits: the script compares the ranks' and two runs' hashes (the same bits). Exit 0, or 1 with one
 * FAIL line per failed check, 2 on a usage error. */
#include <math.h>
#include <starpu.h>
#include <starpu_mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "dnn_runtime.h"
#include "graph.h"
#include "knobs.h"
#include "model.h"

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Rank j's gradient element i. */
static float contribution(uint64_t seed, int j, size_t i)
{
	const uint64_t h = mix(seed ^ mix(((uint64_t)j << 40) ^ i));
	const float m = (float)(int32_t)(h & 0xffffff) / (float)(1 << 23) - 1.0f; /* [-1, 1), 24 bits */
	return ldexpf(m, (int)((h >> 32) % 13) - 6);
}

/* The roundings on the longest path of each algorithm (graph/allreduce/<name>.c). */
static int roundings(dnn_allreduce a, int N)
{
	int lg = 0;
	while ((1 << lg) < N)
		lg++;
	return a == DNN_ALLREDUCE_RING ? N : a == DNN_ALLREDUCE_RHD ? lg + 1 : a == DNN_ALLREDUCE_PS ? 2 : lg + 1;
}

/* One all-reduce of the weight by `a`, fp32 or bf16 wire, into out[n]. 0, or 1 after an error line. */
static int reduce_once(dnn_graph *g, dnn_allreduce a, int bf16, uint64_t seed, float *out, size_t n)
{
	char err[512];
	dnn_model m;
	dnn_plan p;
	const int rank = dnn_runtime_rank(), N = dnn_runtime_nranks();
	if (dnn_model_create(&m, g, seed, err, sizeof(err)) != 0) {
		fprintf(stderr, "FAIL: %s\n", err);
		return 1;
	}
	int rc = 1;
	if (dnn_model_enable_dist(&m, DNN_MODE_SYNC, a, bf16, dnn_runtime_ranks_on_one_node(), 0, 0, 0, 1, err,
				  sizeof(err)) != 0 ||
	    dnn_plan_create_sharded(&p, &m, N, 1, 1, dnn_knobs_get(), err, sizeof(err)) != 0) {
		fprintf(stderr, "FAIL: %s\n", err);
		dnn_model_destroy(&m);
		return 1;
	}
	starpu_data_handle_t hg = m.params[0].hg, sum = NULL;
	if ((size_t)m.params[0].n != n || starpu_data_acquire(hg, STARPU_W) != 0) {
		fprintf(stderr, "FAIL: the weight has %ld elements, not %zu (or cannot be written)\n", m.params[0].n, n);
		goto out;
	}
	float *gp = (float *)starpu_vector_get_local_ptr(hg);
	for (size_t i = 0; i < n; i++)
		gp[i] = contribution(seed, rank, i);
	starpu_data_release(hg);
	int r = dnn_dist_reduce_param(&p, 0, &sum);
	int w = starpu_mpi_wait_for_all(MPI_COMM_WORLD);
	if (r != 0 || w != 0 || starpu_data_acquire(sum, STARPU_R) != 0) {
		fprintf(stderr, "FAIL: the all-reduce failed (%d, %d)\n", r, w);
		goto out;
	}
	memcpy(out, (const float *)starpu_vector_get_local_ptr(sum), n * sizeof(float));
	starpu_data_release(sum);
	rc = 0;
out:
	starpu_mpi_wait_for_all(MPI_COMM_WORLD);
	dnn_plan_destroy(&p);
	dnn_model_destroy(&m);
	return rc;
}

/* Elements of r outside S +- coef * A (and the largest |r - S| / (coef * A)). */
static size_t outside(const float *r, const double *S, const double *A, size_t n, double coef, double *worst)
{
	size_t bad = 0;
	*worst = 0;
	for (size_t i = 0; i < n; i++) {
		const double e = fabs((double)r[i] - S[i]), b = coef * A[i];
		bad += !(e <= b);
		if (b > 0 && e / b > *worst)
			*worst = e / b;
	}
	return bad;
}

static int check(dnn_allreduce a, const float *r32, const float *r16, uint64_t seed, size_t n)
{
	const int rank = dnn_runtime_rank(), N = dnn_runtime_nranks(), k = roundings(a, N);
	double *S = calloc(n, sizeof(double)), *A = calloc(n, sizeof(double));
	float *moved = malloc(n * sizeof(float));
	if (!S || !A || !moved) {
		fprintf(stderr, "FAIL: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		for (int j = 0; j < N; j++) {
			const double g = contribution(seed, j, i);
			S[i] += g, A[i] += fabs(g);
		}
	const double c32 = pow(1 + 0x1p-24, N - 1) - 1, c16 = pow(1 + 0x1p-8, k) * pow(1 + 0x1p-24, N - 1) - 1;
	double w32, w16, wd, wneg, wmoved;
	int fails = 0;
	if (outside(r32, S, A, n, c32, &w32))
		fails++, fprintf(stderr, "FAIL: rank %d %s fp32: beyond (N-1) fp32 adds' bound (worst %.3g x)\n", rank,
				 dnn_allreduce_name(a), w32);
	if (outside(r16, S, A, n, c16, &w16))
		fails++, fprintf(stderr, "FAIL: rank %d %s bf16: beyond %d roundings' bound (worst %.3g x)\n", rank,
				 dnn_allreduce_name(a), k, w16);
	/* |r16 - r32| against the two bounds: r32 stands in for S, with c32 A added on. */
	size_t bad = 0;
	wd = 0;
	for (size_t i = 0; i < n; i++) {
		const double e = fabs((double)r16[i] - (double)r32[i]), b = (c16 + c32) * A[i];
		bad += !(e <= b);
		if (b > 0 && e / b > wd)
			wd = e / b;
	}
	if (bad)
		fails++, fprintf(stderr, "FAIL: rank %d %s: bf16 and fp32 sums differ beyond the bounds (%zu)\n", rank,
				 dnn_allreduce_name(a), bad);
	uint64_t hash = 0xcbf29ce484222325ull;
	size_t not_bf16 = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &r16[i], sizeof(u));
		not_bf16 += (u & 0xffffu) != 0;
		hash = (hash ^ u) * 0x100000001b3ull;
	}
	if (not_bf16)
		fails++, fprintf(stderr, "FAIL: rank %d %s: %zu bf16 sums are not bf16 values (fp32 kept)\n", rank,
				 dnn_allreduce_name(a), not_bf16);
	/* Negative controls: each must be caught. */
	if (outside(r16, S, A, n, c32, &wneg) == 0)
		fails++, fprintf(stderr, "FAIL: rank %d %s: the bf16 sums keep the fp32 bound: no rounding\n",
				 rank, dnn_allreduce_name(a));
	memcpy(moved, r16, n * sizeof(float));
	moved[n / 2] = (float)(S[n / 2] + 1.5 * c16 * A[n / 2]);
	if (outside(moved, S, A, n, c16, &wmoved) == 0)
		fails++, fprintf(stderr, "FAIL: rank %d %s: an element moved by 1.5x its bound passes the check\n", rank,
				 dnn_allreduce_name(a));
	printf("gradwire: rank %d %s ranks=%d n=%zu roundings=%d worst_fp32=%.3f worst_bf16=%.3f worst_diff=%.3f "
	       "bf16_vs_fp32_bound=%.1f hash=%016llx\n",
	       rank, dnn_allreduce_name(a), N, n, k, w32, w16, wd, wneg, (unsigned long long)hash);
	fflush(stdout);
	free(S), free(A), free(moved);
	return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
	char err[512], text[128], list[64];
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: gradwire tree|ring|rhd|ps[,...] [N_ELEMS] [SEED]\n");
		return 2;
	}
	dnn_allreduce algos[8];
	int na = 0;
	snprintf(list, sizeof(list), "%s", argv[1]);
	for (char *w = strtok(list, ","); w; w = strtok(NULL, ",")) {
		dnn_allreduce a = DNN_ALLREDUCE_TREE;
		while (a < DNN_ALLREDUCE_AUTO && strcmp(w, dnn_allreduce_name(a)))
			a++;
		if (a == DNN_ALLREDUCE_AUTO || na == 8) {
			fprintf(stderr, "gradwire: '%s': expected up to 8 of tree, ring, rhd, ps\n", argv[1]);
			return 2;
		}
		algos[na++] = a;
	}
	const long n = argc > 2 ? atol(argv[2]) : 4098;
	const uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
	if (na == 0 || n < 2 || n % 2 || n / 2 > DNN_MAX_SPATIAL) {
		fprintf(stderr, "gradwire: '%s' '%ld': expected an algorithm and an even N_ELEMS, 2 to %d\n", argv[1],
			n, 2 * DNN_MAX_SPATIAL);
		return 2;
	}
	snprintf(text, sizeof(text), "input x 1 1 %ld\ndense f x out=2\nsoftmax_xent loss f\n", n / 2);
	if (dnn_runtime_init(&argc, &argv, 1, err, sizeof(err)) != 0) {
		fprintf(stderr, "FAIL: %s\n", err);
		return 1;
	}
	int rc = 0;
	for (int i = 0; i < na; i++)
		if (dnn_runtime_nranks() < 2 ||
		    dnn_allreduce_check_ranks(algos[i], dnn_runtime_nranks(), err, sizeof(err)) != 0) {
			fprintf(stderr, "gradwire: needs mpirun with 2 or more ranks that %s takes\n", argv[1]);
			dnn_runtime_shutdown();
			return 2;
		}
	dnn_graph g;
	float *r32 = malloc((size_t)n * sizeof(float)), *r16 = malloc((size_t)n * sizeof(float));
	if (!r32 || !r16 || dnn_graph_parse(&g, text, "gradwire", err, sizeof(err)) != 0) {
		fprintf(stderr, "FAIL: %s\n", r32 && r16 ? err : "out of memory");
		rc = 1;
	} else {
		for (int i = 0; i < na; i++) {
			const dnn_allreduce a = algos[i];
			if (reduce_once(&g, a, 0, seed, r32, (size_t)n) != 0 ||
			    reduce_once(&g, a, 1, seed, r16, (size_t)n) != 0)
				rc = 1;
			else
				rc |= check(a, r32, r16, seed, (size_t)n);
		}
		dnn_graph_free(&g);
	}
	free(r32), free(r16);
	dnn_runtime_shutdown();
	return rc;
}
