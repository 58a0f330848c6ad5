/* unit_dataset.c — IDX (raw and gzip'd) and CIFAR-10 readers on files made here, the
 * Fashion-MNIST directory loader, channel statistics, and the real Fashion-MNIST set when it is
 * installed. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dataset.h"
#include "test_util.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

static char tmpdir[4096];


static void make_tmpdir(void)
{
	const char *b = getenv("DNN_BUILD_DIR");
	snprintf(tmpdir, sizeof(tmpdir), "%s/unit_dataset.XXXXXX", b && *b ? b : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror(tmpdir);
		exit(1);
	}
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Writes bytes to path, raw or through gzwrite. */
static void write_file(const char *path, const void *data, size_t n, int gz)
{
	if (gz) {
		gzFile g = gzopen(path, "wb");
		if (!g || (n && gzwrite(g, data, (unsigned)n) != (int)n) || gzclose(g) != Z_OK) {
			fprintf(stderr, "cannot write %s\n", path);
			exit(1);
		}
		return;
	}
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(1);
	}
}

/* IDX images file (n, rows, cols), pixel i of image k = (k * 31 + i * 7) & 255; optional
 * trailing garbage. */
static void write_idx_images(const char *path, uint32_t n, uint32_t rows, uint32_t cols, int gz,
			     size_t garbage)
{
	size_t len = 16 + (size_t)n * rows * cols + garbage;
	uint8_t *b = malloc(len);
	put_be32(b, 0x803);
	put_be32(b + 4, n);
	put_be32(b + 8, rows);
	put_be32(b + 12, cols);
	for (uint32_t k = 0; k < n; k++)
		for (uint32_t i = 0; i < rows * cols; i++)
			b[16 + (size_t)k * rows * cols + i] = (uint8_t)((k * 31 + i * 7) & 255);
	memset(b + len - garbage, 0xEE, garbage);
	write_file(path, b, len, gz);
	free(b);
}

static void write_idx_labels(const char *path, uint32_t n, int mod, int gz)
{
	uint8_t *b = malloc(8 + n);
	put_be32(b, 0x801);
	put_be32(b + 4, n);
	for (uint32_t k = 0; k < n; k++)
		b[8 + k] = (uint8_t)(k % (uint32_t)mod);
	write_file(path, b, 8 + n, gz);
	free(b);
}

static void check_idx_set(const char *what, const dnn_dataset *ds, int n, int rows, int cols,
			  int mod, int classes)
{
	TEST_CHECK(ds->n == n && ds->C == 1 && ds->H == rows && ds->W == cols,
		   "%s: shape n=%d C=%d H=%d W=%d", what, ds->n, ds->C, ds->H, ds->W);
	TEST_CHECK(ds->classes == classes, "%s: classes %d want %d", what, ds->classes, classes);
	if (ds->n != n || ds->H != rows || ds->W != cols)
		return;
	int bad = 0;
	for (int k = 0; k < n; k++) {
		if (ds->labels[k] != k % mod)
			bad++;
		for (int i = 0; i < rows * cols; i++)
			if (ds->images[(size_t)k * rows * cols + i] != (uint8_t)((k * 31 + i * 7) & 255))
				bad++;
	}
	TEST_CHECK(bad == 0, "%s: %d wrong values", what, bad);
}

static void test_idx(void)
{
	char ip[4200], lp[4200], err[512];
	for (int gz = 0; gz < 2; gz++) {
		dnn_dataset ds;
		snprintf(ip, sizeof(ip), "%s/img%d", tmpdir, gz);
		snprintf(lp, sizeof(lp), "%s/lab%d", tmpdir, gz);
		write_idx_images(ip, 7, 3, 5, gz, 0);
		write_idx_labels(lp, 7, 4, gz);
		int rc = dnn_dataset_load_idx(&ds, ip, lp, 4, 0, err, sizeof(err));
		TEST_CHECK(rc == 0, "idx gz=%d: %s", gz, err);
		if (rc == 0)
			check_idx_set(gz ? "idx gzip" : "idx raw", &ds, 7, 3, 5, 4, 4);
		TEST_CHECK(ds.class_names == NULL, "plain IDX sets have no class names");
		dnn_dataset_free(&ds);
		TEST_CHECK(ds.images == NULL && ds.labels == NULL && ds.n == 0, "free zeroes the set");
		dnn_dataset_free(&ds); // twice is harmless

		// limit keeps a prefix; a limit beyond n keeps everything.
		rc = dnn_dataset_load_idx(&ds, ip, lp, 10, 3, err, sizeof(err));
		TEST_CHECK(rc == 0, "idx limit: %s", err);
		if (rc == 0)
			check_idx_set("idx limit 3", &ds, 3, 3, 5, 4, 10);
		dnn_dataset_free(&ds);
		rc = dnn_dataset_load_idx(&ds, ip, lp, 10, 1000, err, sizeof(err));
		TEST_CHECK(rc == 0 && ds.n == 7, "idx limit 1000: n=%d %s", ds.n, err);
		dnn_dataset_free(&ds);

		// Trailing garbage after the promised bytes is ignored.
		write_idx_images(ip, 7, 3, 5, gz, 100);
		rc = dnn_dataset_load_idx(&ds, ip, lp, 4, 0, err, sizeof(err));
		TEST_CHECK(rc == 0, "idx trailing garbage gz=%d: %s", gz, err);
		if (rc == 0)
			check_idx_set("idx trailing garbage", &ds, 7, 3, 5, 4, 4);
		dnn_dataset_free(&ds);
	}
	// Mixed: gzip'd images with raw labels; the file name does not matter.
	dnn_dataset ds;
	snprintf(ip, sizeof(ip), "%s/img1", tmpdir);
	snprintf(lp, sizeof(lp), "%s/lab0", tmpdir);
	int rc = dnn_dataset_load_idx(&ds, ip, lp, 4, 0, err, sizeof(err));
	TEST_CHECK(rc == 0, "idx mixed: %s", err);
	dnn_dataset_free(&ds);

	// One larger gzip'd set (beyond the reader's first buffer size) to exercise buffer growth.
	snprintf(ip, sizeof(ip), "%s/bigimg.gz", tmpdir);
	snprintf(lp, sizeof(lp), "%s/biglab.gz", tmpdir);
	write_idx_images(ip, 3000, 28, 28, 1, 0);
	write_idx_labels(lp, 3000, 10, 1);
	rc = dnn_dataset_load_idx(&ds, ip, lp, 10, 0, err, sizeof(err));
	TEST_CHECK(rc == 0, "idx big: %s", err);
	if (rc == 0)
		check_idx_set("idx big gzip", &ds, 3000, 28, 28, 10, 10);
	dnn_dataset_free(&ds);
}

static void test_fashion_dir(void)
{
	char d[4200], p[4300], err[512];
	snprintf(d, sizeof(d), "%s/fashion", tmpdir);
	if (mkdir(d, 0755) != 0) {
		perror(d);
		exit(1);
	}
	// train: gzip'd with .gz names; t10k: raw without .gz.
	snprintf(p, sizeof(p), "%s/train-images-idx3-ubyte.gz", d);
	write_idx_images(p, 20, 28, 28, 1, 0);
	snprintf(p, sizeof(p), "%s/train-labels-idx1-ubyte.gz", d);
	write_idx_labels(p, 20, 10, 1);
	snprintf(p, sizeof(p), "%s/t10k-images-idx3-ubyte", d);
	write_idx_images(p, 5, 28, 28, 0, 0);
	snprintf(p, sizeof(p), "%s/t10k-labels-idx1-ubyte", d);
	write_idx_labels(p, 5, 10, 0);
	dnn_dataset ds;
	int rc = dnn_dataset_load_fashion(&ds, d, 1, 0, err, sizeof(err));
	TEST_CHECK(rc == 0, "fashion dir train: %s", err);
	if (rc == 0) {
		check_idx_set("fashion dir train", &ds, 20, 28, 28, 10, 10);
		TEST_CHECK(ds.class_names && strcmp(ds.class_names[9], "Ankle boot") == 0,
			   "fashion class names");
	}
	dnn_dataset_free(&ds);
	rc = dnn_dataset_load_fashion(&ds, d, 0, 3, err, sizeof(err));
	TEST_CHECK(rc == 0, "fashion dir test: %s", err);
	if (rc == 0)
		check_idx_set("fashion dir test limit 3", &ds, 3, 28, 28, 10, 10);
	dnn_dataset_free(&ds);
}

static void test_stats(void)
{
	// 2 samples, 2 channels, 1x2: channel 0 = {0,255,0,255}, channel 1 = {51,51,51,51}.
	uint8_t px[8] = {0, 255, 51, 51, 0, 255, 51, 51};
	dnn_dataset ds = {.n = 2, .C = 2, .H = 1, .W = 2, .classes = 1, .images = px};
	float mean[2], std[2];
	dnn_dataset_channel_stats(&ds, mean, std);
	TEST_CHECK(fabsf(mean[0] - 0.5f) < 1e-6f && fabsf(std[0] - 0.5f) < 1e-6f,
		   "stats c0: mean %g std %g", mean[0], std[0]);
	TEST_CHECK(fabsf(mean[1] - 0.2f) < 1e-6f && fabsf(std[1]) < 1e-6f, "stats c1: mean %g std %g",
		   mean[1], std[1]);
}

static void test_cifar(void)
{
	char p0[4200], p1[4200], p2[4200], err[512];
	snprintf(p0, sizeof(p0), "%s/data_batch_1.bin", tmpdir);
	snprintf(p1, sizeof(p1), "%s/data_batch_2.bin", tmpdir);
	snprintf(p2, sizeof(p2), "%s/data_batch_3.bin.gz", tmpdir);
	const int counts[3] = {3, 2, 4};
	const char *paths[3] = {p0, p1, p2};
	int k = 0;
	for (int f = 0; f < 3; f++) {
		uint8_t *b = malloc((size_t)counts[f] * 3073);
		for (int r = 0; r < counts[f]; r++, k++) {
			uint8_t *rec = b + (size_t)r * 3073;
			rec[0] = (uint8_t)(k % 10);
			for (int i = 0; i < 3072; i++)
				rec[1 + i] = (uint8_t)((k * 13 + i) & 255);
		}
		write_file(paths[f], b, (size_t)counts[f] * 3073, f == 2);
		free(b);
	}
	dnn_dataset ds;
	int rc = dnn_dataset_load_cifar10(&ds, paths, 3, 0, err, sizeof(err));
	TEST_CHECK(rc == 0, "cifar: %s", err);
	if (rc == 0) {
		TEST_CHECK(ds.n == 9 && ds.C == 3 && ds.H == 32 && ds.W == 32 && ds.classes == 10,
			   "cifar shape n=%d C=%d H=%d W=%d classes=%d", ds.n, ds.C, ds.H, ds.W, ds.classes);
		int bad = 0;
		for (int s = 0; s < ds.n && ds.n == 9; s++) {
			if (ds.labels[s] != s % 10)
				bad++;
			for (int i = 0; i < 3072; i++)
				if (ds.images[(size_t)s * 3072 + i] != (uint8_t)((s * 13 + i) & 255))
					bad++;
		}
		TEST_CHECK(bad == 0, "cifar: %d wrong values", bad);
		TEST_CHECK(ds.class_names && strcmp(ds.class_names[0], "airplane") == 0,
			   "cifar class names");
	}
	dnn_dataset_free(&ds);
	// A limit that ends inside the second file.
	rc = dnn_dataset_load_cifar10(&ds, paths, 3, 4, err, sizeof(err));
	TEST_CHECK(rc == 0 && ds.n == 4 && ds.labels[3] == 3, "cifar limit 4: n=%d %s", ds.n, err);
	dnn_dataset_free(&ds);
}

static void test_real_fashion(void)
{
	struct stat st;
	if (stat(FASHION_DIR, &st) != 0) {
		printf("note: %s not installed; real Fashion-MNIST checks skipped\n", FASHION_DIR);
		return;
	}
	char err[512];
	for (int train = 1; train >= 0; train--) {
		dnn_dataset ds;
		int want = train ? 60000 : 10000;
		int rc = dnn_dataset_load_fashion(&ds, FASHION_DIR, train, 0, err, sizeof(err));
		TEST_CHECK(rc == 0, "real fashion train=%d: %s", train, err);
		if (rc != 0)
			continue;
		TEST_CHECK(ds.n == want && ds.C == 1 && ds.H == 28 && ds.W == 28 && ds.classes == 10,
			   "real fashion shape n=%d C=%d H=%d W=%d", ds.n, ds.C, ds.H, ds.W);
		int hist[10] = {0}, out = 0;
		for (int i = 0; i < ds.n; i++) {
			if (ds.labels[i] < 0 || ds.labels[i] > 9)
				out++;
			else
				hist[ds.labels[i]]++;
		}
		TEST_CHECK(out == 0, "real fashion: %d labels out of 0..9", out);
		for (int c = 0; c < 10; c++)
			TEST_CHECK(hist[c] == want / 10, "real fashion train=%d class %d: %d samples", train,
				   c, hist[c]);
		float mean, std;
		dnn_dataset_channel_stats(&ds, &mean, &std);
		printf("fashion-mnist %s: n=%d mean=%.4f std=%.4f\n", train ? "train" : "test", ds.n,
		       (double)mean, (double)std);
		// Published figures for the training set: mean 0.2860, std 0.3530.
		if (train)
			TEST_CHECK(fabsf(mean - 0.2860f) < 2e-3f && fabsf(std - 0.3530f) < 2e-3f,
				   "real fashion stats: mean %g std %g", mean, std);
		dnn_dataset_free(&ds);
	}
}

int main(void)
{
	make_tmpdir();
	test_idx();
	test_fashion_dir();
	test_stats();
	test_cifar();
	test_real_fashion();
	test_rmtree(tmpdir);
	return test_report("unit_dataset");
}
