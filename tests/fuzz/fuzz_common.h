/* fuzz_common.h — what the fuzz harnesses (tests/fuzz/fuzz_*.c), their seed generator
 * (fuzz_seeds.c) and the replay driver (replay_main.c) share: the layout of each harness's input,
 * and a scratch file that the path-taking readers can open.
 *
 * Input layouts (everything after the layout bytes is file content, used as is):
 *   fuzz_netfile:    the net file's text (a copy is NUL-terminated; the parser stops at a NUL).
 *   fuzz_idx:        u8 flags | u8 max_classes | u8 limit | u16 le images_len | images | labels
 *                    flags bit 0: gzip the images file, bit 1: gzip the labels file
 *                    (the harness compresses, so the reader sees valid gzip around fuzzed bytes;
 *                    raw bytes that start with 1f 8b still test corrupt gzip).
 *                    max_classes = byte % 12 (0 and 11 test the reader's own range check);
 *                    limit = byte (0 = all).
 *   fuzz_cifar:      u8 flags | u8 limit | u16 le len_1 | u16 le len_2 | file_1 | file_2 | file_3
 *                    flags bits 0-1: number of files - 1 (0..2; 3 is read as 3 files), bit 2: gzip
 *                    them. len_k is clamped to what is left, so every input is accepted.
 *   fuzz_tokens:     u8 flags | u8 T | u16 le vocab | u16 le len_1 | file_1 | file_2
 *                    flags bits 0-1: 0 UTF-8 text (one file, split 90/10), 1 an llm.c .bin (one
 *                    file, split), 2-3 an llm.c pair (file_1 training, file_2 validation; len_1
 *                    clamped to what is left); bit 2: load the training set (else validation).
 *   fuzz_checkpoint: u8 flags | checkpoint file
 *                    flags bits 0-1: which tensor set the caller registers (fuzz_ckpt_sets),
 *                    bit 2: the harness rewrites the CRC trailer so mutations get past the checksum,
 *                    bit 3: the caller checks the fingerprint FUZZ_CKPT_FP (else 0: no check).
 */
#ifndef DNN_FUZZ_COMMON_H
#define DNN_FUZZ_COMMON_H
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FUZZ_IDX_GZ_IMAGES 1u
#define FUZZ_IDX_GZ_LABELS 2u
#define FUZZ_CIFAR_GZ 4u
#define FUZZ_TOKENS_TRAIN 4u
#define FUZZ_CKPT_FIX_CRC 4u
#define FUZZ_CKPT_CHECK_FP 8u
#define FUZZ_CKPT_FP 0x0123456789abcdefull

typedef struct {
	int n;
	const char *names[4];
	uint64_t lens[4];
} fuzz_ckpt_set;

static const fuzz_ckpt_set fuzz_ckpt_sets[4] = {
    {0, {0}, {0}},
    {1, {"w"}, {3}},
    {4, {"c1.weight", "c1.bias", "empty", "c1.weight.momentum"}, {12, 2, 0, 12}},
    {2, {"fc.weight", "input.mean"}, {300, 1}},
};

/* A scratch file the readers can open by path: an anonymous memfd when the kernel has them (no
 * disk traffic), else a file made by mkstemp. Each call rewrites the file with data[0..n).
 * `slot` picks one of a few files (the IDX and CIFAR harnesses need several at once). */
#define FUZZ_SLOTS 4
static inline const char *fuzz_file(int slot, const uint8_t *data, size_t n)
{
	static int fuzz_fd[FUZZ_SLOTS] = {-1, -1, -1, -1};
	static char fuzz_path[FUZZ_SLOTS][64];
	if (fuzz_fd[slot] < 0) {
		int fd = memfd_create("dnn-fuzz", MFD_CLOEXEC);
		if (fd >= 0) {
			snprintf(fuzz_path[slot], sizeof(fuzz_path[slot]), "/proc/self/fd/%d", fd);
		} else {
			char tmpl[] = "/tmp/dnn-fuzz.XXXXXX";
			fd = mkstemp(tmpl);
			if (fd < 0) {
				perror("fuzz scratch file");
				abort();
			}
			unlink(tmpl); // reachable through /proc/self/fd while open; nothing left behind
			snprintf(fuzz_path[slot], sizeof(fuzz_path[slot]), "/proc/self/fd/%d", fd);
		}
		fuzz_fd[slot] = fd;
	}
	int fd = fuzz_fd[slot];
	if (ftruncate(fd, 0) != 0 || (n && pwrite(fd, data, n, 0) != (ssize_t)n)) {
		perror("fuzz scratch file");
		abort();
	}
	return fuzz_path[slot];
}

/* FUZZ_VERBOSE=1 in the environment: each harness prints its outcome per input (replays). */
static inline void fuzz_note(const char *harness, int rc, const char *err)
{
	static int verbose = -1;
	if (verbose < 0)
		verbose = getenv("FUZZ_VERBOSE") != NULL;
	if (verbose)
		fprintf(stderr, "%s: %s\n", harness, rc == 0 ? "loaded" : err);
}

static inline uint16_t fuzz_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

#ifdef FUZZ_WITH_ZLIB
#include <zlib.h>
/* The gzip'd form of data[0..n) in a malloc'd buffer (*out_n bytes); aborts on failure. */
static inline uint8_t *fuzz_gzip(const uint8_t *data, size_t n, size_t *out_n)
{
	uLong cap = compressBound((uLong)n) + 64;
	uint8_t *out = malloc(cap);
	z_stream s;
	memset(&s, 0, sizeof(s));
	if (!out || deflateInit2(&s, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		abort();
	s.next_in = (Bytef *)(uintptr_t)data;
	s.avail_in = (uInt)n;
	s.next_out = out;
	s.avail_out = (uInt)cap;
	if (deflate(&s, Z_FINISH) != Z_STREAM_END)
		abort();
	*out_n = s.total_out;
	deflateEnd(&s);
	return out;
}
#endif
#endif
