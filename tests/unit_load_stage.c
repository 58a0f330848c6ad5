/* unit_load_stage — the host halves of the loaders' CUDA forms, on the CPU (no GPU needed):
 * dnn_load_batch_stage and dnn_load_images_stage fill the staging block, then a C transcription
 * of load_batch.cu's and load_images.cu's kernels (the same indexing and the same unfused
 * x = v * scale[c] - shift[c]) must give the CPU forms' outputs bit for bit:
 *  - load_batch: gathered pixels and labels, per-channel factors;
 *  - load_images with augmentation on and off: the same crop/flip decisions (the unflipped crop
 *    mirrored when map says so equals the CPU's flipped resample), an unreadable file substituted
 *    by the chunk's first readable sample, a chunk of unreadable files only giving zeros, and
 *    each unreadable file reported once. gpu_loaders runs the kernels themselves. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "load_batch.h"
#include "load_images.h"
#include "test_util.h"

/* load_batch.cu's kernel, element by element. */
static void batch_kernel(float *x, int32_t *y, const uint8_t *px, const int32_t *labels, const float *scale,
			 const float *shift, int C, int HW, int n)
{
	for (int i = 0; i < n; i++)
		y[i] = labels[i];
	for (size_t i = 0; i < (size_t)n * C * HW; i++) {
		const int c = (int)((i / (size_t)HW) % (size_t)C);
		volatile float p = (float)px[i] * scale[c]; /* no contraction into a fused multiply-add */
		x[i] = p - shift[c];
	}
}

/* load_images.cu's kernel, element by element. */
static void images_kernel(float *x, int32_t *y, const float *raw, const int32_t *labels, const int32_t *map,
			  const float *scale, const float *shift, int C, int H, int W, int n)
{
	for (int i = 0; i < n; i++)
		y[i] = labels[i];
	const size_t HW = (size_t)H * W, per = (size_t)C * HW;
	for (size_t i = 0; i < (size_t)n * per; i++) {
		const size_t s = i / per, r = i % per;
		const int c = (int)(r / HW), yy = (int)(r % HW / W), xx = (int)(r % W);
		const int32_t m = map[s];
		if (m < 0) {
			x[i] = 0.0f;
			continue;
		}
		const int src = m >> 1, sx = (m & 1) ? W - 1 - xx : xx;
		volatile float p = raw[(size_t)src * per + (size_t)c * HW + (size_t)yy * W + sx] * scale[c];
		x[i] = p - shift[c];
	}
}

static int same_bits(const char *what, const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
			fprintf(stderr, "%s: value %zu: %.9g vs %.9g\n", what, i, a[i], b[i]);
			return 0;
		}
	return 1;
}

static void test_batch(void)
{
	enum { N = 30, C = 3, HW = 35, n = 11 };
	int32_t lab[N];
	uint8_t *img = test_random_samples(N, (size_t)C * HW, lab);
	static const float mean[C] = {0.4914f, 0.4822f, 0.4465f}, std[C] = {0.247f, 0.2435f, 0.2616f};
	dnn_load_batch_args *a = malloc(sizeof(*a) + sizeof(int) * n);
	a->images = img, a->labels = lab, a->mean = mean, a->std = std, a->C = C, a->HW = HW, a->n = n;
	for (int i = 0; i < n; i++)
		a->idx[i] = test_rng_int(0, N - 1);
	float xc[n * C * HW], xg[n * C * HW], scale[C], shift[C];
	int32_t yc[n], yg[n], ys[n];
	uint8_t px[n * C * HW];
	dnn_load_batch_cpu(xc, yc, a);
	dnn_load_batch_stage(px, ys, scale, shift, a);
	batch_kernel(xg, yg, px, ys, scale, shift, C, HW, n);
	TEST_CHECK(same_bits("load_batch", xg, xc, (size_t)n * C * HW), "load_batch: staged + kernel != CPU form");
	TEST_CHECK(!memcmp(yg, yc, sizeof(yc)), "load_batch: labels differ");
	free(a);
	free(img);
}

static char tmpdir[4096];

static int reports[32];
static void on_bad(void *ctx, int index, const char *why)
{
	(void)ctx, (void)why;
	reports[index]++;
}

static void test_images(void)
{
	enum { NF = 10, C = 3, H = 16, W = 14 };
	int32_t lab[NF];
	const int ws[] = {14, 41, 9, 60, 23}, hs[] = {16, 29, 7, 50, 17};
	int fw[NF], fh[NF];
	for (int i = 0; i < NF; i++)
		lab[i] = i, fw[i] = ws[i % 5], fh[i] = hs[(i * 3) % 5];
	char **paths = test_image_files(tmpdir, sizeof(tmpdir), "/tmp/dnn_load_stage_XXXXXX", NF, 2, C, fw, fh);
	static const float mean[C] = {0.5f, 0.45f, 0.4f}, std[C] = {0.25f, 0.2f, 0.3f};
	const int chunks[3][8] = {{0, 1, 2, 3, 4, 5, 6, 7}, {3, NF - 1, 5, 1, 0, 2, 4, 6}, {NF - 2, NF - 1, NF - 2}};
	const int ns[3] = {8, 8, 3};
	int flips = 0;
	for (int augment = 1; augment >= 0; augment--)
		for (int t = 0; t < 3; t++)
			for (uint64_t seed = 1; seed <= 3; seed++) {
				const int n = ns[t];
				const size_t per = (size_t)C * H * W;
				dnn_load_images_args *a = malloc(sizeof(*a) + sizeof(int) * (size_t)n);
				*a = (dnn_load_images_args){.paths = (const char *const *)paths, .labels = lab, .mean = mean,
							    .std = std, .C = C, .H = H, .W = W, .augment = augment,
							    .seed = seed * 0x9e3779b97f4a7c15ull, .on_bad = on_bad, .n = n};
				memcpy(a->idx, chunks[t], sizeof(int) * (size_t)n);
				float *xc = alloc_f(n * per), *xg = alloc_f(n * per), *raw = alloc_f(n * per);
				float scale[C], shift[C];
				int32_t yc[8], yg[8], ys[8], map[8];
				memset(reports, 0, sizeof(reports));
				int bc = dnn_load_images_cpu(xc, yc, a);
				int bs = dnn_load_images_stage(raw, ys, map, scale, shift, a);
				images_kernel(xg, yg, raw, ys, map, scale, shift, C, H, W, n);
				char what[96];
				snprintf(what, sizeof(what), "load_images augment=%d chunk %d seed %d", augment, t, (int)seed);
				TEST_CHECK(same_bits(what, xg, xc, (size_t)n * per), "%s: staged + kernel != CPU form", what);
				TEST_CHECK(!memcmp(yg, yc, sizeof(int32_t) * (size_t)n), "%s: labels differ", what);
				TEST_CHECK(bc == bs, "%s: %d unreadable on the CPU, %d staged", what, bc, bs);
				for (int i = 0; i < n; i++)
					flips += map[i] >= 0 && (map[i] & 1);
				int want = 0;
				for (int i = 0; i < n; i++)
					want += a->idx[i] >= NF - 2;
				int got = 0;
				for (int k = 0; k < NF; k++)
					got += reports[k];
				TEST_CHECK(got == 2 * want, "%s: %d reports (want %d: once per form)", what, got, 2 * want);
				if (!augment)
					for (int i = 0; i < n; i++)
						TEST_CHECK(map[i] < 0 || !(map[i] & 1), "%s: a centre crop is flipped", what);
				free(xc), free(xg), free(raw), free(a);
			}
	TEST_CHECK(flips > 0, "augmentation never flipped a sample");
	printf("load_images: %d augmented samples flipped\n", flips);
	test_image_files_free(paths, NF, tmpdir);
}

int main(void)
{
	test_rng_seed(99);
	test_batch();
	test_images();
	return test_report("unit_load_stage");
}
