/* bad_dataset.c — every dataset reader against bad input made here: wrong magic, wrong dims,
 * zero / negative / absurd sizes, disagreeing counts, truncation (raw and gzip), corrupt gzip,
 * out-of-range labels, missing paths, directories, empty files. Each must fail with one line
 * naming the file, leave the set empty, and never attempt a huge allocation (the address space
 * is capped at 1 GiB above start-up, so such an attempt would show as "out of memory"). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dataset.h"
#include "test_util.h"

static char tmpdir[4096];

typedef struct {
	uint8_t *p;
	size_t n;
} buf;


static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static buf idx_images(uint32_t magic, uint32_t n, uint32_t rows, uint32_t cols, size_t pixels)
{
	buf b = {calloc(16 + pixels, 1), 16 + pixels};
	put_be32(b.p, magic);
	put_be32(b.p + 4, n);
	put_be32(b.p + 8, rows);
	put_be32(b.p + 12, cols);
	for (size_t i = 0; i < pixels; i++)
		b.p[16 + i] = (uint8_t)i;
	return b;
}

/* Labels (i * 7) % mod: with mod 11 and 10 labels, label 10 appears at index 3. */
static buf idx_labels(uint32_t magic, uint32_t n, size_t count, int mod)
{
	buf b = {calloc(8 + count, 1), 8 + count};
	put_be32(b.p, magic);
	put_be32(b.p + 4, n);
	for (size_t i = 0; i < count; i++)
		b.p[8 + i] = (uint8_t)((i * 7) % (size_t)mod);
	return b;
}

/* The first n bytes of b (sharing its memory). */
static buf cut(buf b, size_t n)
{
	return (buf){b.p, n};
}

/* The gzip'd form of b, in memory (so it can be cut or corrupted). */
static buf gzipped(buf b)
{
	uLong cap = compressBound(b.n) + 64;
	buf g = {malloc(cap), 0};
	z_stream s;
	memset(&s, 0, sizeof(s));
	// windowBits 15 + 16: gzip wrapper.
	if (deflateInit2(&s, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		fprintf(stderr, "deflateInit2 failed\n");
		exit(1);
	}
	s.next_in = b.p;
	s.avail_in = (uInt)b.n;
	s.next_out = g.p;
	s.avail_out = (uInt)cap;
	if (deflate(&s, Z_FINISH) != Z_STREAM_END) {
		fprintf(stderr, "deflate failed\n");
		exit(1);
	}
	g.n = s.total_out;
	deflateEnd(&s);
	return g;
}

static void write_buf(const char *path, buf b)
{
	FILE *f = fopen(path, "wb");
	if (!f || (b.n && fwrite(b.p, 1, b.n, f) != b.n) || fclose(f) != 0) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(1);
	}
}

/* The common checks on one failed load. */
static void expect_fail(const char *name, int rc, const dnn_dataset *ds, const char *err,
			const char *path, const char *want)
{
	printf("%-34s -> %s\n", name, err);
	TEST_CHECK(rc == -1, "%s: rc %d, want -1", name, rc);
	TEST_CHECK(err[0] != '\0', "%s: empty err", name);
	TEST_CHECK(strstr(err, path) != NULL, "%s: err does not name %s", name, path);
	TEST_CHECK(strchr(err, '\n') == NULL, "%s: err is more than one line", name);
	TEST_CHECK(want == NULL || strstr(err, want) != NULL, "%s: err lacks \"%s\"", name, want);
	TEST_CHECK(strstr(err, "out of memory") == NULL, "%s: attempted a huge allocation", name);
	TEST_CHECK(ds->images == NULL && ds->labels == NULL && ds->n == 0 && ds->class_names == NULL,
		   "%s: set not left empty", name);
}

enum { BAD_IMAGES, BAD_LABELS };

typedef struct {
	const char *name;
	int which;        // which file is bad (and must be named in err)
	buf images, labels;
	int max_classes;
	const char *want; // substring the error must contain, or NULL
} idx_case;

static void run_idx_case(idx_case *c, int gz, int *count)
{
	char ip[4200], lp[4200], err[512], name[128];
	snprintf(ip, sizeof(ip), "%s/%s%s.images", tmpdir, c->name, gz ? ".gz" : "");
	snprintf(lp, sizeof(lp), "%s/%s%s.labels", tmpdir, c->name, gz ? ".gz" : "");
	buf bi = gz ? gzipped(c->images) : c->images, bl = gz ? gzipped(c->labels) : c->labels;
	write_buf(ip, bi);
	write_buf(lp, bl);
	dnn_dataset ds;
	memset(&ds, 0xA5, sizeof(ds)); // the reader must reset it, whatever it held
	int rc = dnn_dataset_load_idx(&ds, ip, lp, c->max_classes, 0, err, sizeof(err));
	snprintf(name, sizeof(name), "idx %s%s", c->name, gz ? " (gzip)" : "");
	expect_fail(name, rc, &ds, err, c->which == BAD_IMAGES ? ip : lp, c->want);
	if (rc == 0)
		dnn_dataset_free(&ds);
	if (gz) {
		free(bi.p);
		free(bl.p);
	}
	(*count)++;
}

static void idx_cases(int *count)
{
	const uint32_t N = 10, R = 4, C = 3, P = N * R * C;
	buf gi = idx_images(0x803, N, R, C, P), gl = idx_labels(0x801, N, N, 10);
#define IMG(name, b, want) {name, BAD_IMAGES, b, gl, 10, want}
#define LAB(name, b, want) {name, BAD_LABELS, gi, b, 10, want}
	idx_case cases[] = {
	    IMG("images-wrong-magic", idx_images(0x12345678, N, R, C, P), "wrong magic"),
	    IMG("images-4-dims", idx_images(0x804, N, R, C, P), "dimensions"),
	    IMG("images-2-dims", idx_images(0x802, N, R, C, P), "dimensions"),
	    IMG("images-float-type", idx_images(0xD03, N, R, C, P), "not unsigned byte"),
	    IMG("images-is-labels", idx_labels(0x801, N, N, 10), "dimensions"),
	    IMG("images-zero-n", idx_images(0x803, 0, R, C, 0), "zero"),
	    IMG("images-zero-rows", idx_images(0x803, N, 0, C, 0), "zero"),
	    IMG("images-zero-cols", idx_images(0x803, N, R, 0, 0), "zero"),
	    IMG("images-negative-n", idx_images(0x803, 0xFFFFFFFFu, R, C, P), "absurd"),
	    IMG("images-negative-rows", idx_images(0x803, N, 0x80000000u, C, P), "absurd"),
	    IMG("images-absurd-n", idx_images(0x803, 100000001u, R, C, P), "absurd"),
	    IMG("images-absurd-size", idx_images(0x803, N, 5000, 5000, P), "absurd"),
	    IMG("images-overflow-size", idx_images(0x803, N, 65536, 65536, P), "absurd"),
	    // Within every per-dimension limit, but the header promises 1.6 PB: truncated, and no
	    // allocation beyond what the file really holds.
	    {"images-huge-promise", BAD_IMAGES, idx_images(0x803, 1000000u, 4096, 4096, P),
	     idx_labels(0x801, 1000000u, 1000000u, 10), 10, "truncated"},
	    {"labels-huge-promise", BAD_LABELS, idx_images(0x803, 100000000u, 4096, 4096, P),
	     idx_labels(0x801, 100000000u, N, 10), 10, "truncated"},
	    IMG("images-truncated-data", idx_images(0x803, N, R, C, P - 1), "truncated"),
	    IMG("images-truncated-header", cut(gi, 10), "truncated"),
	    IMG("images-only-magic", cut(gi, 4), "truncated"),
	    IMG("images-3-bytes", cut(gi, 3), "truncated"),
	    IMG("images-empty", cut(gi, 0), NULL),
	    LAB("labels-wrong-magic", idx_labels(0xDEADBEEFu, N, N, 10), "wrong magic"),
	    LAB("labels-3-dims", idx_labels(0x803, N, N, 10), "dimensions"),
	    LAB("labels-is-images", gi, "dimensions"),
	    LAB("labels-zero-n", idx_labels(0x801, 0, 0, 10), "zero"),
	    LAB("labels-negative-n", idx_labels(0x801, 0x80000000u, N, 10), "absurd"),
	    LAB("labels-count-disagrees", idx_labels(0x801, N - 1, N - 1, 10), "labels"),
	    LAB("labels-count-more", idx_labels(0x801, N + 1, N + 1, 10), "labels"),
	    LAB("labels-truncated-data", idx_labels(0x801, N, N - 1, 10), "truncated"),
	    LAB("labels-truncated-header", cut(gl, 6), "truncated"),
	    LAB("labels-out-of-range", idx_labels(0x801, N, N, 11), "out of range"),
	    LAB("labels-empty", cut(gl, 0), NULL),
	};
#undef IMG
#undef LAB
	int nc = (int)(sizeof(cases) / sizeof(cases[0]));
	for (int i = 0; i < nc; i++)
		for (int gz = 0; gz < 2; gz++) {
			// A gzip'd empty file is a valid gzip stream of nothing: "truncated", not "empty".
			const char *w = cases[i].want;
			if (gz && (cases[i].images.n == 0 || cases[i].labels.n == 0))
				cases[i].want = "truncated";
			run_idx_case(&cases[i], gz, count);
			cases[i].want = w;
		}

	// max_classes bounds the labels; an impossible max_classes is refused.
	idx_case small = {"labels-over-max-classes-3", BAD_LABELS, gi, gl, 3, "max_classes 3"};
	run_idx_case(&small, 0, count);
	idx_case zero = {"max-classes-0", BAD_LABELS, gi, gl, 0, "max_classes"};
	run_idx_case(&zero, 0, count);

	// Corrupt gzip: a gzip stream cut short, flipped bytes in the deflate data, a bad trailer.
	buf gzi = gzipped(gi);
	struct {
		const char *name;
		buf b;
		size_t flip; // 0: none
	} gzc[] = {
	    {"gzip-cut-in-half", {gzi.p, gzi.n / 2}, 0},
	    {"gzip-cut-before-trailer", {gzi.p, gzi.n - 8}, 0},
	    {"gzip-header-only", {gzi.p, 10}, 0},
	    {"gzip-flipped-data", gzi, 14},
	    {"gzip-flipped-crc", gzi, gzi.n - 6},
	    {"gzip-bad-method", gzi, 2},
	};
	for (size_t i = 0; i < sizeof(gzc) / sizeof(gzc[0]); i++) {
		buf b = {malloc(gzc[i].b.n), gzc[i].b.n};
		memcpy(b.p, gzc[i].b.p, b.n);
		if (gzc[i].flip)
			b.p[gzc[i].flip] ^= 0x5A;
		idx_case c = {gzc[i].name, BAD_IMAGES, b, gl, 10, NULL};
		run_idx_case(&c, 0, count);
		free(b.p);
	}
	free(gzi.p);

	// Missing files and directories, for each argument.
	char ip[4200], lp[4200], err[512];
	dnn_dataset ds;
	snprintf(ip, sizeof(ip), "%s/good.images", tmpdir);
	snprintf(lp, sizeof(lp), "%s/good.labels", tmpdir);
	write_buf(ip, gi);
	write_buf(lp, gl);
	int rc = dnn_dataset_load_idx(&ds, ip, lp, 10, 0, err, sizeof(err));
	TEST_CHECK(rc == 0, "the good pair must load: %s", err);
	dnn_dataset_free(&ds);
	char missing[4200];
	snprintf(missing, sizeof(missing), "%s/no-such-file", tmpdir);
	rc = dnn_dataset_load_idx(&ds, missing, lp, 10, 0, err, sizeof(err));
	expect_fail("idx images-missing", rc, &ds, err, missing, "No such file");
	rc = dnn_dataset_load_idx(&ds, ip, missing, 10, 0, err, sizeof(err));
	expect_fail("idx labels-missing", rc, &ds, err, missing, "No such file");
	rc = dnn_dataset_load_idx(&ds, tmpdir, lp, 10, 0, err, sizeof(err));
	expect_fail("idx images-is-directory", rc, &ds, err, tmpdir, "directory");
	rc = dnn_dataset_load_idx(&ds, ip, tmpdir, 10, 0, err, sizeof(err));
	expect_fail("idx labels-is-directory", rc, &ds, err, tmpdir, "directory");
	*count += 4;

	// The Fashion-MNIST directory loader.
	rc = dnn_dataset_load_fashion(&ds, missing, 1, 0, err, sizeof(err));
	expect_fail("fashion dir-missing", rc, &ds, err, missing, "No such file");
	rc = dnn_dataset_load_fashion(&ds, ip, 1, 0, err, sizeof(err));
	expect_fail("fashion dir-is-a-file", rc, &ds, err, ip, "not a directory");
	rc = dnn_dataset_load_fashion(&ds, tmpdir, 1, 0, err, sizeof(err));
	expect_fail("fashion dir-without-files", rc, &ds, err, tmpdir, "train-images-idx3-ubyte");
	*count += 3;

	free(gi.p);
	free(gl.p);
	for (int i = 0; i < nc; i++) {
		if (cases[i].images.p != gi.p)
			free(cases[i].images.p);
		if (cases[i].labels.p != gl.p && cases[i].labels.p != gi.p)
			free(cases[i].labels.p);
	}
}

static buf cifar(int records, int bad_label_at)
{
	buf b = {malloc((size_t)records * 3073 + 1), (size_t)records * 3073};
	for (int r = 0; r < records; r++) {
		b.p[(size_t)r * 3073] = (uint8_t)(r == bad_label_at ? 10 : r % 10);
		memset(b.p + (size_t)r * 3073 + 1, r, 3072);
	}
	b.p[b.n] = 0xEE; // the "extra-byte" case reads one byte past the records
	return b;
}

static void cifar_cases(int *count)
{
	char good[4200], bad[4200], err[512], name[128];
	dnn_dataset ds;
	snprintf(good, sizeof(good), "%s/good.cifar", tmpdir);
	buf g = cifar(3, -1);
	write_buf(good, g);
	struct {
		const char *name;
		buf b;
		int gz;
		const char *want;
	} cases[] = {
	    {"truncated-record", {g.p, g.n - 5}, 0, "truncated"},
	    {"truncated-record-gzip", {g.p, g.n - 5}, 1, "truncated"},
	    {"one-byte", {g.p, 1}, 0, "truncated"},
	    {"extra-byte", {g.p, g.n + 1}, 0, "truncated"},
	    {"label-10", cifar(3, 1), 0, "out of range"},
	    {"label-10-gzip", cifar(3, 2), 1, "out of range"},
	    {"empty", {g.p, 0}, 0, "empty"},
	    {"empty-gzip", {g.p, 0}, 1, "no CIFAR-10 records"},
	    {"gzip-cut", {NULL, 0}, 2, NULL}, // filled below: a gzip stream cut short
	};
	int nc = (int)(sizeof(cases) / sizeof(cases[0]));
	for (int i = 0; i < nc; i++) {
		buf b = cases[i].b;
		if (cases[i].gz == 2) {
			buf z = gzipped(g);
			b = (buf){z.p, z.n / 2};
		} else if (cases[i].gz) {
			b = gzipped(b);
		}
		snprintf(bad, sizeof(bad), "%s/cifar-%s", tmpdir, cases[i].name);
		write_buf(bad, b);
		if (cases[i].gz)
			free(b.p);
		// The bad file alone, and after a good one (err must name the bad one).
		for (int after = 0; after < 2; after++) {
			const char *paths[2] = {good, bad};
			memset(&ds, 0x5A, sizeof(ds));
			int rc = dnn_dataset_load_cifar10(&ds, paths + 1 - after, 1 + after, 0, err,
							  sizeof(err));
			snprintf(name, sizeof(name), "cifar %s%s", cases[i].name, after ? " (2nd file)" : "");
			expect_fail(name, rc, &ds, err, bad, cases[i].want);
			(*count)++;
		}
	}
	free(cases[4].b.p);
	free(cases[5].b.p);

	char missing[4200];
	snprintf(missing, sizeof(missing), "%s/no-such-batch.bin", tmpdir);
	const char *pm[2] = {good, missing};
	int rc = dnn_dataset_load_cifar10(&ds, pm, 2, 0, err, sizeof(err));
	expect_fail("cifar missing", rc, &ds, err, missing, "No such file");
	const char *pd[1] = {tmpdir};
	rc = dnn_dataset_load_cifar10(&ds, pd, 1, 0, err, sizeof(err));
	expect_fail("cifar directory", rc, &ds, err, tmpdir, "directory");
	rc = dnn_dataset_load_cifar10(&ds, pm, 0, 0, err, sizeof(err));
	expect_fail("cifar no files", rc, &ds, err, "cifar10", NULL);
	*count += 3;

	const char *pg[1] = {good};
	rc = dnn_dataset_load_cifar10(&ds, pg, 1, 0, err, sizeof(err));
	TEST_CHECK(rc == 0 && ds.n == 3, "the good CIFAR file must load: %s", err);
	dnn_dataset_free(&ds);
	// A limit that stops before the bad label (record 1) loads: only what is read is checked.
	snprintf(bad, sizeof(bad), "%s/cifar-label-10", tmpdir);
	const char *pl[1] = {bad};
	rc = dnn_dataset_load_cifar10(&ds, pl, 1, 1, err, sizeof(err));
	TEST_CHECK(rc == 0 && ds.n == 1, "limit 1 before a bad label must load: %s", err);
	dnn_dataset_free(&ds);
	free(g.p);
}

/* Caps the address space at 1 GiB above what the process maps now. */
static void cap_address_space(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long pages = 0;
	if (!f || fscanf(f, "%lu", &pages) != 1) {
		printf("note: cannot read /proc/self/statm; address space not capped\n");
		if (f)
			fclose(f);
		return;
	}
	fclose(f);
	struct rlimit rl;
	rl.rlim_cur = rl.rlim_max = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)1 << 30);
	if (setrlimit(RLIMIT_AS, &rl) != 0)
		perror("setrlimit(RLIMIT_AS)");
}

int main(void)
{
	const char *b = getenv("DNN_BUILD_DIR");
	snprintf(tmpdir, sizeof(tmpdir), "%s/bad_dataset.XXXXXX", b && *b ? b : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror(tmpdir);
		return 1;
	}
	cap_address_space();
	int count = 0;
	idx_cases(&count);
	cifar_cases(&count);
	printf("%d bad inputs checked\n", count);
	test_rmtree(tmpdir);
	return test_report("bad_dataset");
}
