/* unit_checkpoint.c — checkpoint save/load round trip, atomic overwrite (no temporary files left,
 * the old checkpoint intact when a save fails), and rejection of truncated, corrupt, foreign and
 * absurd files with one clean line and the caller's buffers untouched. Format versions 2 and 3
 * carry the net text; version-1 and -2 files still load; dnn_checkpoint_read_info reads and
 * verifies the header alone. dnn_ckpt_check_net (model_ckpt.h), the one test of "the same net",
 * for every version: a changed float key is refused naming its node and key. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "checkpoint.h"
#include "graph.h"
#include "model_ckpt.h"
#include "test_util.h"

#define FP 0x0123456789abcdefull
#define NT 4

static char tmpdir[4096];
static const char *names[NT] = {"c1.weight", "c1.bias", "empty", "c1.weight.momentum"};
static const uint64_t lens[NT] = {3000, 10, 0, 3000};
static char *classes[3] = {"cat", "", "a class name with spaces"};
static char net[] = "# net tiny.net\ninput x 1 8 8\ndense h x out=3\nsoftmax_xent loss h\n";


static void make_tensors(dnn_ckpt_tensor *t, float **store, float seed)
{
	for (int i = 0; i < NT; i++) {
		store[i] = malloc((lens[i] ? lens[i] : 1) * sizeof(float));
		for (uint64_t j = 0; j < lens[i]; j++)
			store[i][j] = seed + (float)i * 1000.0f + (float)j * 0.25f;
		t[i] = (dnn_ckpt_tensor){names[i], store[i], lens[i]};
	}
}

static void free_tensors(float **store)
{
	for (int i = 0; i < NT; i++)
		free(store[i]);
}

static dnn_ckpt_meta make_meta(uint64_t fp)
{
	return (dnn_ckpt_meta){.net_fingerprint = fp, .step = 12345678901ull, .epoch = 7,
			       .rng_state = 0xfeedfacecafebeefull, .nclasses = 3, .class_names = classes,
			       .net_text = net};
}

static void path_in_tmp(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", tmpdir, name);
}

static int count_tmp_files(void)
{
	DIR *d = opendir(tmpdir);
	int c = 0;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		if (strstr(e->d_name, ".tmp."))
			c++;
	closedir(d);
	return c;
}

static unsigned char *slurp(const char *path, size_t *n)
{
	struct stat st;
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	unsigned char *b = NULL;
	if (fstat(fileno(f), &st) == 0 && (b = malloc((size_t)st.st_size + 1)) != NULL)
		*n = fread(b, 1, (size_t)st.st_size, f);
	fclose(f);
	return b;
}

static void spit(const char *path, const void *b, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f || (n && fwrite(b, 1, n, f) != n) || fclose(f) != 0) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(1);
	}
}

/* Loads a file expected to be rejected and checks that nothing of the caller's changed. */
static void expect_reject(const char *what, const char *path, const dnn_ckpt_tensor *tensors_in,
			  int nt, uint64_t fp, const char *want)
{
	float *store[NT];
	dnn_ckpt_tensor t[NT];
	make_tensors(t, store, 0.0f);
	for (int i = 0; i < NT; i++)
		for (uint64_t j = 0; j < lens[i]; j++)
			store[i][j] = -7.0f; // sentinel
	for (int i = 0; i < nt && i < NT; i++) {
		t[i].name = tensors_in[i].name;
		t[i].n = tensors_in[i].n;
		if (t[i].n > lens[i]) {
			store[i] = realloc(store[i], t[i].n * sizeof(float));
			for (uint64_t j = 0; j < t[i].n; j++)
				store[i][j] = -7.0f;
			t[i].data = store[i];
		}
	}
	dnn_ckpt_meta m = {.net_fingerprint = fp, .step = 99, .epoch = 98, .rng_state = 97,
			   .nclasses = 0, .class_names = NULL};
	char err[512];
	int rc = dnn_checkpoint_load(path, &m, t, nt, err, sizeof(err));
	printf("%-28s -> %s\n", what, err);
	TEST_CHECK(rc == -1, "%s: rc %d, want -1", what, rc);
	TEST_CHECK(err[0] && strstr(err, path) == err, "%s: err does not start with the path", what);
	TEST_CHECK(strchr(err, '\n') == NULL, "%s: err is more than one line", what);
	TEST_CHECK(want == NULL || strstr(err, want), "%s: err lacks \"%s\"", what, want);
	TEST_CHECK(m.net_fingerprint == fp && m.step == 99 && m.epoch == 98 && m.rng_state == 97 &&
			   m.nclasses == 0 && m.class_names == NULL && m.net_text == NULL,
		   "%s: meta was modified", what);
	int touched = 0;
	for (int i = 0; i < nt && i < NT; i++)
		for (uint64_t j = 0; j < t[i].n; j++)
			if (t[i].data[j] != -7.0f)
				touched++;
	TEST_CHECK(touched == 0, "%s: %d tensor values were written", what, touched);
	if (rc == 0)
		dnn_ckpt_free_names(&m);
	free_tensors(store);
}

static void test_round_trip(const char *ck)
{
	float *src[NT], *dst[NT];
	dnn_ckpt_tensor ts[NT], td[NT];
	make_tensors(ts, src, 1.5f);
	// Bit patterns that must survive exactly: -0, inf, NaN payload, denormal.
	const uint32_t odd[4] = {0x80000000u, 0x7f800000u, 0x7fc01234u, 0x00000001u};
	memcpy(src[0], odd, sizeof(odd));
	dnn_ckpt_meta m = make_meta(FP);
	char err[512];
	int rc = dnn_checkpoint_save(ck, &m, ts, NT, err, sizeof(err));
	TEST_CHECK(rc == 0, "save: %s", err);
	TEST_CHECK(count_tmp_files() == 0, "save left a temporary file");

	make_tensors(td, dst, -1.0f);
	dnn_ckpt_meta l = {.net_fingerprint = FP};
	rc = dnn_checkpoint_load(ck, &l, td, NT, err, sizeof(err));
	TEST_CHECK(rc == 0, "load: %s", err);
	for (int i = 0; i < NT && rc == 0; i++)
		TEST_CHECK(memcmp(src[i], dst[i], lens[i] * sizeof(float)) == 0, "tensor %s differs",
			   names[i]);
	TEST_CHECK(rc != 0 || (l.net_fingerprint == FP && l.step == m.step && l.epoch == m.epoch &&
			       l.rng_state == m.rng_state && l.nclasses == 3),
		   "meta differs after load");
	TEST_CHECK(rc != 0 || (l.version == DNN_CKPT_VERSION && l.net_text && strcmp(l.net_text, net) == 0),
		   "version %u / net text '%s' after load", l.version, l.net_text ? l.net_text : "(null)");
	for (uint32_t i = 0; rc == 0 && i < l.nclasses && l.nclasses == 3; i++)
		TEST_CHECK(l.class_names && strcmp(l.class_names[i], classes[i]) == 0,
			   "class name %u differs", i);
	dnn_ckpt_free_names(&l);
	TEST_CHECK(l.class_names == NULL && l.nclasses == 0 && l.net_text == NULL, "free_names resets meta");
	dnn_ckpt_free_names(&l);

	// Fingerprint 0 on load means "do not check" and reports the file's fingerprint.
	dnn_ckpt_meta any = {0};
	rc = dnn_checkpoint_load(ck, &any, td, NT, err, sizeof(err));
	TEST_CHECK(rc == 0 && any.net_fingerprint == FP, "load with fingerprint 0: %s", err);
	dnn_ckpt_free_names(&any);

	// No class names and no tensors at all are valid too.
	char ck0[4300];
	path_in_tmp(ck0, sizeof(ck0), "bare.ckpt");
	dnn_ckpt_meta bare = {.net_fingerprint = 5, .step = 1};
	rc = dnn_checkpoint_save(ck0, &bare, NULL, 0, err, sizeof(err));
	TEST_CHECK(rc == 0, "save bare: %s", err);
	dnn_ckpt_meta lb = {.net_fingerprint = 5};
	rc = dnn_checkpoint_load(ck0, &lb, NULL, 0, err, sizeof(err));
	TEST_CHECK(rc == 0 && lb.step == 1 && lb.nclasses == 0 && lb.class_names == NULL,
		   "load bare: %s", err);
	TEST_CHECK(unlink(ck0) == 0, "unlink bare");
	free_tensors(src);
	free_tensors(dst);
}

static void test_atomic_overwrite(const char *ck)
{
	float *a[NT], *b[NT], *d[NT];
	dnn_ckpt_tensor ta[NT], tb[NT], td[NT];
	make_tensors(ta, a, 10.0f);
	make_tensors(tb, b, 20.0f);
	dnn_ckpt_meta m = make_meta(FP);
	char err[512];
	TEST_CHECK(dnn_checkpoint_save(ck, &m, ta, NT, err, sizeof(err)) == 0, "save a: %s", err);
	m.step = 2;
	TEST_CHECK(dnn_checkpoint_save(ck, &m, tb, NT, err, sizeof(err)) == 0, "save b: %s", err);
	TEST_CHECK(count_tmp_files() == 0, "overwrite left a temporary file");
	make_tensors(td, d, 0.0f);
	dnn_ckpt_meta l = {.net_fingerprint = FP};
	int rc = dnn_checkpoint_load(ck, &l, td, NT, err, sizeof(err));
	TEST_CHECK(rc == 0 && l.step == 2 && memcmp(d[0], b[0], lens[0] * 4) == 0,
		   "overwrite: the new checkpoint must load: %s", err);
	dnn_ckpt_free_names(&l);

	// A save whose temporary file cannot be created (a directory is in its way: root ignores
	// permissions, so a read-only directory would not do) fails and leaves the old file intact.
	char blocker[4400];
	snprintf(blocker, sizeof(blocker), "%s.tmp.%ld", ck, (long)getpid());
	TEST_CHECK(mkdir(blocker, 0755) == 0, "mkdir %s", blocker);
	m.step = 3;
	rc = dnn_checkpoint_save(ck, &m, ta, NT, err, sizeof(err));
	printf("%-28s -> %s\n", "save blocked tmp", err);
	TEST_CHECK(rc == -1 && strstr(err, ck) == err && !strchr(err, '\n'),
		   "blocked save must fail with one line naming the file: %s", err);
	TEST_CHECK(rmdir(blocker) == 0, "rmdir %s", blocker);
	rc = dnn_checkpoint_load(ck, &l, td, NT, err, sizeof(err));
	TEST_CHECK(rc == 0 && l.step == 2 && memcmp(d[0], b[0], lens[0] * 4) == 0,
		   "after a failed save the old checkpoint must be intact: %s", err);
	dnn_ckpt_free_names(&l);

	// rename() over a directory fails: the temporary file must be removed.
	char dirpath[4300];
	path_in_tmp(dirpath, sizeof(dirpath), "a-directory");
	TEST_CHECK(mkdir(dirpath, 0755) == 0, "mkdir %s", dirpath);
	rc = dnn_checkpoint_save(dirpath, &m, ta, NT, err, sizeof(err));
	printf("%-28s -> %s\n", "save over a directory", err);
	TEST_CHECK(rc == -1 && strstr(err, dirpath) == err, "save over a directory must fail: %s", err);
	TEST_CHECK(count_tmp_files() == 0, "failed rename left a temporary file");

	// A directory that does not exist.
	char nodir[4300];
	path_in_tmp(nodir, sizeof(nodir), "no/such/dir/ck.bin");
	rc = dnn_checkpoint_save(nodir, &m, ta, NT, err, sizeof(err));
	printf("%-28s -> %s\n", "save into a missing dir", err);
	TEST_CHECK(rc == -1 && strstr(err, nodir) == err, "save into a missing dir must fail: %s", err);

	// A bare file name (no directory part) goes to the current directory.
	char cwd[4096];
	TEST_CHECK(getcwd(cwd, sizeof(cwd)) != NULL, "getcwd");
	TEST_CHECK(chdir(tmpdir) == 0, "chdir");
	rc = dnn_checkpoint_save("plain.ckpt", &m, ta, NT, err, sizeof(err));
	TEST_CHECK(rc == 0, "save with a bare name: %s", err);
	TEST_CHECK(count_tmp_files() == 0, "bare-name save left a temporary file");
	TEST_CHECK(unlink("plain.ckpt") == 0, "unlink plain.ckpt");
	TEST_CHECK(chdir(cwd) == 0, "chdir back");
	free_tensors(a);
	free_tensors(b);
	free_tensors(d);
}

static void test_rejects(const char *ck)
{
	float *s[NT];
	dnn_ckpt_tensor t[NT];
	make_tensors(t, s, 3.0f);
	dnn_ckpt_meta m = make_meta(FP);
	char err[512], bad[4300];
	TEST_CHECK(dnn_checkpoint_save(ck, &m, t, NT, err, sizeof(err)) == 0, "save: %s", err);
	size_t n = 0;
	unsigned char *good = slurp(ck, &n);
	TEST_CHECK(good && n > 100, "read back %s", ck);
	if (!good)
		return;
	path_in_tmp(bad, sizeof(bad), "bad.ckpt");

	// Truncations at every interesting length.
	const size_t cuts[] = {1, 8, 12, 16, 30, 56, 100, n / 2, n - 5, n - 4, n - 1};
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		char what[64];
		snprintf(what, sizeof(what), "truncated to %zu bytes", cuts[i]);
		spit(bad, good, cuts[i]);
		expect_reject(what, bad, t, NT, FP, NULL);
	}
	// One extra byte.
	unsigned char *big = malloc(n + 1);
	memcpy(big, good, n);
	big[n] = 0;
	spit(bad, big, n + 1);
	expect_reject("one byte appended", bad, t, NT, FP, NULL);
	free(big);

	// A flipped byte anywhere: magic, version, header length, header, payload, CRC.
	const size_t flips[] = {0, 7, 8, 12, 13, 15, 16, 30, 60, 200, n / 2, n - 5, n - 1};
	for (size_t i = 0; i < sizeof(flips) / sizeof(flips[0]); i++) {
		char what[64];
		snprintf(what, sizeof(what), "flipped byte at %zu", flips[i]);
		good[flips[i]] ^= 0x10;
		spit(bad, good, n);
		good[flips[i]] ^= 0x10;
		expect_reject(what, bad, t, NT, FP, NULL);
	}
	// Payload corruption is caught by the checksum.
	good[n - 100] ^= 1;
	spit(bad, good, n);
	good[n - 100] ^= 1;
	expect_reject("flipped payload bit", bad, t, NT, FP, "checksum mismatch");

	// Absurd header length with a valid magic and version.
	unsigned char save[4];
	memcpy(save, good + 12, 4);
	memset(good + 12, 0xff, 4);
	spit(bad, good, n);
	memcpy(good + 12, save, 4);
	expect_reject("header length 0xffffffff", bad, t, NT, FP, "header length");

	// Another net, other tensors.
	expect_reject("wrong fingerprint", ck, t, NT, FP ^ 1, "another net");
	dnn_ckpt_tensor t2[NT];
	memcpy(t2, t, sizeof(t2));
	t2[1].n = 11;
	expect_reject("wrong tensor length", ck, t2, NT, FP, "values");
	memcpy(t2, t, sizeof(t2));
	t2[3].name = "c1.weight.velocity";
	expect_reject("wrong tensor name", ck, t2, NT, FP, "c1.weight.momentum");
	memcpy(t2, t, sizeof(t2));
	t2[0].name = "c2.weight"; // same length, same size: only the name differs
	expect_reject("wrong tensor name, same len", ck, t2, NT, FP, "c1.weight");
	expect_reject("fewer tensors", ck, t, NT - 1, FP, "tensors");

	// Not checkpoints at all.
	spit(bad, "", 0);
	expect_reject("empty file", bad, t, NT, FP, "empty");
	test_rng_seed(42);
	unsigned char junk[5000];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)test_rng_int(0, 255);
	spit(bad, junk, sizeof(junk));
	expect_reject("random garbage", bad, t, NT, FP, "magic");
	memcpy(junk, good, 16); // valid prefix, garbage after
	spit(bad, junk, sizeof(junk));
	expect_reject("garbage after a valid prefix", bad, t, NT, FP, NULL);
	memcpy(junk, good, 100); // valid prefix and header start
	spit(bad, junk, sizeof(junk));
	expect_reject("garbage after header start", bad, t, NT, FP, NULL);
	expect_reject("directory", tmpdir, t, NT, FP, "directory");
	path_in_tmp(bad, sizeof(bad), "missing.ckpt");
	expect_reject("missing file", bad, t, NT, FP, "No such file");

	free(good);
	free_tensors(s);
}

/* Rewrites the CRC trailer of a file image of n bytes. */
static void fix_crc(unsigned char *b, size_t n)
{
	uLong c = crc32(0L, Z_NULL, 0);
	c = crc32(c, b, (uInt)(n - 4));
	for (int i = 0; i < 4; i++)
		b[n - 4 + (size_t)i] = (unsigned char)(c >> (8 * i));
}

/* read_info on a file expected to be rejected: one line naming the file, meta left empty. */
static void expect_info_reject(const char *what, const char *path, const char *want)
{
	dnn_ckpt_meta m;
	char err[512];
	int rc = dnn_checkpoint_read_info(path, &m, 1, err, sizeof(err));
	printf("%-28s -> %s\n", what, err);
	TEST_CHECK(rc == -1, "%s: read_info rc %d, want -1", what, rc);
	TEST_CHECK(err[0] && strstr(err, path) == err && !strchr(err, '\n'), "%s: read_info err '%s'", what, err);
	TEST_CHECK(want == NULL || strstr(err, want), "%s: read_info err lacks \"%s\"", what, want);
	TEST_CHECK(m.net_text == NULL && m.class_names == NULL, "%s: read_info left allocations", what);
}

/* Version 2 with and without the net text, version 1 (no net text: an older starpu_anp's file),
 * read_info, and a damaged net text. */
static void test_versions(const char *ck)
{
	float *s[NT], *d[NT];
	dnn_ckpt_tensor t[NT], td[NT];
	make_tensors(t, s, 2.0f);
	make_tensors(td, d, -3.0f);
	char err[512], bad[4300];
	path_in_tmp(bad, sizeof(bad), "bad2.ckpt");

	// read_info: the header alone, verified.
	dnn_ckpt_meta m = make_meta(FP), info;
	TEST_CHECK(dnn_checkpoint_save(ck, &m, t, NT, err, sizeof(err)) == 0, "save: %s", err);
	int rc = dnn_checkpoint_read_info(ck, &info, 1, err, sizeof(err));
	TEST_CHECK(rc == 0, "read_info: %s", err);
	TEST_CHECK(rc != 0 || (info.version == DNN_CKPT_VERSION && info.net_fingerprint == FP && info.step == m.step &&
			       info.nclasses == 3 && !strcmp(info.class_names[2], classes[2]) && info.net_text &&
			       !strcmp(info.net_text, net)),
		   "read_info fields");
	dnn_ckpt_free_names(&info);
	TEST_CHECK(dnn_checkpoint_read_classes(ck, &info, err, sizeof(err)) == 0 && info.net_text &&
			   !strcmp(info.net_text, net),
		   "read_classes: %s", err);
	dnn_ckpt_free_names(&info);

	size_t n = 0;
	unsigned char *good = slurp(ck, &n);
	TEST_CHECK(good != NULL, "read back");
	if (!good)
		return;
	good[n - 50] ^= 4; // payload: read_info's CRC catches it
	spit(bad, good, n);
	good[n - 50] ^= 4;
	expect_info_reject("info: payload bit", bad, "checksum mismatch");
	spit(bad, good, n - 7);
	expect_info_reject("info: truncated", bad, "truncated");
	spit(bad, good, n / 2);
	expect_info_reject("info: half", bad, NULL);
	// A NUL inside the net text, CRC fixed: the header parser refuses it.
	unsigned char *nt = memmem(good, n, "dense h", 7);
	TEST_CHECK(nt != NULL, "net text in the file");
	if (nt) {
		nt[3] = 0;
		fix_crc(good, n);
		spit(bad, good, n);
		expect_reject("NUL in the net text", bad, t, NT, FP, "NUL");
		expect_info_reject("info: NUL in the net text", bad, "NUL");
		nt[3] = 's';
		fix_crc(good, n);
	}
	// An absurd net-text length (CRC fixed).
	size_t lo = (size_t)(nt ? nt - good : 0);
	unsigned char *len_at = NULL;
	for (size_t o = 16; nt && o + 4 <= lo; o++) { // the u32 right before the text
		uint32_t v = (uint32_t)good[o] | (uint32_t)good[o + 1] << 8 | (uint32_t)good[o + 2] << 16 |
			     (uint32_t)good[o + 3] << 24;
		if (v == strlen(net) && !memcmp(good + o + 4, "# net", 5))
			len_at = good + o;
	}
	TEST_CHECK(len_at != NULL, "net text length field");
	if (len_at) {
		unsigned char keep[4];
		memcpy(keep, len_at, 4);
		memset(len_at, 0xff, 4);
		fix_crc(good, n);
		spit(bad, good, n);
		expect_reject("net text length 0xffffffff", bad, t, NT, FP, "net text");
		expect_info_reject("info: net text length", bad, "net text");
		memcpy(len_at, keep, 4);
		fix_crc(good, n);
	}
	free(good);

	// No net text: the current version with an empty section.
	m.net_text = NULL;
	TEST_CHECK(dnn_checkpoint_save(ck, &m, t, NT, err, sizeof(err)) == 0, "save without net: %s", err);
	dnn_ckpt_meta l = {.net_fingerprint = FP};
	TEST_CHECK(dnn_checkpoint_load(ck, &l, td, NT, err, sizeof(err)) == 0 && l.version == DNN_CKPT_VERSION &&
			   l.net_text == NULL,
		   "load without net: %s", err);
	dnn_ckpt_free_names(&l);

	// Version 2 (an earlier build's file: the same layout): loads, with its net text.
	m.version = 2;
	m.net_text = net;
	TEST_CHECK(dnn_checkpoint_save(ck, &m, t, NT, err, sizeof(err)) == 0, "save version 2: %s", err);
	l = (dnn_ckpt_meta){.net_fingerprint = FP};
	rc = dnn_checkpoint_load(ck, &l, td, NT, err, sizeof(err));
	TEST_CHECK(rc == 0 && l.version == 2 && l.net_text && !strcmp(l.net_text, net), "load version 2: %s", err);
	dnn_ckpt_free_names(&l);

	// Version 1: written as an older build did; loads, with no net text; refuses a net text.
	m.version = 1;
	m.net_text = net;
	TEST_CHECK(dnn_checkpoint_save(ck, &m, t, NT, err, sizeof(err)) == -1 && strstr(err, "version-1"),
		   "version 1 with a net text: '%s'", err);
	m.net_text = NULL;
	TEST_CHECK(dnn_checkpoint_save(ck, &m, t, NT, err, sizeof(err)) == 0, "save version 1: %s", err);
	unsigned char *v1 = slurp(ck, &n);
	TEST_CHECK(v1 && v1[8] == 1 && v1[9] == 0, "version-1 file's version field");
	free(v1);
	l = (dnn_ckpt_meta){.net_fingerprint = FP};
	rc = dnn_checkpoint_load(ck, &l, td, NT, err, sizeof(err));
	TEST_CHECK(rc == 0 && l.version == 1 && l.net_text == NULL && l.nclasses == 3, "load version 1: %s", err);
	for (int i = 0; i < NT && rc == 0; i++)
		TEST_CHECK(memcmp(s[i], d[i], lens[i] * sizeof(float)) == 0, "v1 tensor %s differs", names[i]);
	dnn_ckpt_free_names(&l);
	rc = dnn_checkpoint_read_info(ck, &info, 1, err, sizeof(err));
	TEST_CHECK(rc == 0 && info.version == 1 && info.net_text == NULL && info.nclasses == 3, "read_info v1: %s", err);
	dnn_ckpt_free_names(&info);
	m.version = DNN_CKPT_VERSION + 1;
	TEST_CHECK(dnn_checkpoint_save(ck, &m, t, NT, err, sizeof(err)) == -1 && strstr(err, "version 4"),
		   "version 4 save: '%s'", err);
	free_tensors(s);
	free_tensors(d);
}

/* dnn_ckpt_check_net against a checkpoint of net A written as version 3 (net text, the canonical
 * text's fingerprint), 2 (net text, the structure hash) and 1 (the structure hash alone): A is
 * accepted; B (dropout p=0.9 for 0.25) and C (batch norm's eps) are refused (2) naming the node and
 * the key, by versions 2 and 3; a version-1 file, which records no float key, refuses a
 * structural change (conv's out) by its hash. */
static const char net_a[] = "input x 1 8 8\nconv c1 x out=2 k=3\nbatchnorm b1 c1\nrelu r1 b1\n"
			    "dropout d1 r1 p=0.25\ndense o d1 out=3\nsoftmax_xent loss o\n";

static void parse_variant(dnn_graph *g, const char *from, const char *to)
{
	char text[sizeof(net_a) + 64], err[512];
	const char *at = strstr(net_a, from);
	snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - net_a), net_a, to, at + strlen(from));
	TEST_CHECK(dnn_graph_parse(g, text, "variant.net", err, sizeof(err)) == 0, "%s: %s", to, err);
}

/* 0 or the status of dnn_ckpt_check_net(g) against the checkpoint at ck; its message in err. */
static int check_against(const char *ck, const dnn_graph *g, char *err, size_t errlen)
{
	dnn_ckpt_meta info;
	if (dnn_checkpoint_read_info(ck, &info, 1, err, errlen) != 0)
		return -1;
	int rc = dnn_ckpt_check_net(g, g->source, ck, &info, NULL, err, errlen);
	dnn_ckpt_free_names(&info);
	return rc;
}

static void test_same_net(const char *ck)
{
	dnn_graph a, b, c, d;
	char err[4096];
	TEST_CHECK(dnn_graph_parse(&a, net_a, "a.net", err, sizeof(err)) == 0, "%s", err);
	parse_variant(&b, "p=0.25", "p=0.9");
	parse_variant(&c, "batchnorm b1 c1", "batchnorm b1 c1 eps=2e-5");
	parse_variant(&d, "out=2", "out=3");
	if (!a.nodes || !b.nodes || !c.nodes || !d.nodes)
		return;
	TEST_CHECK(dnn_graph_fingerprint(&a) != dnn_graph_fingerprint(&b) &&
			   dnn_graph_fingerprint(&a) != dnn_graph_fingerprint(&c),
		   "the fingerprint misses a float key");
	TEST_CHECK(dnn_graph_structure_hash(&a) == dnn_graph_structure_hash(&b), "the structure hash changed");
	float v[4] = {1, 2, 3, 4};
	dnn_ckpt_tensor t = {"w", v, 4};
	char *text = dnn_graph_to_text(&a, "net a.net, as trained");
	for (uint32_t version = DNN_CKPT_VERSION; version >= 1; version--) {
		dnn_ckpt_meta m = {.net_fingerprint = version >= 3 ? dnn_graph_fingerprint(&a) : dnn_graph_structure_hash(&a),
				   .version = version, .net_text = version >= 2 ? text : NULL};
		TEST_CHECK(dnn_checkpoint_save(ck, &m, &t, 1, err, sizeof(err)) == 0, "v%u save: %s", version, err);
		TEST_CHECK(check_against(ck, &a, err, sizeof(err)) == 0, "v%u: the same net refused: %s", version, err);
		int rc = check_against(ck, &d, err, sizeof(err));
		printf("v%u, conv's out  -> %s\n", version, err);
		TEST_CHECK(rc == 2 && strstr(err, "is not the net of") && !strchr(err, '\n'), "v%u: out=3: %d %s", version,
			   rc, err);
		TEST_CHECK(version == 1 || strstr(err, "node 2 (c1): out=3 in --net, out=2 in the checkpoint"),
			   "v%u: out=3: %s", version, err);
		rc = check_against(ck, &b, err, sizeof(err));
		printf("v%u, dropout's p -> %s\n", version, rc ? err : "accepted");
		if (version == 1) { /* no float key recorded: documented (checkpoint.h) */
			TEST_CHECK(rc == 0, "v1: p: %s", err);
			continue;
		}
		TEST_CHECK(rc == 2 && strstr(err, "variant.net is not the net of") &&
				   strstr(err, "node 5 (d1): p=0.899999976 in --net, p=0.25 in the checkpoint"),
			   "v%u: p: %d %s", version, rc, err);
		rc = check_against(ck, &c, err, sizeof(err));
		TEST_CHECK(rc == 2 && strstr(err, "node 3 (b1): eps=1.99999995e-05 in --net, eps=9.99999975e-06 in the "
						 "checkpoint"),
			   "v%u: eps: %d %s", version, rc, err);
	}
	/* The current version without its net text: the fingerprint alone still tells. */
	dnn_ckpt_meta m = {.net_fingerprint = dnn_graph_fingerprint(&a)};
	TEST_CHECK(dnn_checkpoint_save(ck, &m, &t, 1, err, sizeof(err)) == 0, "save: %s", err);
	TEST_CHECK(check_against(ck, &a, err, sizeof(err)) == 0, "no text: the same net refused: %s", err);
	TEST_CHECK(check_against(ck, &b, err, sizeof(err)) == 2 && strstr(err, "fingerprint"), "no text: p: %s", err);
	free(text);
	dnn_graph_free(&a), dnn_graph_free(&b), dnn_graph_free(&c), dnn_graph_free(&d);
}

int main(void)
{
	const char *b = getenv("DNN_BUILD_DIR");
	snprintf(tmpdir, sizeof(tmpdir), "%s/unit_checkpoint.XXXXXX", b && *b ? b : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror(tmpdir);
		return 1;
	}
	char ck[4300];
	path_in_tmp(ck, sizeof(ck), "ck.bin");
	test_round_trip(ck);
	test_atomic_overwrite(ck);
	test_rejects(ck);
	test_versions(ck);
	test_same_net(ck);
	TEST_CHECK(count_tmp_files() == 0, "temporary files remain");
	test_rmtree(tmpdir);
	return test_report("unit_checkpoint");
}
