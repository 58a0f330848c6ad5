/* unit_tokens — a language model's data (runtime/tokens.c, codelets/load_tokens.c):
 *  - readers on good files: UTF-8 text (byte tokens), llm.c .bin (header + uint16), a nanoGPT
 *    directory (train.bin, val.bin; one of them in llm.c's format), an llm.c pair;
 *  - readers on bad ones, each one line naming the file: empty, truncated llm.c header and body,
 *    trailing bytes, bad magic, llm.c version 2 and Llama-3 magic, odd-sized raw files, a token
 *    >= the vocabulary (its position), invalid UTF-8 (its offset), too few tokens for a window,
 *    a missing file, a directory without val.bin;
 *  - the split (the last round(n/10) tokens validate) and the windows: training stride 1,
 *    validation stride T, their counts, and what the load kernel writes for them (ids and next
 *    tokens, checked against the stream directly);
 *  - 300 random mutations (cuts, overwritten bytes, absurd header counts): a clean load or one
 *    line naming the file, never a crash;
 *  - the window order: the seeded per-epoch permutation is a function of (seed, epoch) alone, so
 *    a resumed run (and every rank) sees the same windows at the same step.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset.h"
#include "load_tokens.h"
#include "schedule.h"
#include "test_util.h"

static char tmpdir[4096];

static const char *path_of(const char *name)
{
	static char p[8][4200];
	static int k;
	k = (k + 1) % 8;
	snprintf(p[k], sizeof(p[k]), "%s/%s", tmpdir, name);
	return p[k];
}

static void write_bytes(const char *name, const void *b, size_t n)
{
	FILE *f = fopen(path_of(name), "wb");
	if (!f || (n && fwrite(b, 1, n, f) != n) || fclose(f) != 0) {
		fprintf(stderr, "cannot write %s\n", path_of(name));
		exit(1);
	}
}

static void put_le32(uint8_t *p, int32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)((uint32_t)v >> (8 * i));
}

/* An llm.c token file: header (magic, version, count = promised), then n tokens. */
static void write_llmc(const char *name, int32_t magic, int32_t version, int32_t promised, const uint16_t *tok, size_t n)
{
	size_t bytes = 1024 + 2 * n;
	uint8_t *b = calloc(bytes, 1);
	put_le32(b, magic), put_le32(b + 4, version), put_le32(b + 8, promised);
	for (size_t i = 0; i < n; i++)
		b[1024 + 2 * i] = (uint8_t)tok[i], b[1024 + 2 * i + 1] = (uint8_t)(tok[i] >> 8);
	write_bytes(name, b, bytes);
	free(b);
}

static void write_raw(const char *name, const uint16_t *tok, size_t n)
{
	uint8_t *b = malloc(2 * n + 1);
	for (size_t i = 0; i < n; i++)
		b[2 * i] = (uint8_t)tok[i], b[2 * i + 1] = (uint8_t)(tok[i] >> 8);
	write_bytes(name, b, 2 * n);
	free(b);
}

/* Loading must fail with one line holding each of the fragments. */
static void expect_fail(const char *what, const dnn_token_files *f, int train, int T, int vocab, const char *frag1,
			const char *frag2)
{
	dnn_dataset ds;
	char err[1024] = "";
	int rc = dnn_dataset_load_tokens(&ds, f, train, T, vocab, err, sizeof(err));
	TEST_CHECK(rc == -1, "%s: loaded (rc %d)", what, rc);
	TEST_CHECK(strchr(err, '\n') == NULL && err[0], "%s: not one line: '%s'", what, err);
	TEST_CHECK(strstr(err, frag1) != NULL, "%s: '%s' lacks '%s'", what, err, frag1);
	TEST_CHECK(!frag2 || strstr(err, frag2) != NULL, "%s: '%s' lacks '%s'", what, err, frag2);
	TEST_CHECK(ds.tokens == NULL && ds.n == 0, "%s: the set is not left empty", what);
	printf("ok %s: %s\n", what, err);
}

static dnn_dataset expect_load(const char *what, const dnn_token_files *f, int train, int T, int vocab)
{
	dnn_dataset ds;
	char err[1024] = "";
	int rc = dnn_dataset_load_tokens(&ds, f, train, T, vocab, err, sizeof(err));
	TEST_CHECK(rc == 0, "%s: %s", what, err);
	return ds;
}

/* The set's windows as the load kernel writes them, against the stream itself: window i starts
 * at token first + i*stride of `stream`. */
static void check_windows(const char *what, const dnn_dataset *ds, const uint16_t *stream, long first, int stride)
{
	const int T = ds->T;
	TEST_CHECK(ds->stride == stride, "%s: stride %d, want %d", what, ds->stride, stride);
	const int n = ds->n < 50 ? ds->n : 50;
	dnn_load_tokens_args *a = malloc(sizeof(*a) + sizeof(int) * (size_t)n);
	a->tokens = ds->tokens, a->T = T, a->stride = ds->stride, a->n = n;
	for (int i = 0; i < n; i++) /* the last window among them */
		a->idx[i] = i == n - 1 ? ds->n - 1 : (i * 7919) % ds->n;
	float *x = alloc_f((size_t)n * T);
	int32_t *y = malloc(sizeof(int32_t) * (size_t)n * T);
	dnn_load_tokens_cpu(x, y, a);
	int bad = 0;
	for (int i = 0; i < n; i++)
		for (int t = 0; t < T; t++) {
			const long s = first + (long)a->idx[i] * stride + t;
			bad += x[i * T + t] != (float)stream[s] || y[i * T + t] != stream[s + 1];
		}
	TEST_CHECK(bad == 0, "%s: %d window values differ from the stream", what, bad);
	free(a), free(x), free(y);
}

static void test_text(void)
{
	/* 1000 bytes of UTF-8 with multi-byte characters: tokens are bytes */
	char text[1001];
	for (int i = 0; i < 1000; i++)
		text[i] = (char)('a' + i % 26);
	memcpy(text + 100, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9); /* é € 😀 */
	write_bytes("t.txt", text, 1000);
	uint16_t stream[1000];
	for (int i = 0; i < 1000; i++)
		stream[i] = (unsigned char)text[i];
	const dnn_token_files f = {.text = path_of("t.txt")};
	const int T = 16;
	dnn_dataset tr = expect_load("text train", &f, 1, T, 256), va = expect_load("text val", &f, 0, T, 256);
	TEST_CHECK(dnn_tokens_val_count(1000) == 100 && dnn_tokens_val_count(15) == 2 && dnn_tokens_val_count(14) == 1,
		   "val count: %ld %ld %ld", dnn_tokens_val_count(1000), dnn_tokens_val_count(15), dnn_tokens_val_count(14));
	TEST_CHECK(tr.ntokens == 900 && va.ntokens == 100, "split %ld + %ld of 1000", tr.ntokens, va.ntokens);
	TEST_CHECK(tr.n == 900 - T && va.n == (100 - T - 1) / T + 1, "windows %d (want %d), %d (want %d)", tr.n, 900 - T,
		   va.n, (100 - T - 1) / T + 1);
	TEST_CHECK(tr.bytes == 1 && tr.vocab == 256 && tr.C == 1 && tr.H == T && tr.W == 1 && tr.classes == 256,
		   "text set shape/vocab");
	TEST_CHECK(tr.images == NULL && tr.labels == NULL, "a token set holds no images");
	check_windows("text train", &tr, stream, 0, 1);
	check_windows("text val", &va, stream, 900, T);
	float mean = -1, sd = -1;
	dnn_dataset_channel_stats(&tr, &mean, &sd);
	TEST_CHECK(mean == 0 && sd == 1, "token channel stats %g %g (want 0, 1)", (double)mean, (double)sd);
	dnn_dataset_free(&tr), dnn_dataset_free(&va);
	/* a smaller vocabulary than the text's bytes: the byte and its position */
	expect_fail("text byte >= vocab", &f, 1, T, 128, "byte at position 100 is 195", "vocabulary of 128");
	/* bad UTF-8 and NUL */
	memcpy(text + 500, "\xc3\x28", 2);
	write_bytes("bad.txt", text, 1000);
	const dnn_token_files fb = {.text = path_of("bad.txt")};
	expect_fail("invalid UTF-8", &fb, 1, T, 256, "bad.txt", "offset 500");
	text[500] = 0;
	write_bytes("nul.txt", text, 1000);
	const dnn_token_files fn = {.text = path_of("nul.txt")};
	expect_fail("NUL byte", &fn, 1, T, 256, "nul.txt", "NUL");
	write_bytes("empty.txt", "", 0);
	const dnn_token_files fe = {.text = path_of("empty.txt")};
	expect_fail("empty text", &fe, 1, T, 256, "empty.txt", "empty file");
	/* 100 bytes: the validation tenth (10) is shorter than one window of 17 */
	write_bytes("short.txt", text, 100);
	const dnn_token_files fs = {.text = path_of("short.txt")};
	expect_fail("too short", &fs, 0, T, 256, "short.txt (validation part", "fewer than one window");
	const dnn_token_files fm = {.text = path_of("missing.txt")};
	expect_fail("missing", &fm, 1, T, 256, "missing.txt", "No such file");
}

static void test_llmc(void)
{
	enum { N = 3000, T = 32, V = 50257 };
	uint16_t *tok = malloc(sizeof(uint16_t) * N);
	for (int i = 0; i < N; i++)
		tok[i] = (uint16_t)test_rng_int(0, V - 1);
	write_llmc("a.bin", 20240520, 1, N, tok, N);
	const dnn_token_files f = {.tokens = path_of("a.bin")};
	dnn_dataset tr = expect_load("llm.c train", &f, 1, T, V), va = expect_load("llm.c val", &f, 0, T, V);
	TEST_CHECK(tr.ntokens == 2700 && va.ntokens == 300 && tr.bytes == 0, "llm.c split %ld + %ld", tr.ntokens,
		   va.ntokens);
	check_windows("llm.c train", &tr, tok, 0, 1);
	check_windows("llm.c val", &va, tok, 2700, T);
	dnn_dataset_free(&tr), dnn_dataset_free(&va);
	/* a pair: --tokens a.bin --val-tokens b.bin, no split */
	write_llmc("b.bin", 20240520, 1, 500, tok + 100, 500);
	const dnn_token_files fp = {.tokens = path_of("a.bin"), .val_tokens = path_of("b.bin")};
	tr = expect_load("llm.c pair train", &fp, 1, T, V), va = expect_load("llm.c pair val", &fp, 0, T, V);
	TEST_CHECK(tr.ntokens == N && va.ntokens == 500, "pair %ld + %ld", tr.ntokens, va.ntokens);
	check_windows("llm.c pair val", &va, tok + 100, 0, T);
	dnn_dataset_free(&tr), dnn_dataset_free(&va);
	/* bad ones */
	write_llmc("trunc.bin", 20240520, 1, N + 1, tok, N);
	const dnn_token_files f1 = {.tokens = path_of("trunc.bin")};
	expect_fail("llm.c truncated", &f1, 1, T, V, "trunc.bin", "truncated");
	write_llmc("trail.bin", 20240520, 1, N - 1, tok, N);
	const dnn_token_files f2 = {.tokens = path_of("trail.bin")};
	expect_fail("llm.c trailing", &f2, 1, T, V, "trail.bin", "2 bytes after");
	uint8_t hdr[600] = {0};
	put_le32(hdr, 20240520);
	write_bytes("hdr.bin", hdr, sizeof(hdr));
	const dnn_token_files f3 = {.tokens = path_of("hdr.bin")};
	expect_fail("llm.c short header", &f3, 1, T, V, "hdr.bin", "truncated llm.c header");
	write_llmc("magic.bin", 20240521, 1, N, tok, N);
	const dnn_token_files f4 = {.tokens = path_of("magic.bin")};
	expect_fail("bad magic", &f4, 1, T, V, "magic.bin", "bad magic 20240521");
	write_llmc("v2.bin", 20240520, 2, N, tok, N);
	const dnn_token_files f5 = {.tokens = path_of("v2.bin")};
	expect_fail("llm.c version 2", &f5, 1, T, V, "v2.bin", "version 2");
	write_llmc("llama.bin", 20240801, 7, N, tok, N);
	const dnn_token_files f6 = {.tokens = path_of("llama.bin")};
	expect_fail("llama-3 magic", &f6, 1, T, V, "llama.bin", "magic 20240801");
	write_llmc("zero.bin", 20240520, 1, 0, tok, 0);
	const dnn_token_files f7 = {.tokens = path_of("zero.bin")};
	expect_fail("llm.c no tokens", &f7, 1, T, V, "zero.bin", "promises 0 tokens");
	tok[1234] = 60000;
	write_llmc("big.bin", 20240520, 1, N, tok, N);
	const dnn_token_files f8 = {.tokens = path_of("big.bin")};
	expect_fail("token >= vocab", &f8, 1, T, V, "big.bin", "position 1234 is 60000");
	/* the validation file of a pair is checked as well */
	const dnn_token_files f9 = {.tokens = path_of("a.bin"), .val_tokens = path_of("big.bin")};
	expect_fail("pair: bad val", &f9, 0, T, V, "big.bin", "position 1234");
	write_bytes("empty.bin", "", 0);
	const dnn_token_files f10 = {.tokens = path_of("empty.bin")};
	expect_fail("empty .bin", &f10, 1, T, V, "empty.bin", "empty file");
	free(tok);
}

static void test_nanogpt(void)
{
	enum { NT = 2000, NV = 300, T = 20, V = 1000 };
	uint16_t tr_tok[NT], va_tok[NV];
	for (int i = 0; i < NT; i++)
		tr_tok[i] = (uint16_t)test_rng_int(0, V - 1);
	for (int i = 0; i < NV; i++)
		va_tok[i] = (uint16_t)test_rng_int(0, V - 1);
	mkdir(path_of("ng"), 0755);
	write_raw("ng/train.bin", tr_tok, NT);
	write_llmc("ng/val.bin", 20240520, 1, NV, va_tok, NV); /* detected by its magic inside a directory too */
	const dnn_token_files f = {.tokens = path_of("ng")};
	dnn_dataset tr = expect_load("nanoGPT train", &f, 1, T, V), va = expect_load("nanoGPT val", &f, 0, T, V);
	TEST_CHECK(tr.ntokens == NT && va.ntokens == NV && tr.n == NT - T && va.n == (NV - T - 1) / T + 1,
		   "nanoGPT sets %ld/%d, %ld/%d", tr.ntokens, tr.n, va.ntokens, va.n);
	check_windows("nanoGPT train", &tr, tr_tok, 0, 1);
	check_windows("nanoGPT val", &va, va_tok, 0, T);
	dnn_dataset_free(&tr), dnn_dataset_free(&va);
	/* an odd-sized raw file; a directory without val.bin */
	mkdir(path_of("odd"), 0755);
	write_bytes("odd/train.bin", tr_tok, 2 * NT - 1);
	const dnn_token_files fo = {.tokens = path_of("odd")};
	expect_fail("nanoGPT odd size", &fo, 1, T, V, "odd/train.bin", "odd size");
	expect_fail("nanoGPT no val.bin", &fo, 0, T, V, "odd/val.bin", "No such file");
	/* a raw file given alone (not in its directory) must be llm.c's */
	const dnn_token_files fr = {.tokens = path_of("ng/train.bin")};
	expect_fail("raw file alone", &fr, 1, T, V, "train.bin", "bad magic");
	/* a token of the training file >= the vocabulary */
	tr_tok[77] = V;
	write_raw("ng/train.bin", tr_tok, NT);
	expect_fail("nanoGPT token >= vocab", &f, 1, T, V, "ng/train.bin", "position 77 is 1000");
}

/* Absurd input: 300 mutations of an llm.c file and of a text (cut at a random length, random
 * bytes overwritten, the header's count set to random values) must each load or fail with one
 * line, never crash; a loaded set's every window lies inside its stream. */
static void test_mutations(void)
{
	enum { N = 400, T = 8 };
	uint16_t tok[N];
	for (int i = 0; i < N; i++)
		tok[i] = (uint16_t)test_rng_int(0, 499);
	int loaded = 0, failed = 0, bad = 0;
	for (int k = 0; k < 300; k++) {
		const int text = k % 3 == 2;
		size_t n = text ? 2000 : 1024 + 2 * N;
		uint8_t *b = malloc(n);
		if (text) {
			for (size_t i = 0; i < n; i++)
				b[i] = (uint8_t)test_rng_int(32, 126);
		} else {
			memset(b, 0, 1024);
			put_le32(b, 20240520), put_le32(b + 4, 1), put_le32(b + 8, N);
			for (int i = 0; i < N; i++)
				b[1024 + 2 * i] = (uint8_t)tok[i], b[1024 + 2 * i + 1] = (uint8_t)(tok[i] >> 8);
		}
		const int what = test_rng_int(0, 2);
		if (what == 0)
			n = (size_t)test_rng_int(0, (int)n);
		for (int m = what == 1 ? test_rng_int(1, 4) : 0; m > 0; m--)
			b[test_rng_int(0, (int)n - 1)] = (uint8_t)test_rng_int(0, 255);
		if (what == 2 && !text)
			put_le32(b + (k % 2 ? 4 : 8), (int32_t)(test_rng_int(0, 1 << 30) - (1 << 29))); /* version or count */
		write_bytes("mut.bin", b, n);
		const dnn_token_files f = {.text = text ? path_of("mut.bin") : NULL, .tokens = text ? NULL : path_of("mut.bin")};
		for (int train = 0; train <= 1; train++) {
			dnn_dataset ds;
			char err[1024] = "";
			if (dnn_dataset_load_tokens(&ds, &f, train, T, 500, err, sizeof(err)) == 0) {
				loaded++;
				bad += ds.n <= 0 || (long)(ds.n - 1) * ds.stride + T + 1 > ds.ntokens;
				for (long i = 0; i < ds.ntokens; i++)
					bad += ds.tokens[i] >= 500;
				dnn_dataset_free(&ds);
			} else {
				failed++;
				bad += !err[0] || strchr(err, '\n') != NULL || !strstr(err, "mut.bin");
			}
		}
		free(b);
	}
	TEST_CHECK(bad == 0, "%d mutated files gave a bad set or a bad error line", bad);
	TEST_CHECK(loaded > 0 && failed > 0, "mutations: %d loaded, %d failed (want both)", loaded, failed);
	printf("mutations: %d loads, %d clean failures\n", loaded, failed);
}

/* The window order: the permutation of epoch e is a function of (seed, e) only. */
static void test_order(void)
{
	enum { N = 5000 };
	int *a = malloc(sizeof(int) * N), *b = malloc(sizeof(int) * N), *c = malloc(sizeof(int) * N);
	dnn_epoch_permutation(a, N, 42, 0);
	dnn_epoch_permutation(b, N, 42, 0); /* a resumed run, another rank */
	dnn_epoch_permutation(c, N, 42, 1);
	TEST_CHECK(!memcmp(a, b, sizeof(int) * N), "the same (seed, epoch) gives another window order");
	TEST_CHECK(memcmp(a, c, sizeof(int) * N) != 0, "epochs 0 and 1 have the same window order");
	long sum = 0;
	for (int i = 0; i < N; i++)
		sum += a[i];
	TEST_CHECK(sum == (long)N * (N - 1) / 2, "not a permutation");
	free(a), free(b), free(c);
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/unit_tokens.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_rng_seed(7);
	test_text();
	test_llmc();
	test_nanogpt();
	test_mutations();
	test_order();
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "note: could not remove %s\n", tmpdir);
	return test_report("unit_tokens");
}
