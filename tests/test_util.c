#define _GNU_SOURCE /* nftw */
#include "test_util.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_source.h"
#include "dnn_codelet.h"
#include "dnn_runtime.h"
#include "knobs.h"

/* The one copy of stb's PNG writer in a test binary (test_image_files; unit_anp_images and
 * unit_cuda_coverage call it too). */
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

int test_failures;
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

void test_starpu_init(int *argc, char ***argv)
{
	char err[512];
	int rc = dnn_runtime_init(argc, argv, 0, err, sizeof(err));
	if (rc == -ENODEV) {
		fprintf(stderr, "SKIP: no StarPU worker available\n");
		exit(TEST_SKIP);
	}
	if (rc != 0) {
		fprintf(stderr, "error: %s\n", err);
		exit(1);
	}
}

void test_starpu_shutdown(void) { dnn_runtime_shutdown(); }

void test_rng_seed(uint64_t seed) { rng_state = seed ? seed : 0x9e3779b97f4a7c15ull; }

static uint64_t next_u64(void)
{
	uint64_t x = rng_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

float test_rng_uniform(float lo, float hi)
{
	return lo + (hi - lo) * (float)((next_u64() >> 40) / (double)(1ull << 24));
}

int test_rng_int(int lo, int hi) { return lo + (int)(next_u64() % (uint64_t)(hi - lo + 1)); }

void test_fill_uniform(float *x, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++)
		x[i] = test_rng_uniform(lo, hi);
}

/* The worst element of |got - ref| / den(ref) over n (NaN counts as the worst); den is
 * max(1, |ref|) for the mixed check, |ref| for the relative one (ref = 0 then allows only an exact
 * 0: any difference is an infinite relative error). */
static int close_check(const char *what, const float *got, const double *ref, size_t n, double tol, int relative)
{
	double worst = 0;
	size_t wi = 0;
	for (size_t i = 0; i < n; i++) {
		double diff = fabs((double)got[i] - ref[i]);
		double den = relative ? fabs(ref[i]) : fmax(1.0, fabs(ref[i]));
		double d = diff == 0 ? 0 : diff / den; /* den = 0 (relative): +inf */
		if (!(d <= worst) || isnan(d)) {
			worst = isnan(d) ? INFINITY : d;
			wi = i;
		}
	}
	if (!(worst <= tol)) {
		fprintf(stderr, "FAIL %s: %s %.3g > %.3g at [%zu]: got %.8g want %.8g\n", what,
			relative ? "relative error |d|/|ref|" : "mixed abs/rel error |d|/max(1,|ref|)", worst, tol, wi,
			(double)got[wi], ref[wi]);
		test_failures++;
		return 0;
	}
	return 1;
}

static double *widen(const float *x, size_t n)
{
	double *r = malloc((n ? n : 1) * sizeof(double));
	if (!r) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		r[i] = x[i];
	return r;
}

int test_close_mixed(const char *what, const float *got, const double *ref, size_t n, double tol)
{
	return close_check(what, got, ref, n, tol, 0);
}

int test_close_mixed_f(const char *what, const float *got, const float *ref, size_t n, double tol)
{
	double *r = widen(ref, n);
	int ok = close_check(what, got, r, n, tol, 0);
	free(r);
	return ok;
}

int test_close_rel(const char *what, const float *got, const double *ref, size_t n, double tol)
{
	return close_check(what, got, ref, n, tol, 1);
}

int test_close_rel_f(const char *what, const float *got, const float *ref, size_t n, double tol)
{
	double *r = widen(ref, n);
	int ok = close_check(what, got, r, n, tol, 1);
	free(r);
	return ok;
}

int test_same_bits(const char *what, const float *got, const float *want, size_t n)
{
	size_t i = 0;
	while (i < n && memcmp(&got[i], &want[i], sizeof(float)) == 0)
		i++;
	if (i == n)
		return 1;
	fprintf(stderr, "FAIL %s: not bit-identical at [%zu] of %zu: got %.9g want %.9g\n", what, i, n, (double)got[i],
		(double)want[i]);
	test_failures++;
	return 0;
}

size_t test_count_outside(const char *what, const float *got, const float *want, const float *scale, double tol,
			  double floor, size_t n, int loud)
{
	size_t bad = 0, worst = 0;
	double wr = -1;
	for (size_t i = 0; i < n; i++) {
		const double lim = tol * (scale ? fabs((double)scale[i]) : 1.0) + floor;
		const double e = fabs((double)got[i] - (double)want[i]);
		if (!(e <= lim))
			bad++;
		const double r = e / (lim > 0 ? lim : 1e-300);
		if (r > wr)
			wr = r, worst = i;
	}
	if (n == 0)
		printf("  %s: no elements\n", what);
	else if (bad && loud)
		printf("  %s: %zu of %zu outside the bound; worst [%zu] got %.9g want %.9g (|err| %.3g, %.2fx the "
		       "bound)\n",
		       what, bad, n, worst, (double)got[worst], (double)want[worst],
		       fabs((double)got[worst] - (double)want[worst]), wr);
	else if (loud)
		printf("  %s: worst error %.3f of the bound\n", what, wr);
	else
		printf("  %s: negative control: %zu of %zu outside the control's tolerance (worst %.1fx)\n", what, bad, n,
		       wr);
	return bad;
}

int test_report(const char *name)
{
	if (test_failures) {
		fprintf(stderr, "%s: %d check(s) failed\n", name, test_failures);
		return 1;
	}
	printf("%s: all checks passed\n", name);
	return 0;
}

starpu_data_handle_t reg_f(float *p, size_t n)
{
	starpu_data_handle_t h;
	starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)p, n, sizeof(float));
	return h;
}

starpu_data_handle_t reg_i(int32_t *p, size_t n)
{
	starpu_data_handle_t h;
	starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)p, n, sizeof(int32_t));
	return h;
}

float *alloc_f(size_t n)
{
	float *p = malloc((n ? n : 1) * sizeof(float));
	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	return p;
}

double *alloc_d(size_t n)
{
	double *p = calloc(n ? n : 1, sizeof(double));
	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	return p;
}

void fill_nan(float *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = NAN;
}

double *to_double(const float *x, size_t n)
{
	double *d = alloc_d(n);
	for (size_t i = 0; i < n; i++)
		d[i] = x[i];
	return d;
}

float *test_model_params(dnn_model *m, long *n)
{
	char err[512];
	if (dnn_model_sync_to_host(m, err, sizeof(err)) != 0) {
		fprintf(stderr, "FAIL: test_model_params: %s\n", err);
		exit(1);
	}
	long total = 0;
	for (int i = 0; i < m->nparams; i++)
		total += m->params[i].n;
	float *out = alloc_f((size_t)total);
	for (long i = 0, o = 0; i < m->nparams; o += m->params[i].n, i++)
		memcpy(out + o, m->params[i].w, sizeof(float) * (size_t)m->params[i].n);
	*n = total;
	return out;
}

float *test_train_net(const dnn_dataset *ds, const char *text, const char *source, int chunks, int train,
		      int steps, int batch, double *losses, long *nparams)
{
	char err[512];
	dnn_graph g;
	dnn_model m;
	dnn_plan p;
	int *idx = malloc(sizeof(int) * (size_t)(batch > 0 ? batch : 1));
	if (!idx || dnn_graph_parse(&g, text, source, err, sizeof(err)) != 0 ||
	    dnn_model_create(&m, &g, 123, err, sizeof(err)) != 0) {
		fprintf(stderr, "FAIL: %s: %s\n", source, idx ? err : "out of memory");
		exit(1);
	}
	dnn_dataset_channel_stats(ds, m.in_mean, m.in_std);
	/* the environment's config (DNN_FUSE, DNN_CONV_ALGO, ...), as the app's plans */
	if (dnn_plan_create(&p, &m, batch, chunks, 1, train, dnn_knobs_get(), err, sizeof(err)) != 0) {
		fprintf(stderr, "FAIL: %s: plan: %s\n", source, err);
		exit(1);
	}
	dnn_data_source src;
	dnn_dataset_source(&src, ds);
	dnn_optim_config optim = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f};
	for (int s = 0; s < steps; s++) {
		for (int i = 0; i < batch; i++)
			idx[i] = ((s * batch + i) * 7919) % ds->n;
		double l, c;
		if (dnn_submit_step(&p, 0, &src, idx, s, &optim, err, sizeof(err)) != 0 ||
		    dnn_wait_step(&p, 0, &l, &c, err, sizeof(err)) != 0) {
			fprintf(stderr, "FAIL: %s: step %d: %s\n", source, s, err);
			exit(1);
		}
		losses[s] = l / batch;
	}
	starpu_task_wait_for_all();
	float *out = test_model_params(&m, nparams);
	free(idx);
	dnn_plan_destroy(&p);
	dnn_model_destroy(&m);
	dnn_graph_free(&g);
	return out;
}

int test_task(struct starpu_codelet *cl, int worker, const void *args, size_t argsz, struct starpu_data_descr *d,
	      int n, const char *name)
{
	void *copy = dnn_args_dup(args, argsz);
	TEST_CHECK(copy, "%s: out of memory for its arguments", name);
	if (!copy)
		return -ENOMEM;
	int rc = worker >= 0 ? starpu_task_insert(cl, STARPU_DATA_MODE_ARRAY, d, n, STARPU_CL_ARGS, copy, argsz,
						  STARPU_EXECUTE_ON_WORKER, worker, STARPU_NAME, name, 0)
			     : starpu_task_insert(cl, STARPU_DATA_MODE_ARRAY, d, n, STARPU_CL_ARGS, copy, argsz,
						  STARPU_NAME, name, 0);
	/* The copy belongs to the task on every path (StarPU frees it with a refused task too). */
	TEST_CHECK(rc == 0, "%s: starpu_task_insert on worker %d: %s", name, worker, strerror(-rc));
	return rc;
}

uint8_t *test_random_samples(int N, size_t per, int32_t *labels)
{
	uint8_t *px = malloc((size_t)N * per + 1);
	if (!px) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < (size_t)N * per; i++)
		px[i] = (uint8_t)test_rng_int(0, 255);
	for (int i = 0; i < N; i++)
		labels[i] = test_rng_int(0, 9);
	return px;
}

char **test_image_files(char *dir, size_t dirlen, const char *tmpl, int nf, int nbad, int C, const int *w,
			const int *h)
{
	snprintf(dir, dirlen, "%s", tmpl);
	if (!mkdtemp(dir)) {
		fprintf(stderr, "mkdtemp %s: %s\n", tmpl, strerror(errno));
		exit(1);
	}
	char **paths = malloc(sizeof(char *) * (size_t)(nf ? nf : 1));
	if (!paths) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	for (int i = 0; i < nf; i++) {
		size_t len = strlen(dir) + 32;
		paths[i] = malloc(len);
		if (!paths[i]) {
			fprintf(stderr, "out of memory\n");
			exit(1);
		}
		snprintf(paths[i], len, "%s/f%02d.png", dir, i);
		if (i >= nf - nbad) { /* not an image */
			FILE *f = fopen(paths[i], "wb");
			if (!f || fputs("not a png", f) < 0 || fclose(f) != 0) {
				fprintf(stderr, "cannot write %s: %s\n", paths[i], strerror(errno));
				exit(1);
			}
			continue;
		}
		unsigned char *px = malloc((size_t)w[i] * h[i] * C);
		if (!px) {
			fprintf(stderr, "out of memory\n");
			exit(1);
		}
		for (int k = 0; k < w[i] * h[i] * C; k++)
			px[k] = (unsigned char)test_rng_int(0, 255);
		if (!stbi_write_png(paths[i], w[i], h[i], C, px, w[i] * C)) {
			fprintf(stderr, "cannot write %s\n", paths[i]);
			exit(1);
		}
		free(px);
	}
	return paths;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	if (remove(p) != 0)
		fprintf(stderr, "warning: cannot remove %s: %s\n", p, strerror(errno));
	return 0;
}

void test_rmtree(const char *dir)
{
	if (nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
		fprintf(stderr, "warning: cannot remove %s: %s\n", dir, strerror(errno));
}

void test_image_files_free(char **paths, int nf, const char *dir)
{
	for (int i = 0; i < nf; i++)
		free(paths[i]);
	free(paths);
	if (dir)
		test_rmtree(dir);
}

void bn_train_ref(double *z, double *mean, double *var, double *invstd, const double *x, const double *gamma,
			 const double *beta, int N, int C, int HW, double eps)
{
	const double M = (double)N * HW;
	for (int c = 0; c < C; c++) {
		double s = 0, ss = 0;
		for (int n = 0; n < N; n++)
			for (int i = 0; i < HW; i++)
				s += x[((size_t)n * C + c) * HW + i];
		double m = s / M;
		for (int n = 0; n < N; n++)
			for (int i = 0; i < HW; i++) {
				double d = x[((size_t)n * C + c) * HW + i] - m;
				ss += d * d;
			}
		double v = ss / M, is = 1.0 / sqrt(v + eps);
		if (mean)
			mean[c] = m, var[c] = v, invstd[c] = is;
		for (int n = 0; n < N; n++)
			for (int i = 0; i < HW; i++) {
				size_t j = ((size_t)n * C + c) * HW + i;
				z[j] = gamma[c] * (x[j] - m) * is + beta[c];
			}
	}
}

dnn_conv2d_args conv_shape(int N, int C, int H, int W, int K, int R, int S, int stride, int pad,
			   int dilation)
{
	dnn_conv2d_args a = {.N = N, .C = C, .H = H, .W = W, .K = K, .R = R, .S = S,
			     .stride = stride, .pad = pad, .dilation = dilation};
	return a;
}

int test_winograd_runs_here(void)
{
	dnn_conv2d_args probe = conv_shape(1, 16, 8, 8, 16, 3, 3, 1, 1, 1);
	probe.algo = DNN_CONV_ALGO_WINOGRAD;
	dnn_conv2d_args_finish(&probe);
	return dnn_conv2d_cpu_uses_winograd(&probe, 0);
}

void conv2d_forward_ref_d(double *y, const double *x, const double *w, const dnn_conv2d_args *a)
{
	for (int n = 0; n < a->N; n++)
		for (int k = 0; k < a->K; k++)
			for (int p = 0; p < a->P; p++)
				for (int q = 0; q < a->Q; q++) {
					double acc = 0;
					for (int c = 0; c < a->C; c++)
						for (int r = 0; r < a->R; r++) {
							int ih = p * a->stride - a->pad + r * a->dilation;
							if (ih < 0 || ih >= a->H)
								continue;
							for (int s = 0; s < a->S; s++) {
								int iw = q * a->stride - a->pad + s * a->dilation;
								if (iw < 0 || iw >= a->W)
									continue;
								acc += x[(((size_t)n * a->C + c) * a->H + ih) * a->W + iw] *
								       w[(((size_t)k * a->C + c) * a->R + r) * a->S + s];
							}
						}
					y[(((size_t)n * a->K + k) * a->P + p) * a->Q + q] = acc;
				}
}

void conv2d_forward_ref(double *y, const float *x, const float *w, const dnn_conv2d_args *a)
{
	/* float -> double is exact: the same products and sums as with the floats. */
	double *xd = to_double(x, (size_t)a->N * a->C * a->H * a->W);
	double *wd = to_double(w, (size_t)a->K * a->C * a->R * a->S);
	conv2d_forward_ref_d(y, xd, wd, a);
	free(xd);
	free(wd);
}
