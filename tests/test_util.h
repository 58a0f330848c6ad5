/* test_util.h — small helpers for the C tests: seeded RNG, comparisons, StarPU start-up. */
#ifndef DNN_TEST_UTIL_H
#define DNN_TEST_UTIL_H
#include <starpu.h>
#include <stddef.h>
#include <stdint.h>

#include "conv2d.h"

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

/* Buffers: a vector handle over n floats (int32s) in main RAM; malloc'd floats and calloc'd
 * (zeroed) doubles that exit(1) when memory runs out (n = 0 gives a valid 1-element block);
 * fill_nan: NaN everywhere, so an output written in STARPU_W mode cannot depend on its old
 * content; to_double: a malloc'd double copy. */
starpu_data_handle_t reg_f(float *p, size_t n);
starpu_data_handle_t reg_i(int32_t *p, size_t n);
float *alloc_f(size_t n);
double *alloc_d(size_t n);
void fill_nan(float *p, size_t n);
double *to_double(const float *x, size_t n);

/* Convolution test shapes (P, Q still to be computed by dnn_conv2d_args_finish) and the naive
 * double-precision forward reference: y (N, K, P, Q) = conv(x (N, C, H, W), w (K, C, R, S)). */
dnn_conv2d_args conv_shape(int N, int C, int H, int W, int K, int R, int S, int stride, int pad,
			   int dilation);
void conv2d_forward_ref(double *y, const float *x, const float *w, const dnn_conv2d_args *a);
void conv2d_forward_ref_d(double *y, const double *x, const double *w, const dnn_conv2d_args *a);

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
