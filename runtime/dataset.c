/* dataset.c — IDX (MNIST / Fashion-MNIST) and CIFAR-10 readers, validated against bad input.
 *
 * Every file goes through zlib's gzopen/gzread, which reads gzip'd and raw files alike. Nothing
 * is allocated on the word of a header alone: buffers grow as bytes actually arrive, so a tiny
 * file whose header promises terabytes fails with "truncated" after a small allocation.
 */
#include "dataset.h"
#include "errline.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define MAX_SAMPLES 100000000u          // 100 million
#define MAX_PIXELS (4096u * 4096u)      // rows * cols
#define CIFAR_PIXELS (3 * 32 * 32)
#define CIFAR_RECORD (1 + CIFAR_PIXELS)
#define GROW_START ((size_t)1 << 20)    // first buffer size when reading a promised payload
#define GZ_CHUNK ((size_t)1 << 30)      // gzread takes an unsigned int length

static const char *const fashion_names[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress",
					       "Coat",        "Sandal",  "Shirt",    "Sneaker",
					       "Bag",         "Ankle boot"};
static const char *const cifar10_names[10] = {"airplane", "automobile", "bird",  "cat",  "deer",
					      "dog",      "frog",       "horse", "ship", "truck"};


/* ------------------------------------------------------------------ input files */

typedef struct {
	gzFile gz;
	const char *path;
	int compressed;    // gzip magic at the start
	long long size;    // bytes on disk
	long long got;     // uncompressed bytes read so far
} input;

static int input_open(input *in, const char *path, char *err, size_t errlen)
{
	memset(in, 0, sizeof(*in));
	in->path = path;
	if (!path || !*path) {
		dnn_set_err(err, errlen, path, "empty path");
		return -1;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		dnn_set_err(err, errlen, path, "%s", strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		dnn_set_err(err, errlen, path, "%s", strerror(errno));
		close(fd);
		return -1;
	}
	if (S_ISDIR(st.st_mode)) {
		dnn_set_err(err, errlen, path, "is a directory, not a data file");
		close(fd);
		return -1;
	}
	in->size = S_ISREG(st.st_mode) ? (long long)st.st_size : -1;
	if (in->size == 0) {
		dnn_set_err(err, errlen, path, "empty file");
		close(fd);
		return -1;
	}
	unsigned char m[2];
	ssize_t r = pread(fd, m, 2, 0);
	in->compressed = r == 2 && m[0] == 0x1f && m[1] == 0x8b;
	// gzdopen takes ownership of fd (closed by gzclose).
	errno = 0;
	in->gz = gzdopen(fd, "rb");
	if (!in->gz) {
		dnn_set_err(err, errlen, path, "cannot open (%s)", errno ? strerror(errno) : "zlib");
		close(fd);
		return -1;
	}
	if (gzbuffer(in->gz, 1u << 18) != 0) {
		dnn_set_err(err, errlen, path, "cannot set the read buffer");
		gzclose(in->gz);
		in->gz = NULL;
		return -1;
	}
	return 0;
}

/* zlib's message for the last error, without the "<fd:N>: " prefix gzdopen gives it. */
static const char *gz_msg(gzFile gz, int *zerr)
{
	const char *msg = gzerror(gz, zerr);
	if (!msg)
		return "?";
	const char *c = strstr(msg, ": ");
	return msg[0] == '<' && c ? c + 2 : msg;
}

static void input_close(input *in)
{
	if (in->gz)
		gzclose(in->gz);
	in->gz = NULL;
}

/* The line for a failed gzread: the system's error, or zlib's for corrupt data. */
static void read_error(input *in, char *err, size_t errlen)
{
	int zerr = 0;
	const char *msg = gz_msg(in->gz, &zerr);
	if (zerr == Z_ERRNO)
		dnn_set_err(err, errlen, in->path, "read error: %s", strerror(errno));
	else
		dnn_set_err(err, errlen, in->path, "corrupt gzip data (%s)", msg);
}

/* Reads up to n bytes; returns the count, or -1 on a read/gzip error (reported in err). */
static long long input_read(input *in, void *buf, size_t n, char *err, size_t errlen)
{
	size_t done = 0;
	while (done < n) {
		size_t want = n - done < GZ_CHUNK ? n - done : GZ_CHUNK;
		int r = gzread(in->gz, (char *)buf + done, (unsigned)want);
		if (r < 0) {
			read_error(in, err, errlen);
			return -1;
		}
		if (r == 0)
			break;
		done += (size_t)r;
	}
	// A gzip stream cut short reads as end-of-file with Z_BUF_ERROR; callers see the short count.
	in->got += (long long)done;
	return (long long)done;
}

/* Reads exactly n bytes into a buffer that grows as data arrives (never more than twice what
 * the file really holds). Returns the malloc'd buffer, or NULL with err set. */
static uint8_t *input_read_alloc(input *in, size_t n, const char *what, char *err, size_t errlen)
{
	long long start = in->got;
	// Raw files: the size on disk tells at once whether the promise can be kept.
	if (!in->compressed && in->size >= 0 && (unsigned long long)(in->size - start) < n) {
		dnn_set_err(err, errlen, in->path,
			"truncated file: %s needs %zu bytes from offset %lld, file has %lld", what, n,
			start, in->size - start);
		return NULL;
	}
	size_t cap = n < GROW_START ? n : GROW_START, have = 0;
	uint8_t *buf = malloc(cap ? cap : 1);
	if (!buf) {
		dnn_set_err(err, errlen, in->path, "out of memory (%zu bytes for %s)", cap, what);
		return NULL;
	}
	for (;;) {
		long long r = input_read(in, buf + have, cap - have, err, errlen);
		if (r < 0) {
			free(buf);
			return NULL;
		}
		have += (size_t)r;
		if (have == n)
			return buf;
		if (have < cap) {
			dnn_set_err(err, errlen, in->path,
				"truncated file: %s needs %zu bytes from offset %lld, only %zu present%s",
				what, n, start, have, in->compressed ? " after decompression" : "");
			free(buf);
			return NULL;
		}
		size_t ncap = cap > n / 2 ? n : cap * 2;
		uint8_t *nb = realloc(buf, ncap);
		if (!nb) {
			dnn_set_err(err, errlen, in->path, "out of memory (%zu bytes for %s)", ncap, what);
			free(buf);
			return NULL;
		}
		buf = nb;
		cap = ncap;
	}
}

/* For gzip'd input, decompresses what is left so the stream's CRC and length trailer are checked
 * (gzread only verifies them on reaching the end). Bytes past the promise are ignored. */
static int input_finish(input *in, char *err, size_t errlen)
{
	if (!in->compressed)
		return 0;
	uint8_t sink[1 << 16];
	for (;;) {
		int r = gzread(in->gz, sink, sizeof(sink));
		if (r < 0) {
			read_error(in, err, errlen);
			return -1;
		}
		if (r == 0)
			break;
	}
	int zerr = 0;
	gzerror(in->gz, &zerr);
	if (zerr == Z_BUF_ERROR) {
		dnn_set_err(err, errlen, in->path, "truncated gzip stream (unexpected end of file)");
		return -1;
	}
	return 0;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static char **dup_names(const char *const *names, int n)
{
	char **out = calloc((size_t)n, sizeof(char *));
	if (!out)
		return NULL;
	for (int i = 0; i < n; i++) {
		out[i] = strdup(names[i]);
		if (!out[i]) {
			for (int j = 0; j < i; j++)
				free(out[j]);
			free(out);
			return NULL;
		}
	}
	return out;
}

/* ------------------------------------------------------------------ IDX */

/* Reads and checks an IDX header: magic (u8 elements, ndims dims) then ndims big-endian u32. */
static int idx_header(input *in, uint32_t want_magic, const char *kind, uint32_t *dims, int ndims,
		      char *err, size_t errlen)
{
	uint8_t h[16];
	size_t hlen = 4 + 4 * (size_t)ndims;
	long long r = input_read(in, h, hlen, err, errlen);
	if (r < 0)
		return -1;
	if (r < 4) {
		dnn_set_err(err, errlen, in->path, "truncated header (%lld of %zu bytes)", r, hlen);
		return -1;
	}
	uint32_t magic = be32(h);
	if (magic != want_magic) {
		if (h[0] == 0 && h[1] == 0 && h[2] == 0x08)
			dnn_set_err(err, errlen, in->path,
				"IDX file has %u dimensions, want %d for IDX %s (magic 0x%08x, want 0x%08x)",
				h[3], ndims, kind, magic, want_magic);
		else if (h[0] == 0 && h[1] == 0 && h[3] == (uint8_t)ndims)
			dnn_set_err(err, errlen, in->path,
				"IDX element type 0x%02x is not unsigned byte (magic 0x%08x, want 0x%08x)",
				h[2], magic, want_magic);
		else
			dnn_set_err(err, errlen, in->path, "wrong magic 0x%08x (want 0x%08x for IDX %s)", magic,
				want_magic, kind);
		return -1;
	}
	if ((size_t)r < hlen) {
		dnn_set_err(err, errlen, in->path, "truncated header (%lld of %zu bytes)", r, hlen);
		return -1;
	}
	for (int i = 0; i < ndims; i++)
		dims[i] = be32(h + 4 + 4 * i);
	if (dims[0] == 0) {
		dnn_set_err(err, errlen, in->path, "IDX %s file holds zero samples", kind);
		return -1;
	}
	if (dims[0] > MAX_SAMPLES) {
		dnn_set_err(err, errlen, in->path, "absurd sample count %u (at most %u)%s", dims[0],
			MAX_SAMPLES, dims[0] > INT32_MAX ? ", negative as int32" : "");
		return -1;
	}
	if (ndims == 3) {
		if (dims[1] == 0 || dims[2] == 0) {
			dnn_set_err(err, errlen, in->path, "zero image size (rows %u, cols %u)", dims[1], dims[2]);
			return -1;
		}
		if ((uint64_t)dims[1] * dims[2] > MAX_PIXELS) {
			dnn_set_err(err, errlen, in->path, "absurd image size %ux%u (at most 4096*4096 pixels)",
				dims[1], dims[2]);
			return -1;
		}
	}
	return 0;
}

int dnn_dataset_load_idx(dnn_dataset *ds, const char *images_path, const char *labels_path,
			 int max_classes, int limit, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (!ds) {
		dnn_set_err(err, errlen, images_path, "no dataset to fill");
		return -1;
	}
	memset(ds, 0, sizeof(*ds));
	if (max_classes < 1 || max_classes > 256) {
		dnn_set_err(err, errlen, labels_path, "max_classes %d out of range 1..256", max_classes);
		return -1;
	}
	input im, lb;
	uint32_t idim[3], ldim[1];
	uint8_t *pix = NULL, *lab8 = NULL;
	int32_t *labels = NULL;
	int rc = -1;
	if (input_open(&im, images_path, err, errlen) != 0)
		return -1;
	if (idx_header(&im, IDX_MAGIC_IMAGES, "images", idim, 3, err, errlen) != 0) {
		input_close(&im);
		return -1;
	}
	if (input_open(&lb, labels_path, err, errlen) != 0) {
		input_close(&im);
		return -1;
	}
	if (idx_header(&lb, IDX_MAGIC_LABELS, "labels", ldim, 1, err, errlen) != 0)
		goto out;
	if (ldim[0] != idim[0]) {
		dnn_set_err(err, errlen, labels_path, "%u labels, but %s holds %u images", ldim[0],
			images_path, idim[0]);
		goto out;
	}
	// Raw files: check the whole promise against the size on disk, even when `limit` means
	// only a prefix is read.
	if (!lb.compressed && lb.size >= 0 && lb.size < 8 + (long long)ldim[0]) {
		dnn_set_err(err, errlen, labels_path,
			"truncated file: header promises %u labels, file has %lld bytes",
			ldim[0], lb.size);
		goto out;
	}
	if (!im.compressed && im.size >= 0 &&
	    (unsigned long long)im.size < 16 + (unsigned long long)idim[0] * idim[1] * idim[2]) {
		dnn_set_err(err, errlen, images_path,
			"truncated file: header promises %u images of %ux%u, file has %lld bytes", idim[0],
			idim[1], idim[2], im.size);
		goto out;
	}
	size_t n = idim[0];
	if (limit > 0 && (size_t)limit < n)
		n = (size_t)limit;
	size_t per = (size_t)idim[1] * idim[2], bytes;
	if (__builtin_mul_overflow(n, per, &bytes) || n > INT_MAX) {
		dnn_set_err(err, errlen, images_path, "%zu images of %zu pixels overflow size_t", n, per);
		goto out;
	}
	// Labels first: they are small, and a bad label fails before the big read.
	lab8 = input_read_alloc(&lb, n, "labels", err, errlen);
	if (!lab8)
		goto out;
	labels = malloc(n * sizeof(int32_t));
	if (!labels) {
		dnn_set_err(err, errlen, labels_path, "out of memory (%zu labels)", n);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (lab8[i] >= max_classes) {
			dnn_set_err(err, errlen, labels_path, "label %u at index %zu is out of range (max_classes %d)",
				lab8[i], i, max_classes);
			goto out;
		}
		labels[i] = lab8[i];
	}
	if (input_finish(&lb, err, errlen) != 0)
		goto out;
	pix = input_read_alloc(&im, bytes, "images", err, errlen);
	if (!pix || input_finish(&im, err, errlen) != 0)
		goto out;
	ds->n = (int)n;
	ds->C = 1;
	ds->H = (int)idim[1];
	ds->W = (int)idim[2];
	ds->classes = max_classes;
	ds->images = pix;
	ds->labels = labels;
	pix = NULL;
	labels = NULL;
	rc = 0;
out:
	free(pix);
	free(labels);
	free(lab8);
	input_close(&im);
	input_close(&lb);
	return rc;
}

/* dir/name, or dir/name without ".gz" when only that exists. Returns 0, or -1 with err set. */
static int find_file(char *out, size_t outlen, const char *dir, const char *name, char *err,
		     size_t errlen)
{
	static const char *const suffix[2] = {".gz", ""};
	for (int i = 0; i < 2; i++) {
		struct stat st;
		int k = snprintf(out, outlen, "%s/%s%s", dir, name, suffix[i]);
		if (k < 0 || (size_t)k >= outlen) {
			dnn_set_err(err, errlen, dir, "path too long");
			return -1;
		}
		if (stat(out, &st) == 0)
			return 0;
	}
	dnn_set_err(err, errlen, dir, "no %s[.gz] in this directory", name);
	return -1;
}

int dnn_dataset_load_fashion(dnn_dataset *ds, const char *dir, int train, int limit, char *err,
			     size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (ds)
		memset(ds, 0, sizeof(*ds));
	struct stat st;
	if (!dir || !*dir) {
		dnn_set_err(err, errlen, dir, "empty directory path");
		return -1;
	}
	if (stat(dir, &st) != 0) {
		dnn_set_err(err, errlen, dir, "%s", strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		dnn_set_err(err, errlen, dir, "not a directory (want the Fashion-MNIST directory)");
		return -1;
	}
	const char *pre = train ? "train" : "t10k";
	char name[64], ipath[PATH_MAX], lpath[PATH_MAX];
	snprintf(name, sizeof(name), "%s-images-idx3-ubyte", pre);
	if (find_file(ipath, sizeof(ipath), dir, name, err, errlen) != 0)
		return -1;
	snprintf(name, sizeof(name), "%s-labels-idx1-ubyte", pre);
	if (find_file(lpath, sizeof(lpath), dir, name, err, errlen) != 0)
		return -1;
	if (dnn_dataset_load_idx(ds, ipath, lpath, 10, limit, err, errlen) != 0)
		return -1;
	ds->class_names = dup_names(fashion_names, 10);
	if (!ds->class_names) {
		dnn_dataset_free(ds);
		dnn_set_err(err, errlen, dir, "out of memory");
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ CIFAR-10 */

int dnn_dataset_load_cifar10(dnn_dataset *ds, const char *const *paths, int n_paths, int limit,
			     char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (!ds) {
		dnn_set_err(err, errlen, "cifar10", "no dataset to fill");
		return -1;
	}
	memset(ds, 0, sizeof(*ds));
	if (!paths || n_paths <= 0) {
		dnn_set_err(err, errlen, "cifar10", "no batch files given");
		return -1;
	}
	uint8_t *pix = NULL, rec[CIFAR_RECORD];
	int32_t *labels = NULL;
	size_t n = 0, cap = 0;
	size_t want = limit > 0 ? (size_t)limit : (size_t)MAX_SAMPLES + 1;
	for (int f = 0; f < n_paths && n < want; f++) {
		input in;
		if (input_open(&in, paths[f], err, errlen) != 0)
			goto fail;
		if (!in.compressed && in.size > 0 && in.size % CIFAR_RECORD != 0) {
			dnn_set_err(err, errlen, paths[f],
				"size %lld is not a whole number of %d-byte CIFAR-10 records (truncated?)",
				in.size, CIFAR_RECORD);
			input_close(&in);
			goto fail;
		}
		size_t in_file = 0;
		while (n < want) {
			long long r = input_read(&in, rec, CIFAR_RECORD, err, errlen);
			if (r < 0) {
				input_close(&in);
				goto fail;
			}
			if (r == 0)
				break;
			if (r < CIFAR_RECORD) {
				dnn_set_err(err, errlen, paths[f],
					"truncated file: record %zu has %lld of %d bytes", in_file, r,
					CIFAR_RECORD);
				input_close(&in);
				goto fail;
			}
			if (rec[0] >= 10) {
				dnn_set_err(err, errlen, paths[f],
					"label %u in record %zu is out of range (max_classes 10)", rec[0],
					in_file);
				input_close(&in);
				goto fail;
			}
			if (n == cap) {
				size_t ncap = cap ? cap * 2 : 1024;
				uint8_t *np = realloc(pix, ncap * CIFAR_PIXELS);
				if (!np) {
					dnn_set_err(err, errlen, paths[f], "out of memory");
					input_close(&in);
					goto fail;
				}
				pix = np;
				int32_t *nl = realloc(labels, ncap * sizeof(int32_t));
				if (!nl) {
					dnn_set_err(err, errlen, paths[f], "out of memory");
					input_close(&in);
					goto fail;
				}
				labels = nl;
				cap = ncap;
			}
			labels[n] = rec[0];
			memcpy(pix + n * CIFAR_PIXELS, rec + 1, CIFAR_PIXELS);
			n++;
			in_file++;
		}
		if (input_finish(&in, err, errlen) != 0) {
			input_close(&in);
			goto fail;
		}
		input_close(&in);
		if (in_file == 0) {
			// Reached only when the (decompressed) file held no record at all.
			dnn_set_err(err, errlen, paths[f], "no CIFAR-10 records in this file");
			goto fail;
		}
		if (n > MAX_SAMPLES) {
			dnn_set_err(err, errlen, paths[f], "absurd sample count (more than %u)", MAX_SAMPLES);
			goto fail;
		}
	}
	ds->n = (int)n;
	ds->C = 3;
	ds->H = 32;
	ds->W = 32;
	ds->classes = 10;
	ds->images = pix;
	ds->labels = labels;
	ds->class_names = dup_names(cifar10_names, 10);
	if (!ds->class_names) {
		dnn_set_err(err, errlen, paths[0], "out of memory");
		dnn_dataset_free(ds);
		return -1;
	}
	return 0;
fail:
	free(pix);
	free(labels);
	return -1;
}

/* ------------------------------------------------------------------ misc */

void dnn_dataset_free(dnn_dataset *ds)
{
	if (!ds)
		return;
	if (ds->class_names) {
		for (int i = 0; i < ds->classes; i++)
			free(ds->class_names[i]);
		free(ds->class_names);
	}
	free(ds->images);
	free(ds->labels);
	free(ds->tokens);
	if (ds->folder && ds->free_folder)
		ds->free_folder(ds->folder);
	memset(ds, 0, sizeof(*ds));
}

void dnn_dataset_channel_stats(const dnn_dataset *ds, float *mean, float *std)
{
	if (!ds || ds->C <= 0)
		return;
	if (ds->tokens) { /* token ids are no pixels: they go into the net (embed) unscaled */
		for (int c = 0; c < ds->C; c++) {
			if (mean)
				mean[c] = 0;
			if (std)
				std[c] = 1;
		}
		return;
	}
	if (!ds->images) /* image folders: imagefolder.h measures them on decoded images */
		return;
	size_t hw = (size_t)ds->H * ds->W;
	for (int c = 0; c < ds->C; c++) {
		// Exact histogram, then moments in double: no precision loss over millions of pixels.
		uint64_t hist[256] = {0};
		for (int i = 0; i < ds->n; i++) {
			const uint8_t *p = ds->images + ((size_t)i * ds->C + c) * hw;
			for (size_t k = 0; k < hw; k++)
				hist[p[k]]++;
		}
		double cnt = 0, s = 0, s2 = 0;
		for (int v = 0; v < 256; v++) {
			double x = v / 255.0;
			cnt += (double)hist[v];
			s += (double)hist[v] * x;
			s2 += (double)hist[v] * x * x;
		}
		double m = cnt > 0 ? s / cnt : 0.0;
		double var = cnt > 0 ? s2 / cnt - m * m : 0.0;
		if (mean)
			mean[c] = (float)m;
		if (std)
			std[c] = (float)sqrt(var > 0 ? var : 0.0);
	}
}
