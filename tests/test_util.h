/* test_util.h — small helpers for the C tests: seeded RNG, comparisons, StarPU start-up. */
#ifndef DNN_TEST_UTIL_H
#define DNN_TEST_UTIL_H
#include <stddef.h>
#include <stdint.h>

#define TEST_SKIP 77

/* Starts StarPU (no MPI); exits 77 when no worker exists. */
void test_starpu_init(int *argc, char ***argv);
void test_starpu_shutdown(void);

/* Deterministic xorshift RNG, uniform in [lo, hi). */
void test_rng_seed(uint64_t seed);
float test_rng_uniform(float lo, float hi);
int test_rng_int(int lo, int hi_inclusive);
void test_fill_uniform(float *x, size_t n, float lo, float hi);

/* Max |a-b| / max(1, |b|) over n; prints the worst index on failure. Returns 1 when within tol. */
int test_close(const char *what, const float *got, const double *ref, size_t n, double tol);
int test_close_f(const char *what, const float *got, const float *ref, size_t n, double tol);

/* Count of failed checks; tests exit with test_report(). */
extern int test_failures;
#define TEST_CHECK(cond, ...)                                                  \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);   \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
			test_failures++;                                       \
		}                                                              \
	} while (0)
int test_report(const char *name);
#endif
