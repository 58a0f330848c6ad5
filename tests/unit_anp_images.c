/* unit_anp_images.c — image decoding, resizing and cropping (codelets/load_images.h) and image
 * folders (runtime/imagefolder.h), on images made here:
 *   - resampling: 1:1 crops are exact, 2:1 shrinking averages 2x2 blocks, enlarging keeps a
 *     constant image constant, flips mirror;
 *   - PNG and JPEG decode to the right colours; grey (C=1) too; normalisation;
 *   - every truncation of a PNG and a JPEG, garbage, empty and absurd-size files end in a clean
 *     error or an image, never a crash; the load kernel substitutes unreadable samples and reports each;
 *   - folders: sorted classes, hidden/non-image files ignored, empty files counted, the held-out
 *     split is disjoint, complete, per class and the same in every call, --limit, DIR/train+val. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset.h"
#include "imagefolder.h"
#include "load_images.h"
#include "test_util.h"

#include <stb/stb_image_write.h>
/* Defined with the rest of stb's writer in test_util.c; the header declares it only there. */
unsigned char *stbi_write_png_to_mem(const unsigned char *pixels, int stride_bytes, int x, int y, int n, int *out_len);

static char tmpdir[4096];
static const float zero3[3] = {0, 0, 0}, one3[3] = {1, 1, 1};


static void write_file(const char *path, const void *b, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(1);
	}
}

/* ---------------------------------------------------------------- resampling */
static void test_resample(void)
{
	enum { w = 8, h = 6 };
	unsigned char src[h * w * 3];
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++)
			for (int c = 0; c < 3; c++)
				src[(y * w + x) * 3 + c] = (unsigned char)(10 * y + x + 100 * c);
	/* 1:1, crop 4x3 at (2, 1) */
	float d[3 * 4 * 3];
	dnn_image_resample(d, src, h, w, 3, 3, h, w, 2, 1, 3, 4, 0);
	int ok = 1;
	for (int c = 0; c < 3; c++)
		for (int y = 0; y < 3; y++)
			for (int x = 0; x < 4; x++)
				ok &= d[(c * 3 + y) * 4 + x] == src[((y + 2) * w + x + 1) * 3 + c];
	TEST_CHECK(ok, "1:1 crop is not exact");
	/* the same, flipped */
	dnn_image_resample(d, src, h, w, 3, 3, h, w, 2, 1, 3, 4, 1);
	ok = 1;
	for (int c = 0; c < 3; c++)
		for (int y = 0; y < 3; y++)
			for (int x = 0; x < 4; x++)
				ok &= d[(c * 3 + y) * 4 + x] == src[((y + 2) * w + (1 + 3 - x)) * 3 + c];
	TEST_CHECK(ok, "flipped 1:1 crop is not the mirror");
	/* 2:1 shrink (8x6 -> 4x3), whole image: each output is the mean of a 2x2 block */
	float s[3 * 3 * 4];
	dnn_image_resample(s, src, h, w, 3, 3, 3, 4, 0, 0, 3, 4, 0);
	double worst = 0;
	for (int c = 0; c < 3; c++)
		for (int y = 0; y < 3; y++)
			for (int x = 0; x < 4; x++) {
				double m = 0;
				for (int dy = 0; dy < 2; dy++)
					for (int dx = 0; dx < 2; dx++)
						m += src[((2 * y + dy) * w + 2 * x + dx) * 3 + c] / 4.0;
				worst = fmax(worst, fabs(s[(c * 3 + y) * 4 + x] - m));
			}
	TEST_CHECK(worst < 1e-4, "2:1 shrink off by %g", worst);
	/* enlarging a constant grey image keeps it constant; grey (comp 1) source */
	unsigned char g[5 * 7];
	memset(g, 77, sizeof(g));
	float e[1 * 20 * 30];
	dnn_image_resample(e, g, 5, 7, 1, 1, 23, 33, 1, 2, 20, 30, 1);
	worst = 0;
	for (int i = 0; i < 20 * 30; i++)
		worst = fmax(worst, fabs(e[i] - 77));
	TEST_CHECK(worst < 1e-3, "enlarged constant image off by %g", worst);
	/* a one-pixel image */
	unsigned char one[3] = {9, 8, 7};
	float o[3 * 2 * 2];
	dnn_image_resample(o, one, 1, 1, 3, 3, 2, 2, 0, 0, 2, 2, 0);
	TEST_CHECK(o[0] == 9 && o[4] == 8 && o[11] == 7, "one-pixel image: %g %g %g", o[0], o[4], o[11]);
	TEST_CHECK(dnn_image_short_side(224, 224) == 256 && dnn_image_short_side(32, 32) == 37, "short side");
}

/* ---------------------------------------------------------------- decoding */
/* w x h RGB: left half colour a, right half colour b */
static unsigned char *two_colours(int w, int h, const unsigned char *a, const unsigned char *b)
{
	unsigned char *px = malloc((size_t)w * h * 3);
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++)
			memcpy(px + ((size_t)y * w + x) * 3, x < w / 2 ? a : b, 3);
	return px;
}

typedef struct {
	unsigned char *p;
	int n, cap;
} membuf;

static void wr(void *ctx, void *data, int size)
{
	membuf *b = ctx;
	if (b->n + size <= b->cap) {
		memcpy(b->p + b->n, data, (size_t)size);
		b->n += size;
	}
}

static void test_decode(void)
{
	const unsigned char red[3] = {200, 20, 30}, blue[3] = {10, 40, 220};
	int w = 60, h = 40, len;
	unsigned char *px = two_colours(w, h, red, blue);
	unsigned char *png = stbi_write_png_to_mem(px, w * 3, w, h, 3, &len);
	TEST_CHECK(png != NULL, "encode PNG");
	char why[256];
	enum { S = 16 };
	float x[3 * S * S];
	/* centre crop: the left columns are red, the right ones blue (the crop of 60x40 resized to
	 * short side 18 is 27x18: centre crop keeps both halves) */
	TEST_CHECK(dnn_image_decode_crop_mem(x, png, (size_t)len, 3, S, S, 0, 0, zero3, one3, why, sizeof(why)) == 0,
		   "PNG decode: %s", why);
	TEST_CHECK(fabs(x[0 * S * S + 8 * S + 0] - 200 / 255.0) < 1e-3 && fabs(x[2 * S * S + 8 * S + 15] - 220 / 255.0) < 1e-3,
		   "PNG colours: %g %g", x[8 * S], x[2 * S * S + 8 * S + 15]);
	/* normalisation: (v/255 - mean)/std */
	const float mean[3] = {0.5f, 0.5f, 0.5f}, std[3] = {0.25f, 0.25f, 0.25f};
	dnn_image_decode_crop_mem(x, png, (size_t)len, 3, S, S, 0, 0, mean, std, why, sizeof(why));
	TEST_CHECK(fabs(x[8 * S] - (200 / 255.0 - 0.5) / 0.25) < 1e-3, "normalised %g", x[8 * S]);
	/* grey: luminance of red */
	float gx[S * S];
	TEST_CHECK(dnn_image_decode_crop_mem(gx, png, (size_t)len, 1, S, S, 0, 0, zero3, one3, why, sizeof(why)) == 0,
		   "grey decode: %s", why);
	TEST_CHECK(gx[8 * S] > 0.2 && gx[8 * S] < 0.5, "grey value %g", gx[8 * S]);
	/* augmentation: deterministic in rng, and flips happen for some rng */
	float a1[3 * S * S], a2[3 * S * S];
	int flipped = 0;
	for (uint64_t r = 1; r < 20; r++) {
		dnn_image_decode_crop_mem(a1, png, (size_t)len, 3, S, S, 1, r, zero3, one3, why, sizeof(why));
		dnn_image_decode_crop_mem(a2, png, (size_t)len, 3, S, S, 1, r, zero3, one3, why, sizeof(why));
		TEST_CHECK(memcmp(a1, a2, sizeof(a1)) == 0, "augmentation not deterministic for rng %llu", (unsigned long long)r);
		flipped += a1[0] < 0.3; /* left column blue */
	}
	TEST_CHECK(flipped > 0 && flipped < 19, "flips: %d of 19", flipped);
	/* JPEG (lossy: colours within 12 levels) */
	membuf jb = {malloc(1 << 16), 0, 1 << 16};
	stbi_write_jpg_to_func(wr, &jb, w, h, 3, px, 95);
	TEST_CHECK(jb.n > 100, "encode JPEG");
	TEST_CHECK(dnn_image_decode_crop_mem(x, jb.p, (size_t)jb.n, 3, S, S, 0, 0, zero3, one3, why, sizeof(why)) == 0,
		   "JPEG decode: %s", why);
	TEST_CHECK(fabs(x[8 * S + 2] - 200 / 255.0) < 12 / 255.0, "JPEG red %g", x[8 * S + 2] * 255);
	/* every truncation: a clean error or an image, never a crash; half a PNG is an error */
	int errors = 0;
	for (int n = 0; n < len; n++)
		errors += dnn_image_decode_crop_mem(x, png, (size_t)n, 3, S, S, 1, 7, zero3, one3, why, sizeof(why)) != 0;
	TEST_CHECK(dnn_image_decode_crop_mem(x, png, (size_t)len / 2, 3, S, S, 0, 0, zero3, one3, why, sizeof(why)) != 0,
		   "half a PNG decoded");
	TEST_CHECK(errors > len / 2, "only %d of %d PNG truncations failed", errors, len);
	for (int n = 0; n < jb.n; n += 7)
		dnn_image_decode_crop_mem(x, jb.p, (size_t)n, 3, S, S, 1, 7, zero3, one3, why, sizeof(why));
	/* garbage, empty, absurd size (PNG header claiming 1e6 x 1e6), channels */
	const char *text = "not an image";
	TEST_CHECK(dnn_image_decode_crop_mem(x, (const unsigned char *)text, strlen(text), 3, S, S, 0, 0, zero3, one3, why,
					     sizeof(why)) != 0, "garbage decoded");
	TEST_CHECK(dnn_image_decode_crop_mem(x, png, 0, 3, S, S, 0, 0, zero3, one3, why, sizeof(why)) != 0 &&
			   strstr(why, "empty"), "empty: %s", why);
	unsigned char big[33];
	memcpy(big, png, 33);
	for (int i = 0; i < 4; i++)
		big[16 + i] = big[20 + i] = (unsigned char)(1000000u >> (24 - 8 * i));
	TEST_CHECK(dnn_image_decode_crop_mem(x, big, sizeof(big), 3, S, S, 0, 0, zero3, one3, why, sizeof(why)) != 0,
		   "absurd size decoded");
	TEST_CHECK(dnn_image_decode_crop_mem(x, png, (size_t)len, 2, S, S, 0, 0, zero3, one3, why, sizeof(why)) != 0,
		   "2 channels accepted");
	free(jb.p);
	free(png);
	free(px);
}

/* ---------------------------------------------------------------- the load kernel */
static int nbad_reported, last_bad;
static void count_bad(void *ctx, int index, const char *why)
{
	(void)ctx, (void)why;
	nbad_reported++;
	last_bad = index;
}

static void test_load_kernel(void)
{
	char good[4200], bad[4200];
	snprintf(good, sizeof(good), "%s/good.png", tmpdir);
	snprintf(bad, sizeof(bad), "%s/bad.png", tmpdir);
	const unsigned char c[3] = {0, 255, 0};
	unsigned char *px = two_colours(20, 20, c, c);
	stbi_write_png(good, 20, 20, 3, px, 60);
	free(px);
	write_file(bad, "xx", 2);
	const char *paths[3] = {bad, good, "/nonexistent/file.png"};
	const int32_t labels[3] = {5, 6, 7};
	enum { S = 8 };
	dnn_load_images_args *a = malloc(sizeof(*a) + 3 * sizeof(int));
	*a = (dnn_load_images_args){.paths = paths, .labels = labels, .mean = zero3, .std = one3, .C = 3, .H = S, .W = S,
				    .augment = 1, .seed = 3, .on_bad = count_bad, .n = 3};
	a->idx[0] = 0, a->idx[1] = 1, a->idx[2] = 2;
	float x[3 * 3 * S * S];
	int32_t y[3];
	int nb = dnn_load_images_cpu(x, y, a);
	TEST_CHECK(nb == 2 && nbad_reported == 2, "bad samples %d, reported %d", nb, nbad_reported);
	TEST_CHECK(y[0] == 6 && y[1] == 6 && y[2] == 6, "substituted labels %d %d %d", y[0], y[1], y[2]);
	TEST_CHECK(memcmp(x, x + 3 * S * S, sizeof(float) * 3 * S * S) == 0 && fabs(x[S * S] - 1.0) < 1e-3,
		   "substituted pixels");
	/* all bad: zeros, labels kept */
	a->idx[1] = 0;
	nbad_reported = 0;
	nb = dnn_load_images_cpu(x, y, a);
	TEST_CHECK(nb == 3 && y[0] == 5 && y[2] == 7 && x[0] == 0, "all bad: %d, labels %d %d", nb, y[0], y[2]);
	free(a);
}

/* ---------------------------------------------------------------- folders */
static void make_png(const char *dir, const char *name, int w, int h, unsigned char v)
{
	char p[8400];
	if (snprintf(p, sizeof(p), "%s/%s", dir, name) >= (int)sizeof(p))
		return;
	unsigned char *px = malloc((size_t)w * h * 3);
	memset(px, v, (size_t)w * h * 3);
	stbi_write_png(p, w, h, 3, px, w * 3);
	free(px);
}

static void make_classes(const char *root, int per_class)
{
	const char *cls[] = {"stormy_sky", "cute_dog", "old_house"};
	mkdir(root, 0755);
	for (int c = 0; c < 3; c++) {
		char d[8400];
		snprintf(d, sizeof(d), "%s/%s", root, cls[c]);
		mkdir(d, 0755);
		for (int i = 0; i < per_class; i++) {
			char n[32];
			snprintf(n, sizeof(n), "%c%03d.PNG", 'a' + c, i);
			make_png(d, n, 10 + i, 12, (unsigned char)(40 * c + 10));
		}
	}
}

static int count_label(const dnn_dataset *ds, int label)
{
	int k = 0;
	for (int i = 0; i < ds->n; i++)
		k += ds->labels[i] == label;
	return k;
}

static void test_folders(void)
{
	char root[4200], p[8400];
	char err[512];
	snprintf(root, sizeof(root), "%s/flat", tmpdir);
	make_classes(root, 10);
	snprintf(p, sizeof(p), "%s/cute_dog/notes.txt", root);
	write_file(p, "hello", 5);
	snprintf(p, sizeof(p), "%s/cute_dog/.hidden.png", root);
	write_file(p, "x", 1);
	snprintf(p, sizeof(p), "%s/cute_dog/empty.jpg", root);
	write_file(p, "", 0);
	snprintf(p, sizeof(p), "%s/.git", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/old_house/sub", root);
	mkdir(p, 0755);
	make_png(p, "nested.png", 9, 9, 90);
	TEST_CHECK(dnn_imagefolder_is_root(root), "flat folder not recognised");
	char **names;
	int n = dnn_imagefolder_classes(root, &names, err, sizeof(err));
	TEST_CHECK(n == 3 && !strcmp(names[0], "cute_dog") && !strcmp(names[1], "old_house") && !strcmp(names[2], "stormy_sky"),
		   "classes: %d", n);
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	dnn_dataset tr, va, va2, lim;
	TEST_CHECK(dnn_imagefolder_load(&tr, root, 1, 0.3, 0, 1, 3, 8, 8, 1, err, sizeof(err)) == 0, "%s", err);
	TEST_CHECK(dnn_imagefolder_load(&va, root, 0, 0.3, 0, 1, 3, 8, 8, 1, err, sizeof(err)) == 0, "%s", err);
	TEST_CHECK(dnn_imagefolder_load(&va2, root, 0, 0.3, 0, 99, 3, 8, 8, 1, err, sizeof(err)) == 0, "%s", err);
	/* 10 + 11 (nested) + 10 files; 3 of each class held out */
	TEST_CHECK(tr.n == 31 - 9 && va.n == 9, "split %d + %d", tr.n, va.n);
	TEST_CHECK(tr.classes == 3 && !strcmp(tr.class_names[0], "cute_dog"), "class names");
	TEST_CHECK(count_label(&va, 0) == 3 && count_label(&va, 1) == 3 && count_label(&va, 2) == 3, "per-class split");
	TEST_CHECK(count_label(&tr, 1) == 8, "old_house has %d training files (nested one included)", count_label(&tr, 1));
	int same = va.n == va2.n, overlap = 0;
	for (int i = 0; i < va.n && same; i++)
		same = !strcmp(dnn_imagefolder_path(va.folder, i), dnn_imagefolder_path(va2.folder, i));
	for (int i = 0; i < va.n; i++)
		for (int j = 0; j < tr.n; j++)
			overlap += !strcmp(dnn_imagefolder_path(va.folder, i), dnn_imagefolder_path(tr.folder, j));
	TEST_CHECK(same, "the split depends on the seed");
	TEST_CHECK(overlap == 0, "%d files on both sides", overlap);
	TEST_CHECK(dnn_imagefolder_skipped(tr.folder) == 1 && dnn_imagefolder_skipped(va.folder) == 0,
		   "empty file counted %d / %d", dnn_imagefolder_skipped(tr.folder), dnn_imagefolder_skipped(va.folder));
	float mean[3], std[3];
	dnn_imagefolder_channel_stats(tr.folder, mean, std);
	TEST_CHECK(mean[0] > 10 / 255.0 && mean[0] < 90 / 255.0 && std[0] > 0, "stats %g %g", mean[0], std[0]);
	TEST_CHECK(dnn_imagefolder_load(&lim, root, 1, 0.3, 5, 1, 3, 8, 8, 1, err, sizeof(err)) == 0 && lim.n == 5,
		   "limit: %d", lim.n);
	dnn_dataset_free(&tr), dnn_dataset_free(&va), dnn_dataset_free(&va2), dnn_dataset_free(&lim);

	/* DIR/train + DIR/val; a val class unknown to train is an error; val/ alone is an error */
	char split[4200];
	snprintf(split, sizeof(split), "%s/split", tmpdir);
	mkdir(split, 0755);
	snprintf(p, sizeof(p), "%s/train", split);
	make_classes(p, 4);
	snprintf(p, sizeof(p), "%s/val", split);
	make_classes(p, 2);
	TEST_CHECK(dnn_imagefolder_load(&tr, split, 1, 0.5, 0, 1, 3, 8, 8, 1, err, sizeof(err)) == 0 && tr.n == 12, "train/ %d",
		   tr.n);
	TEST_CHECK(dnn_imagefolder_load(&va, split, 0, 0.5, 0, 1, 3, 8, 8, 1, err, sizeof(err)) == 0 && va.n == 6, "val/ %d",
		   va.n);
	dnn_dataset_free(&tr), dnn_dataset_free(&va);
	snprintf(p, sizeof(p), "%s/val/bogus_class", split);
	mkdir(p, 0755);
	TEST_CHECK(dnn_imagefolder_load(&va, split, 0, 0, 0, 1, 3, 8, 8, 1, err, sizeof(err)) != 0 && strstr(err, "bogus_class"),
		   "unknown val class: %s", err);
	snprintf(p, sizeof(p), "%s/only_val", tmpdir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/only_val/val", tmpdir);
	make_classes(p, 1);
	snprintf(p, sizeof(p), "%s/only_val", tmpdir);
	TEST_CHECK(dnn_imagefolder_load(&va, p, 1, 0, 0, 1, 3, 8, 8, 1, err, sizeof(err)) != 0 && strstr(err, "no train"),
		   "val/ without train/: %s", err);
	/* one class is not enough; 4 channels are refused; a missing folder is an error */
	snprintf(p, sizeof(p), "%s/one", tmpdir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/one/a_b", tmpdir);
	mkdir(p, 0755);
	make_png(p, "x.png", 4, 4, 1);
	snprintf(p, sizeof(p), "%s/one", tmpdir);
	TEST_CHECK(dnn_imagefolder_load(&va, p, 1, 0, 0, 1, 3, 8, 8, 1, err, sizeof(err)) != 0 && strstr(err, "at least 2"),
		   "one class: %s", err);
	TEST_CHECK(dnn_imagefolder_load(&va, root, 1, 0, 0, 1, 4, 8, 8, 1, err, sizeof(err)) != 0, "4 channels accepted");
	TEST_CHECK(dnn_imagefolder_load(&va, "/nonexistent/dir", 1, 0, 0, 1, 3, 8, 8, 1, err, sizeof(err)) != 0,
		   "missing folder");
	/* predict's file list */
	const char *files[2] = {"a.png", "b.jpg"};
	TEST_CHECK(dnn_imagefolder_from_files(&va, files, 2, 3, 8, 8, err, sizeof(err)) == 0 && va.n == 2 &&
			   !strcmp(dnn_imagefolder_path(va.folder, 1), "b.jpg"), "from_files");
	dnn_dataset_free(&va);
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "%s/unit_anp_images.XXXXXX", getenv("DNN_BUILD_DIR") ? getenv("DNN_BUILD_DIR") : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror(tmpdir);
		return 1;
	}
	test_resample();
	test_decode();
	test_load_kernel();
	test_folders();
	test_rmtree(tmpdir);
	return test_report("unit_anp_images");
}
