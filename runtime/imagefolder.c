/* imagefolder.c — image-folder datasets (see imagefolder.h). */
#include "imagefolder.h"
#include "errline.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "load_images.h"
#include "dnn_rng.h"

#define MAX_FILES 100000000   // 100 million images
#define MAX_DEPTH 16          // nested folders inside a class folder
#define MAX_WARNINGS 10       // unreadable files named on stderr; the rest are only counted
#define MAX_SKIP_LIST 100     // unreadable files kept for the report
#define STATS_SAMPLE 256      // images decoded at start-up for the channel statistics

struct dnn_imagefolder {
	int n;
	char **paths;            // (n) full paths
	unsigned char *bad;      // (n) set once a file failed to decode
	int C, H, W;
	uint64_t seed;
	float mean[3], std[3];
	pthread_mutex_t mu;      // guards the counters below (the failure path only)
	int nskipped, nwarned;
	int nlist;
	char *skip_list[MAX_SKIP_LIST];
};

static void set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	dnn_vset_err(err, errlen, NULL, fmt, ap);
	va_end(ap);
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return dnn_splitmix64(&h);
}

static char *join(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *s = malloc(la + lb + 2);
	if (!s)
		return NULL;
	memcpy(s, a, la);
	s[la] = '/';
	memcpy(s + la + 1, b, lb + 1);
	return s;
}

static int is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_image_name(const char *name)
{
	static const char *ext[] = {"jpg", "jpeg", "png", "bmp", "gif", "tga", "ppm", "pgm", "pnm"};
	const char *dot = strrchr(name, '.');
	if (!dot || dot == name)
		return 0;
	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++)
		if (strcasecmp(dot + 1, ext[i]) == 0)
			return 1;
	return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted names of the non-hidden entries of dir; want_dirs: folders, else everything. */
static int list_sorted(const char *dir, int want_dirs, char ***out, char *err, size_t errlen)
{
	DIR *d = opendir(dir);
	if (!d) {
		set_err(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	int n = 0, cap = 16;
	char **v = malloc(sizeof(char *) * (size_t)cap);
	struct dirent *e;
	while (v && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		if (want_dirs) {
			char *p = join(dir, e->d_name);
			int isd = p && is_dir(p);
			free(p);
			if (!isd)
				continue;
		}
		if (n == cap) {
			char **nv = realloc(v, sizeof(char *) * (size_t)(cap *= 2));
			if (!nv) {
				break;
			}
			v = nv;
		}
		if (n >= MAX_FILES || !(v[n] = strdup(e->d_name)))
			break;
		n++;
	}
	int failed = !v || e != NULL;
	closedir(d);
	if (failed) {
		for (int i = 0; v && i < n; i++)
			free(v[i]);
		free(v);
		set_err(err, errlen, "%s: out of memory listing the folder", dir);
		return -1;
	}
	qsort(v, (size_t)n, sizeof(char *), cmp_str);
	*out = v;
	return n;
}

static void free_list(char **v, int n)
{
	for (int i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

/* ---------------------------------------------------------------- file lists */
typedef struct {
	int n, cap;
	char **path;   // full path
	int32_t *label;
	uint64_t *key; // split hash
	int nempty;    // empty image files seen (skipped)
	char *empty_first[MAX_SKIP_LIST];
} file_list;

static int fl_push(file_list *fl, char *path, int label, uint64_t key)
{
	if (fl->n == fl->cap) {
		int cap = fl->cap ? 2 * fl->cap : 256;
		char **p = realloc(fl->path, sizeof(char *) * (size_t)cap);
		if (p)
			fl->path = p;
		int32_t *l = realloc(fl->label, sizeof(int32_t) * (size_t)cap);
		if (l)
			fl->label = l;
		uint64_t *k = realloc(fl->key, sizeof(uint64_t) * (size_t)cap);
		if (k)
			fl->key = k;
		if (!p || !l || !k)
			return -1;
		fl->cap = cap;
	}
	fl->path[fl->n] = path, fl->label[fl->n] = label, fl->key[fl->n] = key;
	fl->n++;
	return 0;
}

static void fl_free(file_list *fl)
{
	for (int i = 0; i < fl->n; i++)
		free(fl->path[i]);
	free(fl->path), free(fl->label), free(fl->key);
	for (int i = 0; i < fl->nempty && i < MAX_SKIP_LIST; i++)
		free(fl->empty_first[i]);
	memset(fl, 0, sizeof(*fl));
}

/* The image files below dir (recursively, sorted), relative names prefixed with rel. */
static int collect(file_list *fl, const char *dir, const char *rel, int label, int depth, char *err, size_t errlen)
{
	char **names;
	int n = list_sorted(dir, 0, &names, err, errlen);
	if (n < 0)
		return -1;
	int rc = 0;
	for (int i = 0; i < n && rc == 0; i++) {
		char *p = join(dir, names[i]), *r = join(rel, names[i]);
		struct stat st;
		if (!p || !r) {
			set_err(err, errlen, "%s: out of memory", dir);
			rc = -1;
		} else if (stat(p, &st) != 0) {
			/* a dangling link: ignored like any non-image entry */
		} else if (S_ISDIR(st.st_mode)) {
			if (depth < MAX_DEPTH)
				rc = collect(fl, p, r, label, depth + 1, err, errlen);
		} else if (S_ISREG(st.st_mode) && is_image_name(names[i])) {
			if (st.st_size == 0) {
				if (fl->nempty < MAX_SKIP_LIST)
					fl->empty_first[fl->nempty] = strdup(p);
				fl->nempty++;
			} else if (fl->n >= MAX_FILES) {
				set_err(err, errlen, "%s: more than %d images", dir, MAX_FILES);
				rc = -1;
			} else if (fl_push(fl, p, label, hash_str(r)) != 0) {
				set_err(err, errlen, "%s: out of memory", dir);
				rc = -1;
			} else {
				p = NULL; /* now owned by the list */
			}
		}
		free(p), free(r);
	}
	free_list(names, n);
	return rc;
}

/* Where the classes live: DIR/train when present, else DIR. */
static int roots(const char *dir, char **train_root, char **val_root, char *err, size_t errlen)
{
	*train_root = *val_root = NULL;
	char *t = join(dir, "train"), *v = join(dir, "val");
	if (!t || !v) {
		free(t), free(v);
		set_err(err, errlen, "out of memory");
		return -1;
	}
	if (is_dir(t)) {
		*train_root = t;
		if (is_dir(v))
			*val_root = v;
		else
			free(v);
		return 0;
	}
	if (is_dir(v)) {
		set_err(err, errlen, "%s: has val/ but no train/ (use both, or one folder per class directly in %s)", dir,
			dir);
		free(t), free(v);
		return -1;
	}
	free(t), free(v);
	*train_root = strdup(dir);
	if (!*train_root) {
		set_err(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int dnn_imagefolder_is_root(const char *dir)
{
	/* The other readers' files win (as in data.c's dnn_data_load): IDX sets and CIFAR-10 batches. */
	static const char *other[] = {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte",
				      "t10k-images-idx3-ubyte.gz", "data_batch_1.bin", "test_batch.bin"};
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
		char *p = join(dir, other[i]);
		struct stat st;
		int hit = p && stat(p, &st) == 0 && S_ISREG(st.st_mode);
		free(p);
		if (hit)
			return 0;
	}
	char *t = join(dir, "train");
	int yes = t && is_dir(t);
	free(t);
	if (yes)
		return 1;
	char **sub;
	int n = list_sorted(dir, 1, &sub, NULL, 0);
	for (int i = 0; i < n && !yes; i++) {
		char *p = join(dir, sub[i]);
		DIR *d = p ? opendir(p) : NULL;
		struct dirent *e;
		while (d && !yes && (e = readdir(d)) != NULL)
			yes = e->d_name[0] != '.' && is_image_name(e->d_name);
		if (d)
			closedir(d);
		free(p);
	}
	free_list(sub, n);
	return yes;
}

int dnn_imagefolder_classes(const char *dir, char ***names, char *err, size_t errlen)
{
	char *tr, *va;
	if (roots(dir, &tr, &va, err, errlen) != 0)
		return -1;
	int n = list_sorted(tr, 1, names, err, errlen);
	if (n >= 0 && n < 2) {
		set_err(err, errlen, "%s: %d class folder%s (an image folder needs at least 2: one subfolder per class, "
				     "e.g. %s/cute_dog/)", tr, n, n == 1 ? "" : "s", tr);
		free_list(*names, n);
		*names = NULL;
		n = -1;
	}
	free(tr), free(va);
	return n;
}

/* ---------------------------------------------------------------- bad files */
static void note_skipped(dnn_imagefolder *f, const char *path, const char *why)
{
	pthread_mutex_lock(&f->mu);
	f->nskipped++;
	if (f->nlist < MAX_SKIP_LIST)
		f->skip_list[f->nlist++] = strdup(path);
	if (f->nwarned < MAX_WARNINGS)
		fprintf(stderr, "warning: skipping unreadable image %s: %s\n", path, why);
	else if (f->nwarned == MAX_WARNINGS)
		fprintf(stderr, "warning: more unreadable images: they are skipped and counted, not listed\n");
	f->nwarned++;
	pthread_mutex_unlock(&f->mu);
}

static void on_bad(void *ctx, int index, const char *why)
{
	dnn_imagefolder *f = ctx;
	if (__atomic_exchange_n(&f->bad[index], 1, __ATOMIC_RELAXED) == 0)
		note_skipped(f, f->paths[index], why);
}

void dnn_imagefolder_merge_bad(dnn_imagefolder *f, const float *flags, int n)
{
	for (int i = 0; f && i < n && i < f->n; i++)
		if (flags[i] != 0.0f && __atomic_exchange_n(&f->bad[i], 1, __ATOMIC_RELAXED) == 0)
			note_skipped(f, f->paths[i], "unreadable (found by another rank)");
}

int dnn_imagefolder_skipped(const dnn_imagefolder *f)
{
	if (!f)
		return 0;
	pthread_mutex_lock((pthread_mutex_t *)&f->mu);
	int n = f->nskipped;
	pthread_mutex_unlock((pthread_mutex_t *)&f->mu);
	return n;
}

int dnn_imagefolder_is_bad(const dnn_imagefolder *f, int i)
{
	return f && i >= 0 && i < f->n && __atomic_load_n(&f->bad[i], __ATOMIC_RELAXED);
}

const char *dnn_imagefolder_path(const dnn_imagefolder *f, int i)
{
	return f && i >= 0 && i < f->n ? f->paths[i] : NULL;
}

int dnn_imagefolder_skipped_list(const dnn_imagefolder *f, const char **paths, int max)
{
	if (!f)
		return 0;
	pthread_mutex_lock((pthread_mutex_t *)&f->mu);
	int k = 0;
	for (; k < f->nlist && k < max; k++)
		paths[k] = f->skip_list[k];
	pthread_mutex_unlock((pthread_mutex_t *)&f->mu);
	return k;
}

/* ---------------------------------------------------------------- datasets */
static dnn_imagefolder *folder_new(int C, int H, int W, uint64_t seed)
{
	dnn_imagefolder *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	pthread_mutex_init(&f->mu, NULL);
	f->C = C, f->H = H, f->W = W, f->seed = seed;
	for (int c = 0; c < 3; c++)
		f->mean[c] = 0.0f, f->std[c] = 1.0f;
	return f;
}

void dnn_imagefolder_free(dnn_imagefolder *f)
{
	if (!f)
		return;
	for (int i = 0; i < f->n; i++)
		free(f->paths[i]);
	for (int i = 0; i < f->nlist; i++)
		free(f->skip_list[i]);
	free(f->paths), free(f->bad);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

static int check_shape(int C, int H, int W, char *err, size_t errlen)
{
	if (C != 1 && C != 3) {
		set_err(err, errlen, "the net's input has %d channels; image folders need 1 (grey) or 3 (RGB)", C);
		return -1;
	}
	if (H < 1 || W < 1 || (long)H * W > DNN_IMAGE_MAX_PIXELS) {
		set_err(err, errlen, "input size %dx%d out of range", H, W);
		return -1;
	}
	return 0;
}

/* Mean and std of pixels/255 over the centre crops of a seeded sample of the files. */
static void measure_stats(dnn_imagefolder *f)
{
	const size_t per = (size_t)f->C * f->H * f->W, hw = (size_t)f->H * f->W;
	float *buf = malloc(per * sizeof(float));
	const float zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
	double s[3] = {0}, s2[3] = {0};
	long npix = 0;
	uint64_t rng = f->seed ^ 0x5eed5eed5eedull;
	int want = f->n < STATS_SAMPLE ? f->n : STATS_SAMPLE;
	for (int t = 0; buf && t < want; t++) {
		int i = f->n <= STATS_SAMPLE ? t : (int)(dnn_splitmix64(&rng) % (uint64_t)f->n);
		char why[256];
		if (dnn_image_decode_crop(buf, f->paths[i], f->C, f->H, f->W, 0, 0, zero, one, why, sizeof(why)) != 0) {
			on_bad(f, i, why);
			continue;
		}
		for (int c = 0; c < f->C; c++)
			for (size_t k = 0; k < hw; k++) {
				double v = buf[c * hw + k];
				s[c] += v, s2[c] += v * v;
			}
		npix += (long)hw;
	}
	free(buf);
	for (int c = 0; c < f->C; c++) {
		if (npix == 0) {
			f->mean[c] = 0.5f, f->std[c] = 0.25f;
			continue;
		}
		double m = s[c] / npix, var = s2[c] / npix - m * m;
		f->mean[c] = (float)m;
		f->std[c] = var > 1e-6 ? (float)sqrt(var) : 1e-3f;
	}
}

void dnn_imagefolder_channel_stats(const dnn_imagefolder *f, float *mean, float *std)
{
	for (int c = 0; c < f->C; c++)
		mean[c] = f->mean[c], std[c] = f->std[c];
}

static int cmp_u64(const void *a, const void *b);

/* Held-out files of class list [a, b): the k with the smallest keys, k = round(fraction * n). */
static int mark_held_out(const file_list *fl, int a, int b, double fraction, unsigned char *held)
{
	int n = b - a;
	int k = (int)(fraction * n + 0.5);
	if (k > n - 1)
		k = n - 1; /* every class keeps a training image */
	if (k <= 0)
		return 0;
	uint64_t *t = malloc(sizeof(uint64_t) * (size_t)n);
	if (!t)
		return -1;
	memcpy(t, fl->key + a, sizeof(uint64_t) * (size_t)n);
	qsort(t, (size_t)n, sizeof(uint64_t), cmp_u64);
	uint64_t thr = t[k - 1];
	free(t);
	for (int i = a, m = 0; i < b; i++)
		if (fl->key[i] <= thr && m < k)
			held[i] = 1, m++;
	return 0;
}

static int find_class(char **names, int n, const char *name)
{
	char **hit = bsearch(&name, names, (size_t)n, sizeof(char *), cmp_str);
	return hit ? (int)(hit - names) : -1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The files of the class folders `sub` of root into fl (labels from their position in classes). */
static int collect_classes(file_list *fl, const char *root, char **sub, int nsub, char **classes, int ncls,
			   int *cls_start, const char *train_root, char *err, size_t errlen)
{
	for (int i = 0; i < nsub; i++) {
		int label = find_class(classes, ncls, sub[i]);
		if (label < 0) {
			set_err(err, errlen, "%s/%s: class folder not in %s (the classes are the folders of %s)", root,
				sub[i], train_root, train_root);
			return -1;
		}
		char *p = join(root, sub[i]);
		cls_start[i] = fl->n;
		if (!p) {
			set_err(err, errlen, "out of memory");
			return -1;
		}
		int rc = collect(fl, p, sub[i], label, 0, err, errlen);
		free(p);
		if (rc != 0)
			return -1;
	}
	cls_start[nsub] = fl->n;
	return 0;
}

/* Keep only `limit` of the selected files: those with the smallest (re-mixed) path hashes. */
static int apply_limit(const file_list *fl, unsigned char *keep, int n, int limit)
{
	uint64_t *k = malloc(sizeof(uint64_t) * (size_t)n);
	if (!k)
		return -1;
	int m = 0;
	for (int i = 0; i < fl->n; i++)
		if (keep[i])
			k[m++] = fl->key[i] ^ 0xa5a5a5a5a5a5a5a5ull;
	qsort(k, (size_t)n, sizeof(uint64_t), cmp_u64);
	uint64_t thr = k[limit - 1];
	free(k);
	int kept = 0;
	for (int i = 0; i < fl->n; i++)
		if (keep[i]) {
			keep[i] = (fl->key[i] ^ 0xa5a5a5a5a5a5a5a5ull) <= thr && kept < limit;
			kept += keep[i];
		}
	return kept;
}

int dnn_imagefolder_load(dnn_dataset *ds, const char *dir, int train, double val_fraction, int limit,
			 uint64_t seed, int C, int H, int W, int quiet, char *err, size_t errlen)
{
	memset(ds, 0, sizeof(*ds));
	if (check_shape(C, H, W, err, errlen) != 0)
		return -1;
	char *tr, *va;
	if (roots(dir, &tr, &va, err, errlen) != 0)
		return -1;
	char **classes = NULL, **sub = NULL;
	int ncls = dnn_imagefolder_classes(dir, &classes, err, errlen), nsub = 0;
	file_list fl = {0};
	unsigned char *keep = NULL;
	int *cls_start = NULL;
	dnn_imagefolder *f = NULL;
	int rc = -1;
	if (ncls < 0)
		goto out;
	/* Validation files come from val/ when present; otherwise both sides list the class folders
	 * and keep their own part of the split. */
	const int from_val = !train && va;
	const char *root = from_val ? va : tr;
	if (from_val) {
		if ((nsub = list_sorted(va, 1, &sub, err, errlen)) < 0)
			goto out;
	} else {
		sub = classes, nsub = ncls;
	}
	cls_start = calloc((size_t)nsub + 1, sizeof(int));
	if (!cls_start) {
		set_err(err, errlen, "out of memory");
		goto out;
	}
	if (collect_classes(&fl, root, sub, nsub, classes, ncls, cls_start, tr, err, errlen) != 0)
		goto out;
	keep = calloc((size_t)fl.n + 1, 1);
	if (!keep) {
		set_err(err, errlen, "out of memory");
		goto out;
	}
	if (!va) { /* the split: per class, the smallest path hashes are held out */
		for (int i = 0; val_fraction > 0 && i < nsub; i++)
			if (mark_held_out(&fl, cls_start[i], cls_start[i + 1], val_fraction, keep) != 0) {
				set_err(err, errlen, "out of memory");
				goto out;
			}
		if (train)
			for (int i = 0; i < fl.n; i++)
				keep[i] = !keep[i];
	} else {
		memset(keep, 1, (size_t)fl.n);
	}
	int n = 0;
	for (int i = 0; i < fl.n; i++)
		n += keep[i];
	if (limit > 0 && limit < n && (n = apply_limit(&fl, keep, n, limit)) < 0) {
		set_err(err, errlen, "out of memory");
		goto out;
	}
	f = folder_new(C, H, W, seed);
	ds->labels = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
	ds->class_names = calloc((size_t)ncls, sizeof(char *));
	if (!f || !ds->labels || !ds->class_names) {
		set_err(err, errlen, "out of memory");
		goto out;
	}
	f->paths = malloc(sizeof(char *) * (size_t)(n ? n : 1));
	f->bad = calloc((size_t)(n ? n : 1), 1);
	if (!f->paths || !f->bad) {
		set_err(err, errlen, "out of memory");
		goto out;
	}
	for (int i = 0; i < fl.n; i++)
		if (keep[i]) {
			f->paths[f->n] = fl.path[i], fl.path[i] = NULL;
			ds->labels[f->n] = fl.label[i];
			f->n++;
		}
	ds->classes = ncls;
	for (int i = 0; i < ncls; i++)
		ds->class_names[i] = classes[i], classes[i] = NULL;
	ds->n = n, ds->C = C, ds->H = H, ds->W = W;
	ds->folder = f, ds->free_folder = dnn_imagefolder_free;
	/* Empty files were left out when listed: count them (those of this side of the split only
	 * when val/ exists; otherwise on the training side). */
	if (train || from_val)
		for (int i = 0; i < fl.nempty; i++)
			note_skipped(f, i < MAX_SKIP_LIST ? fl.empty_first[i] : "(empty file)", "empty file");
	if (train)
		measure_stats(f);
	if (!quiet)
		fprintf(stderr, "%s: %d %s images in %d classes (%s%s)\n", dir, n, train ? "training" : "validation",
			ncls, va ? "folder " : (train ? "rest of " : "held-out split of "), from_val ? va : tr);
	f = NULL;
	rc = 0;
out:
	if (rc != 0) {
		dnn_dataset_free(ds);
		dnn_imagefolder_free(f);
	}
	if (sub != classes)
		free_list(sub, nsub);
	free_list(classes, ncls > 0 ? ncls : 0);
	free(cls_start), free(keep);
	fl_free(&fl);
	free(tr), free(va);
	return rc;
}

int dnn_imagefolder_from_files(dnn_dataset *ds, const char *const *paths, int n, int C, int H, int W,
			       char *err, size_t errlen)
{
	memset(ds, 0, sizeof(*ds));
	if (check_shape(C, H, W, err, errlen) != 0)
		return -1;
	dnn_imagefolder *f = folder_new(C, H, W, 0);
	ds->labels = calloc((size_t)(n ? n : 1), sizeof(int32_t));
	if (f) {
		f->paths = calloc((size_t)(n ? n : 1), sizeof(char *));
		f->bad = calloc((size_t)(n ? n : 1), 1);
	}
	ds->folder = f, ds->free_folder = dnn_imagefolder_free;
	if (!f || !ds->labels || !f->paths || !f->bad) {
		set_err(err, errlen, "out of memory");
		dnn_dataset_free(ds);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (!(f->paths[i] = strdup(paths[i]))) {
			set_err(err, errlen, "out of memory");
			dnn_dataset_free(ds);
			return -1;
		}
		f->n++;
	}
	ds->n = n, ds->C = C, ds->H = H, ds->W = W;
	return 0;
}

int dnn_imagefolder_insert_load(const dnn_task_opts *o, const dnn_dataset *ds, const int *idx, int n, int augment,
				long step, const float *mean, const float *std, starpu_data_handle_t x,
				starpu_data_handle_t y)
{
	dnn_imagefolder *f = ds->folder;
	dnn_load_images_args *a = malloc(sizeof(*a) + sizeof(int) * (size_t)n);
	if (!a)
		return -ENOMEM;
	uint64_t s = f->seed ^ (0xd1b54a32d192ed03ull * (uint64_t)(step + 1));
	*a = (dnn_load_images_args){.paths = (const char *const *)f->paths, .labels = ds->labels, .mean = mean, .std = std,
				    .C = f->C, .H = f->H, .W = f->W, .augment = augment, .seed = dnn_splitmix64(&s),
				    .on_bad = on_bad, .ctx = f, .n = n};
	memcpy(a->idx, idx, sizeof(int) * (size_t)n);
	int rc = dnn_insert_load_images(o, a, x, y);
	free(a);
	return rc;
}
