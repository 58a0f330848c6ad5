/* gpu_loaders — the input loaders' CUDA forms against their CPU forms, on the same samples:
 *  - cl_load_batch on an in-memory RGB set (per-channel mean/std), chunks of several sizes;
 *  - cl_load_images on a folder of RGB PNGs of assorted sizes (resized, cropped) with
 *    augmentation on (random crop and flip from the step's seed), a chunk holding an unreadable
 *    file (substituted by the chunk's first readable sample) and a chunk of unreadable files
 *    only (zeros); and with augmentation off (centre crops);
 *  - cl_load_tokens on a token stream (windows of T ids and their next tokens as labels, T per
 *    sample), training stride 1 and validation stride T, ids up to 65535 (exact in floats).
 * The CUDA tasks of a group are inserted back to back on one CUDA worker before any wait, so the
 * worker's staging block is reused while earlier copies may still be queued, and its chunks grow
 * (the staging block is reallocated). Inputs must agree within float rounding (they are meant
 * to be bit for bit: the count of differing values is printed), labels exactly. Skips (77)
 * without a CUDA and a CPU worker. */
#define _GNU_SOURCE
#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "load_batch.h"
#include "load_images.h"
#include "load_tokens.h"
#include "test_util.h"

#define TOL 1e-6
#define MAXT 8

static int cpu_worker = -1, cuda_worker = -1;

typedef struct {
	float *x;
	int32_t *y;
	starpu_data_handle_t hx, hy;
} out_t;

/* Inserts cl with a copy of args on `worker`, writing o (n samples of `per` floats and `yper`
 * labels); no wait. */
static void submit(struct starpu_codelet *cl, const void *args, size_t sz, int n, size_t per, size_t yper, int worker,
		   out_t *o)
{
	o->x = alloc_f((size_t)n * per);
	o->y = malloc(sizeof(int32_t) * (size_t)(n ? n : 1) * yper);
	fill_nan(o->x, (size_t)n * per);
	for (size_t i = 0; i < (size_t)n * yper; i++)
		o->y[i] = -7;
	o->hx = reg_f(o->x, (size_t)n * per);
	o->hy = reg_i(o->y, (size_t)n * yper);
	struct starpu_data_descr d[] = {{o->hx, STARPU_W}, {o->hy, STARPU_W}};
	if (test_task(cl, worker, args, sz, d, 2, cl->name) != 0)
		exit(1); /* test_task said why */
}

static void finish(out_t *o)
{
	starpu_data_unregister(o->hx);
	starpu_data_unregister(o->hy);
}

/* Runs every args block on the CPU worker, then all of them back to back on the CUDA worker. */
static void compare(const char *what, struct starpu_codelet *cl, void *const *args, const size_t *sz, const int *n,
		    int nt, size_t per, size_t yper)
{
	out_t c[MAXT], g[MAXT];
	for (int t = 0; t < nt; t++)
		submit(cl, args[t], sz[t], n[t], per, yper, cpu_worker, &c[t]);
	for (int t = 0; t < nt; t++)
		submit(cl, args[t], sz[t], n[t], per, yper, cuda_worker, &g[t]);
	for (int t = 0; t < nt; t++) {
		finish(&c[t]);
		finish(&g[t]);
		size_t m = (size_t)n[t] * per, differ = 0;
		for (size_t i = 0; i < m; i++)
			differ += memcmp(&c[t].x[i], &g[t].x[i], sizeof(float)) != 0;
		char name[128];
		snprintf(name, sizeof(name), "%s chunk %d (n=%d): x cuda vs cpu", what, t, n[t]);
		test_close_mixed_f(name, g[t].x, c[t].x, m, TOL);
		printf("%s chunk %d: %d samples, %zu of %zu values differ in their bits\n", what, t, n[t], differ, m);
		int yok = 1;
		for (size_t i = 0; i < (size_t)n[t] * yper; i++)
			yok &= g[t].y[i] == c[t].y[i];
		TEST_CHECK(yok, "%s chunk %d: labels differ", what, t);
		free(c[t].x), free(c[t].y), free(g[t].x), free(g[t].y);
	}
}

/* ---------------------------------------------------------------- load_batch */
static void test_load_batch(void)
{
	enum { N = 40, C = 3, H = 9, W = 7 };
	int32_t lab[N];
	uint8_t *img = test_random_samples(N, (size_t)C * H * W, lab);
	static const float mean[C] = {0.4914f, 0.4822f, 0.4465f}, std[C] = {0.247f, 0.2435f, 0.2616f};
	const int ns[] = {5, 1, 13, 32};
	void *args[4];
	size_t sz[4];
	for (int t = 0; t < 4; t++) {
		sz[t] = sizeof(dnn_load_batch_args) + sizeof(int) * (size_t)ns[t];
		dnn_load_batch_args *a = malloc(sz[t]);
		a->images = img, a->labels = lab, a->mean = mean, a->std = std;
		a->C = C, a->HW = H * W, a->n = ns[t];
		for (int i = 0; i < ns[t]; i++)
			a->idx[i] = test_rng_int(0, N - 1);
		args[t] = a;
	}
	compare("load_batch", &cl_load_batch, args, sz, ns, 4, (size_t)C * H * W, 1);
	for (int t = 0; t < 4; t++)
		free(args[t]);
	free(img);
}

/* ---------------------------------------------------------------- load_tokens */
static void test_load_tokens(void)
{
	enum { NTOK = 4000, T = 37 };
	uint16_t *tok = malloc(sizeof(uint16_t) * NTOK);
	for (int i = 0; i < NTOK; i++)
		tok[i] = (uint16_t)test_rng_int(0, 65535);
	const int ns[] = {5, 1, 13, 32}, stride[] = {1, T, 1, T};
	void *args[4];
	size_t sz[4];
	for (int t = 0; t < 4; t++) {
		sz[t] = sizeof(dnn_load_tokens_args) + sizeof(int) * (size_t)ns[t];
		dnn_load_tokens_args *a = malloc(sz[t]);
		a->tokens = tok, a->T = T, a->stride = stride[t], a->n = ns[t];
		for (int i = 0; i < ns[t]; i++) /* the last window ends at token NTOK-1 */
			a->idx[i] = test_rng_int(0, (NTOK - T - 1) / stride[t]);
		args[t] = a;
	}
	compare("load_tokens", &cl_load_tokens, args, sz, ns, 4, T, T);
	for (int t = 0; t < 4; t++)
		free(args[t]);
	free(tok);
}

/* ---------------------------------------------------------------- load_images */
static char tmpdir[4096];

static int nbad_reports;
static void on_bad(void *ctx, int index, const char *why)
{
	(void)ctx, (void)index, (void)why;
	__atomic_add_fetch(&nbad_reports, 1, __ATOMIC_RELAXED);
}

static void test_load_images(void)
{
	enum { NF = 14, C = 3, H = 24, W = 20 };
	int32_t lab[NF];
	/* sizes that shrink (box filter), enlarge (bilinear) and keep an axis 1:1; the last three
	 * files are not images */
	const int ws[] = {20, 47, 13, 64, 31}, hs[] = {24, 33, 11, 80, 29};
	int fw[NF], fh[NF];
	for (int i = 0; i < NF; i++)
		lab[i] = i % 5, fw[i] = ws[i % 5], fh[i] = hs[(i / 2) % 5];
	char **paths = test_image_files(tmpdir, sizeof(tmpdir), "/tmp/dnn_gpu_loaders_XXXXXX", NF, 3, C, fw, fh);
	static const float mean[C] = {0.5f, 0.45f, 0.4f}, std[C] = {0.25f, 0.2f, 0.3f};
	/* chunks: readable files; one unreadable among them; unreadable only; a big chunk */
	const int ns[] = {6, 5, 3, 24};
	const int fixed[3][6] = {{0, 1, 2, 3, 4, 5}, {6, NF - 1, 7, 8, 9, 0}, {NF - 3, NF - 2, NF - 1, 0, 0, 0}};
	for (int augment = 1; augment >= 0; augment--) {
		void *args[4];
		size_t sz[4];
		for (int t = 0; t < 4; t++) {
			sz[t] = sizeof(dnn_load_images_args) + sizeof(int) * (size_t)ns[t];
			dnn_load_images_args *a = malloc(sz[t]);
			*a = (dnn_load_images_args){.paths = (const char *const *)paths, .labels = lab, .mean = mean,
						    .std = std, .C = C, .H = H, .W = W, .augment = augment,
						    .seed = 0x1234567ull * (uint64_t)(t + 1), .on_bad = on_bad, .n = ns[t]};
			for (int i = 0; i < ns[t]; i++)
				a->idx[i] = t < 3 ? fixed[t][i] : test_rng_int(0, NF - 4);
			args[t] = a;
		}
		nbad_reports = 0;
		compare(augment ? "load_images (augmented)" : "load_images (centre crops)", &cl_load_images, args, sz, ns,
			4, (size_t)C * H * W, 1);
		/* unreadable: 1 in chunk 1, 3 in chunk 2; once on the CPU and once on the GPU */
		TEST_CHECK(nbad_reports == 2 * 4, "%d unreadable-file reports (want 8)", nbad_reports);
		for (int t = 0; t < 4; t++)
			free(args[t]);
	}
	test_image_files_free(paths, NF, tmpdir);
}

int main(int argc, char **argv)
{
	test_starpu_init(&argc, &argv);
	if (starpu_cuda_worker_get_count() == 0 || starpu_cpu_worker_get_count() == 0) {
		printf("SKIP: needs a CUDA and a CPU worker (have %u CUDA, %u CPU)\n", starpu_cuda_worker_get_count(),
		       starpu_cpu_worker_get_count());
		test_starpu_shutdown();
		return TEST_SKIP;
	}
	starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, &cuda_worker, 1);
	starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, &cpu_worker, 1);
	printf("gpu_loaders: cpu worker %d, cuda worker %d\n", cpu_worker, cuda_worker);
	test_rng_seed(4242);
	test_load_batch();
	test_load_tokens();
	test_load_images();
	test_starpu_shutdown();
	return test_report("gpu_loaders");
}
