/* fuzz_checkpoint — libFuzzer harness for checkpoint loading (runtime/checkpoint.c).
 * Input layout in fuzz_common.h: a flags byte, then the file. With FUZZ_CKPT_FIX_CRC the harness
 * rewrites the CRC trailer, so mutated headers reach the parser instead of stopping at the
 * checksum. Properties:
 *   - a failed load names the file in one line and leaves the caller's buffers untouched;
 *   - a successful load is canonical: saving what was loaded (its version, class names and net
 *     text included) gives back the very same bytes (so no two different files load as the same
 *     checkpoint, and nothing is silently dropped);
 *   - dnn_checkpoint_read_info (the header alone, verified) never crashes, fails in one line
 *     naming the file with nothing allocated, and agrees with a successful load. */
#define FUZZ_WITH_ZLIB
#include "fuzz_common.h"

#include <sys/stat.h>

#include "checkpoint.h"

#define CHECK(c)                                                                                        \
	do {                                                                                            \
		if (!(c)) {                                                                             \
			fprintf(stderr, "fuzz_checkpoint: invariant broken: %s (line %d)\n", #c, __LINE__); \
			abort();                                                                        \
		}                                                                                       \
	} while (0)

#define POISON 0x7fc0dead // a NaN bit pattern no checkpoint writes by accident

/* Directory for the round-trip saves: tmpfs when there is one (save fsyncs); removed at exit. */
static char dir[128];
static void remove_save_dir(void)
{
	char p[160];
	snprintf(p, sizeof(p), "%s/ckpt", dir);
	unlink(p);
	rmdir(dir);
}
static const char *save_dir(void)
{
	if (!dir[0]) {
		struct stat st;
		const char *base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
		snprintf(dir, sizeof(dir), "%s/dnn-fuzz-ckpt.XXXXXX", base);
		if (!mkdtemp(dir))
			abort();
		atexit(remove_save_dir);
	}
	return dir;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned flags = data[0];
	const fuzz_ckpt_set *set = &fuzz_ckpt_sets[flags & 3u];
	data++, size--;
	uint8_t *file = malloc(size ? size : 1);
	if (!file)
		return 0;
	memcpy(file, data, size);
	if ((flags & FUZZ_CKPT_FIX_CRC) && size >= 4) {
		uLong crc = crc32(0L, Z_NULL, 0);
		crc = crc32(crc, file, (uInt)(size - 4));
		for (int i = 0; i < 4; i++)
			file[size - 4 + (size_t)i] = (uint8_t)(crc >> (8 * i));
	}
	const char *path = fuzz_file(0, file, size);

	float store[4][300];
	dnn_ckpt_tensor t[4];
	for (int i = 0; i < set->n; i++) {
		uint32_t u = POISON;
		for (uint64_t j = 0; j < set->lens[i]; j++)
			memcpy(&store[i][j], &u, 4);
		t[i] = (dnn_ckpt_tensor){set->names[i], store[i], set->lens[i]};
	}
	dnn_ckpt_meta meta = {.net_fingerprint = (flags & FUZZ_CKPT_CHECK_FP) ? FUZZ_CKPT_FP : 0};
	char err[512];
	err[0] = '\0';
	int rc = dnn_checkpoint_load(path, &meta, t, set->n, err, sizeof(err));
	fuzz_note("checkpoint", rc, err);
	dnn_ckpt_meta info;
	char ierr[512];
	int irc = dnn_checkpoint_read_info(path, &info, 1, ierr, sizeof(ierr));
	if (irc != 0) {
		CHECK(irc == -1);
		CHECK(ierr[0] && strchr(ierr, '\n') == NULL && strncmp(ierr, path, strlen(path)) == 0);
		CHECK(info.class_names == NULL && info.net_text == NULL);
		CHECK(rc != 0); // what the header alone refuses, a full load refuses too
	}
	if (rc != 0) {
		CHECK(rc == -1);
		CHECK(err[0] && strchr(err, '\n') == NULL && strncmp(err, path, strlen(path)) == 0);
		CHECK(meta.class_names == NULL && meta.net_text == NULL);
		if (irc == 0)
			dnn_ckpt_free_names(&info);
		for (int i = 0; i < set->n; i++)
			for (uint64_t j = 0; j < set->lens[i]; j++) {
				uint32_t u;
				memcpy(&u, &store[i][j], 4);
				CHECK(u == POISON); // untouched
			}
		free(file);
		return 0;
	}
	CHECK(!(flags & FUZZ_CKPT_CHECK_FP) || meta.net_fingerprint == FUZZ_CKPT_FP);
	CHECK(meta.nclasses == 0 || meta.class_names != NULL);
	CHECK(meta.version >= 1 && meta.version <= DNN_CKPT_VERSION);
	CHECK(meta.version >= 2 || meta.net_text == NULL);
	// read_info saw the same header.
	CHECK(irc == 0 && info.version == meta.version && info.net_fingerprint == meta.net_fingerprint &&
	      info.step == meta.step && info.epoch == meta.epoch && info.rng_state == meta.rng_state &&
	      info.nclasses == meta.nclasses);
	CHECK((info.net_text == NULL) == (meta.net_text == NULL) &&
	      (!info.net_text || strcmp(info.net_text, meta.net_text) == 0));
	for (uint32_t i = 0; i < meta.nclasses; i++)
		CHECK(strcmp(info.class_names[i], meta.class_names[i]) == 0);
	dnn_ckpt_free_names(&info);
	// Round trip: what was loaded saves back to the same bytes.
	char out[256];
	snprintf(out, sizeof(out), "%s/ckpt", save_dir());
	CHECK(dnn_checkpoint_save(out, &meta, t, set->n, err, sizeof(err)) == 0);
	FILE *f = fopen(out, "rb");
	CHECK(f != NULL);
	uint8_t *back = malloc(size + 1);
	CHECK(back != NULL);
	size_t got = fread(back, 1, size + 1, f);
	fclose(f);
	CHECK(got == size && memcmp(back, file, size) == 0);
	free(back);
	dnn_ckpt_free_names(&meta);
	free(file);
	return 0;
}
