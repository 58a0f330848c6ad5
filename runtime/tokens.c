/* tokens.c — token streams for language models (dataset.h "token streams"): UTF-8 text through
 * the byte-level tokenizer, nanoGPT's raw uint16 files, llm.c's .bin files; the split and the
 * windows. Every file is validated before use: size, header, token range; errors are one line
 * naming the file, and nothing is allocated on the word of a header alone (the file's size on
 * disk must agree with it first).
 */
#include "dataset.h"
#include "errline.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LLMC_MAGIC 20240520     /* llm.c's GPT-2 token files (dev/data/data_common.py) */
#define LLMC_MAGIC_LLAMA3 20240801 /* its Llama-3 ones: uint32 tokens, not read here */
#define LLMC_HEADER_BYTES (256 * 4)
#define MAX_TOKENS ((long)INT_MAX) /* a window index is an int (dnn_dataset.n) */

/* The whole of a regular file, at most max bytes (more: an error). Returns the malloc'd bytes
 * (*len of them), or NULL with err set. An empty file is an error. */
static uint8_t *read_file(const char *path, long long max, size_t *len, char *err, size_t errlen)
{
	if (!path || !*path) {
		dnn_set_err(err, errlen, path, "empty path");
		return NULL;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		dnn_set_err(err, errlen, path, "%s", strerror(errno));
		return NULL;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		dnn_set_err(err, errlen, path, "%s", strerror(errno));
		close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		dnn_set_err(err, errlen, path, "%s", S_ISDIR(st.st_mode) ? "is a directory, not a token or text file"
									  : "not a regular file");
		close(fd);
		return NULL;
	}
	if (st.st_size == 0 || st.st_size > max) {
		if (st.st_size == 0)
			dnn_set_err(err, errlen, path, "empty file");
		else
			dnn_set_err(err, errlen, path, "%lld bytes: more than the %lld this reader takes", (long long)st.st_size,
				    max);
		close(fd);
		return NULL;
	}
	size_t n = (size_t)st.st_size, got = 0;
	uint8_t *buf = malloc(n);
	if (!buf) {
		dnn_set_err(err, errlen, path, "out of memory (%zu bytes)", n);
		close(fd);
		return NULL;
	}
	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			dnn_set_err(err, errlen, path, r < 0 ? "read error: %s" : "file shrank while being read%s",
				    r < 0 ? strerror(errno) : "");
			free(buf);
			close(fd);
			return NULL;
		}
		got += (size_t)r;
	}
	close(fd);
	*len = n;
	return buf;
}

/* The offset of the first byte that is not part of valid UTF-8 (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF) or is NUL (a binary file), or -1 when all of b is text. */
static long long utf8_bad(const uint8_t *b, size_t n)
{
	size_t i = 0;
	while (i < n) {
		const uint8_t c = b[i];
		int len;
		uint32_t cp, min;
		if (c == 0)
			return (long long)i;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			len = 2, cp = c & 0x1f, min = 0x80;
		else if (c >= 0xe0 && c <= 0xef)
			len = 3, cp = c & 0x0f, min = 0x800;
		else if (c >= 0xf0 && c <= 0xf4)
			len = 4, cp = c & 0x07, min = 0x10000;
		else
			return (long long)i;
		if (i + (size_t)len > n)
			return (long long)i;
		for (int k = 1; k < len; k++) {
			if ((b[i + k] & 0xc0) != 0x80)
				return (long long)i;
			cp = cp << 6 | (b[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return (long long)i;
		i += (size_t)len;
	}
	return -1;
}

/* A stream read whole: n tokens. */
typedef struct {
	uint16_t *tok;
	long n;
	int bytes; /* the byte-level tokenizer's */
} stream;

/* --text: UTF-8 text, one token per byte (vocabulary 256). */
static int read_text(stream *s, const char *path, char *err, size_t errlen)
{
	size_t n;
	uint8_t *b = read_file(path, MAX_TOKENS, &n, err, errlen);
	if (!b)
		return -1;
	long long bad = utf8_bad(b, n);
	if (bad >= 0) {
		dnn_set_err(err, errlen, path, "not UTF-8 text: byte 0x%02x at offset %lld%s (--text reads text; "
			    "token files go to --tokens)", b[bad], bad, b[bad] == 0 ? " (NUL: a binary file?)" : "");
		free(b);
		return -1;
	}
	s->tok = malloc(sizeof(uint16_t) * n);
	if (!s->tok) {
		dnn_set_err(err, errlen, path, "out of memory (%zu tokens)", n);
		free(b);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		s->tok[i] = b[i];
	s->n = (long)n, s->bytes = 1;
	free(b);
	return 0;
}

static int32_t le32(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* A token file: llm.c's (by its magic), else, when raw_ok (a nanoGPT directory), headerless
 * little-endian uint16. */
static int read_bin(stream *s, const char *path, int raw_ok, char *err, size_t errlen)
{
	size_t n;
	uint8_t *b = read_file(path, LLMC_HEADER_BYTES + 2 * MAX_TOKENS, &n, err, errlen);
	if (!b)
		return -1;
	const int32_t magic = n >= 4 ? le32(b) : 0;
	size_t off = 0, ntok;
	if (magic == LLMC_MAGIC || magic == LLMC_MAGIC_LLAMA3) {
		if (n < LLMC_HEADER_BYTES) {
			dnn_set_err(err, errlen, path, "truncated llm.c header: %zu of its %d bytes", n, LLMC_HEADER_BYTES);
			goto fail;
		}
		const int32_t version = le32(b + 4), count = le32(b + 8);
		if (magic != LLMC_MAGIC || version != 1) {
			dnn_set_err(err, errlen, path, "llm.c token file of magic %d version %d: only magic %d version 1 "
				    "(uint16 GPT-2 tokens) is read", magic, version, LLMC_MAGIC);
			goto fail;
		}
		if (count <= 0) {
			dnn_set_err(err, errlen, path, "the llm.c header promises %d tokens", count);
			goto fail;
		}
		const size_t want = LLMC_HEADER_BYTES + 2 * (size_t)count;
		if (n != want) {
			if (n < want)
				dnn_set_err(err, errlen, path, "truncated: the header promises %d tokens (%zu bytes), the file "
					    "has %zu bytes", count, want, n);
			else
				dnn_set_err(err, errlen, path, "%zu bytes after the %d tokens the header promises", n - want,
					    count);
			goto fail;
		}
		off = LLMC_HEADER_BYTES, ntok = (size_t)count;
	} else if (raw_ok) {
		if (n % 2) {
			dnn_set_err(err, errlen, path, "odd size (%zu bytes): not little-endian uint16 tokens", n);
			goto fail;
		}
		ntok = n / 2;
	} else {
		dnn_set_err(err, errlen, path, "bad magic %d (want %d: an llm.c token file; nanoGPT's headerless "
			    "train.bin/val.bin are read from their directory: --tokens DIR)", magic, LLMC_MAGIC);
		goto fail;
	}
	s->tok = malloc(sizeof(uint16_t) * ntok);
	if (!s->tok) {
		dnn_set_err(err, errlen, path, "out of memory (%zu tokens)", ntok);
		goto fail;
	}
	for (size_t i = 0; i < ntok; i++)
		s->tok[i] = (uint16_t)(b[off + 2 * i] | b[off + 2 * i + 1] << 8);
	s->n = (long)ntok, s->bytes = 0;
	free(b);
	return 0;
fail:
	free(b);
	return -1;
}

long dnn_tokens_val_count(long n)
{
	return (n + 5) / 10; /* round(n / 10), halves up */
}

int dnn_dataset_from_tokens(dnn_dataset *ds, const uint16_t *tok, long n, int T, int stride, int vocab, int bytes,
			    const char *what, char *err, size_t errlen)
{
	memset(ds, 0, sizeof(*ds));
	if (T <= 0 || stride <= 0 || vocab <= 0 || n < 0) {
		dnn_set_err(err, errlen, what, "bad window shape (T %d, stride %d, vocabulary %d)", T, stride, vocab);
		return -1;
	}
	if (n < (long)T + 1) {
		dnn_set_err(err, errlen, what, "%ld tokens: fewer than one window of the net's context %d plus the "
			    "next token (%d)", n, T, T + 1);
		return -1;
	}
	for (long i = 0; i < n; i++)
		if (tok[i] >= vocab) {
			dnn_set_err(err, errlen, what, "token at position %ld is %u, not below the net's vocabulary of %d",
				    i, tok[i], vocab);
			return -1;
		}
	const long windows = (n - T - 1) / stride + 1;
	if (windows > INT_MAX) {
		dnn_set_err(err, errlen, what, "%ld windows: more than %d", windows, INT_MAX);
		return -1;
	}
	ds->tokens = malloc(sizeof(uint16_t) * (size_t)n);
	if (!ds->tokens) {
		dnn_set_err(err, errlen, what, "out of memory (%ld tokens)", n);
		return -1;
	}
	memcpy(ds->tokens, tok, sizeof(uint16_t) * (size_t)n);
	ds->ntokens = n, ds->T = T, ds->stride = stride, ds->vocab = vocab, ds->bytes = bytes;
	ds->n = (int)windows;
	/* The input shape of a `tokens` input line: C = 1, H = T, W = 1; the classes are the vocabulary. */
	ds->C = 1, ds->H = T, ds->W = 1, ds->classes = vocab;
	return 0;
}

/* The file of this set: --text FILE, --tokens DIR (its train.bin or val.bin), --tokens FILE or
 * --val-tokens FILE; *split says whether the set is a part of it (one file for both sets). */
static const char *set_file(const dnn_token_files *f, int train, char *buf, size_t len, int *split, int *raw_ok)
{
	struct stat st;
	*split = 0, *raw_ok = 0;
	if (f->text) {
		*split = 1;
		return f->text;
	}
	if (f->tokens && stat(f->tokens, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(buf, len, "%s/%s", f->tokens, train ? "train.bin" : "val.bin");
		*raw_ok = 1;
		return buf;
	}
	if (!train && f->val_tokens)
		return f->val_tokens;
	*split = !f->val_tokens;
	return f->tokens;
}

int dnn_dataset_load_tokens(dnn_dataset *ds, const dnn_token_files *f, int train, int T, int vocab, char *err,
			    size_t errlen)
{
	char buf[4096];
	int split, raw_ok;
	memset(ds, 0, sizeof(*ds));
	const char *path = set_file(f, train, buf, sizeof(buf), &split, &raw_ok);
	stream s = {0};
	if (!path) {
		dnn_set_err(err, errlen, "tokens", "no --text or --tokens given");
		return -1;
	}
	if ((f->text ? read_text(&s, path, err, errlen) : read_bin(&s, path, raw_ok, err, errlen)) != 0)
		return -1;
	long from = 0, to = s.n;
	if (split) { /* the last tenth is the validation set */
		const long nval = dnn_tokens_val_count(s.n);
		if (train)
			to = s.n - nval;
		else
			from = s.n - nval;
	}
	/* Positions in messages are the file's: check the whole stream, then cut the part. */
	char what[4200];
	snprintf(what, sizeof(what), "%s%s", path, !split ? "" : train ? " (training part)" : " (validation part: its last tenth)");
	int rc = 0;
	for (long i = 0; i < s.n; i++)
		if (s.tok[i] >= vocab) {
			dnn_set_err(err, errlen, path, "%s at position %ld is %u, not below the net's vocabulary of %d",
				    s.bytes ? "byte" : "token", i, s.tok[i], vocab);
			rc = -1;
			break;
		}
	if (rc == 0)
		rc = dnn_dataset_from_tokens(ds, s.tok + from, to - from, T, train ? 1 : T, vocab, s.bytes, what, err,
					     errlen);
	free(s.tok);
	return rc;
}
