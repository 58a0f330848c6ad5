/* test_util.h — small helpers for the C tests: seeded RNG, comparisons, StarPU start-up, one task on a
 * worker, temporary image files, double-precision references (conv, batch norm). */
#ifndef DNN_TEST_UTIL_H
#define DNN_TEST_UTIL_H
#include <starpu.h>
#include <stddef.h>
#include <stdint.h>

#include "conv2d.h"
#include "dataset.h"
#include "model.h"

#define TEST_SKIP 77

/* Starts StarPU (no MPI); exits 77 when no worker exists. */
void test_starpu_init(int *argc, char ***argv);
void test_starpu_shutdown(void);

/* Deterministic xorshift RNG, uniform in [lo, hi). */
void test_rng_seed(uint64_t seed);
float test_rng_uniform(float lo, float hi);
int test_rng_int(int lo, int hi_inclusive);
void test_fill_uniform(float *x, size_t n, float lo, float hi);

/* Comparisons of n floats with a reference; each prints the worst index on failure and returns 1
 * when within tol.
 *   test_close_mixed: max |got - ref| / max(1, |ref|), a MIXED error: absolute where |ref| < 1,
 *     relative above. The usual check for kernels whose outputs are O(1).
 *   test_close_rel: max |got - ref| / |ref|, a true relative error for every element (a zero
 *     reference admits only an exact zero). Use it where a test claims a relative tolerance. */
int test_close_mixed(const char *what, const float *got, const double *ref, size_t n, double tol);
int test_close_mixed_f(const char *what, const float *got, const float *ref, size_t n, double tol);
int test_close_rel(const char *what, const float *got, const double *ref, size_t n, double tol);
int test_close_rel_f(const char *what, const float *got, const float *ref, size_t n, double tol);
/* Bit-for-bit equality of n floats (+0 and -0 differ, NaNs must be the same NaN): the promise of
 * kernels that compute the same operations in the same order. Prints the first differing index
 * on failure; returns 1 when equal. */
int test_same_bits(const char *what, const float *got, const float *want, size_t n);

/* The bf16 tests' bounded comparison (op_bf16.c, gpu_conv2d_bf16.c): the elements of got outside
 * |got - want| <= tol * |scale[i]| + floor (scale NULL: 1), counted (the caller asserts the count: 0 for
 * the bound, > 0 for a negative control under a tighter one). loud: the worst element's ratio to
 * the bound is printed (how close the bound is), with the element when some are outside; quiet: one
 * "negative control" line with the count and the worst ratio. No check of its own. */
size_t test_count_outside(const char *what, const float *got, const float *want, const float *scale, double tol,
			  double floor, size_t n, int loud);

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
/* Every parameter tensor of m brought home (dnn_model_sync_to_host) and concatenated in order
 * into one malloc'd array, of *n floats: what the training tests compare between runs. Exits 1
 * when a step fails. */
float *test_model_params(dnn_model *m, long *n);
/* The training tests' run: the net `text` (named `source` in messages), seed 123, the input
 * normalised by ds's channel statistics, batches of `batch` samples ((s * batch + i) * 7919 mod
 * ds->n for step s) in `chunks` chunks, one slot, SGD lr 0.05 momentum 0.9 weight decay 5e-4.
 * train = 1: `steps` training steps; 0: `steps` evaluation steps. losses[s]: step s's mean loss.
 * Returns the parameters afterwards (test_model_params, *nparams floats). Exits 1 on failure. */
float *test_train_net(const dnn_dataset *ds, const char *text, const char *source, int chunks, int train,
		      int steps, int batch, double *losses, long *nparams);

/* One task of `cl` over the buffers and modes d[0..n), with a private copy of the argsz bytes
 * at args (StarPU frees it, on every path), named `name`, on worker `worker` (STARPU_EXECUTE_ON_WORKER; -1:
 * wherever the scheduler puts it). No wait. Returns 0, or a negative errno (StarPU's, or -ENOMEM
 * when the copy cannot be made), which also counts as a failed check. */
int test_task(struct starpu_codelet *cl, int worker, const void *args, size_t argsz, struct starpu_data_descr *d,
	      int n, const char *name);

/* N random samples of `per` bytes (malloc'd; exits 1 without memory) and their labels in [0, 9],
 * drawn from test_rng_int in that order: the loaders' in-memory data sets. */
uint8_t *test_random_samples(int N, size_t per, int32_t *labels);

/* The loaders' image files: a fresh directory from mkdtemp(tmpl) (its path left in dir, of
 * dirlen bytes) holding dir/fNN.png for NN in [0, nf); file i is a PNG of w[i] x h[i] pixels of C
 * channels, random bytes from test_rng_int in file order, except the last nbad, which hold text
 * and are not images. Returns the nf malloc'd paths; exits 1 when a step fails.
 * test_image_files_free frees them and removes dir (NULL: leaves the files). */
char **test_image_files(char *dir, size_t dirlen, const char *tmpl, int nf, int nbad, int C, const int *w,
			const int *h);
void test_image_files_free(char **paths, int nf, const char *dir);
/* Removes dir and everything below it (a warning, not a failure, when it cannot). */
void test_rmtree(const char *dir);

/* Convolution test shapes (P, Q still to be computed by dnn_conv2d_args_finish) and the naive
 * double-precision forward reference: y (N, K, P, Q) = conv(x (N, C, H, W), w (K, C, R, S)). */
dnn_conv2d_args conv_shape(int N, int C, int H, int W, int K, int R, int S, int stride, int pad,
			   int dilation);
void conv2d_forward_ref(double *y, const float *x, const float *w, const dnn_conv2d_args *a);
/* Does the CPU Winograd path run here (AVX2 + FMA)? Asks with a conv forced to DNN_CONV_ALGO_WINOGRAD
 * (its args' algo). */
int test_winograd_runs_here(void);
void conv2d_forward_ref_d(double *y, const double *x, const double *w, const dnn_conv2d_args *a);

/* Training-mode batch norm in double: z = gamma * (x - mean) * invstd + beta over x (N, C, HW),
 * with the biased variance and invstd = 1 / sqrt(var + eps); mean, var, invstd (C each) out when
 * mean is non-NULL. */
void bn_train_ref(double *z, double *mean, double *var, double *invstd, const double *x, const double *gamma,
		  const double *beta, int N, int C, int HW, double eps);

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
