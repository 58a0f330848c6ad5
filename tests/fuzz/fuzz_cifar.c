/* fuzz_cifar — libFuzzer harness for the CIFAR-10 binary-batch reader in runtime/dataset.c.
 * Input layout in fuzz_common.h: one to three batch files, optionally gzip'd. The reader must
 * either fill a consistent set or fail with one line naming one of the files and free
 * everything (LeakSanitizer checks the latter). */
#define FUZZ_WITH_ZLIB
#include "fuzz_common.h"

#include "dataset.h"

#define CHECK(c)                                                                                    \
	do {                                                                                        \
		if (!(c)) {                                                                         \
			fprintf(stderr, "fuzz_cifar: invariant broken: %s (line %d)\n", #c, __LINE__); \
			abort();                                                                    \
		}                                                                                   \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 6)
		return 0;
	unsigned flags = data[0];
	int limit = data[1];
	int nfiles = (int)(flags & 3u) + 1;
	if (nfiles > 3)
		nfiles = 3;
	size_t len[3] = {fuzz_le16(data + 2), fuzz_le16(data + 4), 0};
	data += 6, size -= 6;
	const char *paths[3];
	uint8_t *gz[3] = {NULL, NULL, NULL};
	for (int f = 0; f < nfiles; f++) {
		size_t n = f == nfiles - 1 ? size : (len[f] < size ? len[f] : size);
		const uint8_t *p = data;
		data += n, size -= n;
		if (flags & FUZZ_CIFAR_GZ)
			p = gz[f] = fuzz_gzip(p, n, &n);
		paths[f] = fuzz_file(f, p, n);
	}
	dnn_dataset ds;
	memset(&ds, 0xA5, sizeof(ds));
	char err[512];
	err[0] = '\0';
	int rc = dnn_dataset_load_cifar10(&ds, paths, nfiles, limit, err, sizeof(err));
	fuzz_note("cifar", rc, err);
	if (rc != 0) {
		CHECK(rc == -1);
		CHECK(err[0] && strchr(err, '\n') == NULL);
		int named = 0;
		for (int f = 0; f < nfiles; f++)
			named |= strncmp(err, paths[f], strlen(paths[f])) == 0;
		CHECK(named);
		CHECK(ds.images == NULL && ds.labels == NULL && ds.n == 0 && ds.class_names == NULL);
	} else {
		CHECK(ds.n >= 1 && (limit == 0 || ds.n <= limit));
		CHECK(ds.C == 3 && ds.H == 32 && ds.W == 32 && ds.classes == 10 && ds.class_names);
		unsigned sum = 0;
		for (size_t i = 0; i < (size_t)ds.n * 3072; i++)
			sum += ds.images[i];
		(void)sum;
		for (int i = 0; i < ds.n; i++)
			CHECK(ds.labels[i] >= 0 && ds.labels[i] < 10);
		for (int c = 0; c < 10; c++)
			CHECK(ds.class_names[c] && ds.class_names[c][0]);
		dnn_dataset_free(&ds);
	}
	for (int f = 0; f < 3; f++)
		free(gz[f]);
	return 0;
}
