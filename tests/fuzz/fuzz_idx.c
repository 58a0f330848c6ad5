/* fuzz_idx — libFuzzer harness for the IDX (MNIST / Fashion-MNIST) reader in runtime/dataset.c.
 * Input layout in fuzz_common.h. The reader must either fill a consistent set or fail with one
 * line naming one of the two files and leave the set empty. */
#define FUZZ_WITH_ZLIB
#include "fuzz_common.h"

#include "dataset.h"

#define CHECK(c)                                                                                  \
	do {                                                                                      \
		if (!(c)) {                                                                       \
			fprintf(stderr, "fuzz_idx: invariant broken: %s (line %d)\n", #c, __LINE__); \
			abort();                                                                  \
		}                                                                                 \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 5)
		return 0;
	unsigned flags = data[0];
	int max_classes = data[1] % 12, limit = data[2];
	size_t ilen = fuzz_le16(data + 3);
	data += 5, size -= 5;
	if (ilen > size)
		ilen = size;
	const uint8_t *ib = data, *lb = data + ilen;
	size_t in = ilen, ln = size - ilen;
	uint8_t *igz = NULL, *lgz = NULL;
	if (flags & FUZZ_IDX_GZ_IMAGES)
		ib = igz = fuzz_gzip(ib, in, &in);
	if (flags & FUZZ_IDX_GZ_LABELS)
		lb = lgz = fuzz_gzip(lb, ln, &ln);
	const char *ip = fuzz_file(0, ib, in);
	const char *lp = fuzz_file(1, lb, ln);
	dnn_dataset ds;
	memset(&ds, 0xA5, sizeof(ds));
	char err[512];
	err[0] = '\0';
	int rc = dnn_dataset_load_idx(&ds, ip, lp, max_classes, limit, err, sizeof(err));
	fuzz_note("idx", rc, err);
	if (rc != 0) {
		CHECK(rc == -1);
		CHECK(err[0] && strchr(err, '\n') == NULL);
		CHECK(strncmp(err, ip, strlen(ip)) == 0 || strncmp(err, lp, strlen(lp)) == 0);
		CHECK(ds.images == NULL && ds.labels == NULL && ds.n == 0 && ds.class_names == NULL);
	} else {
		CHECK(max_classes >= 1 && max_classes <= 11);
		CHECK(ds.n >= 1 && (limit == 0 || ds.n <= limit));
		CHECK(ds.C == 1 && ds.H >= 1 && ds.W >= 1 && ds.classes == max_classes);
		CHECK(ds.images && ds.labels);
		// Every pixel readable (ASan checks the bounds), every label in range.
		unsigned sum = 0;
		size_t np = (size_t)ds.n * ds.H * ds.W;
		for (size_t i = 0; i < np; i++)
			sum += ds.images[i];
		(void)sum;
		for (int i = 0; i < ds.n; i++)
			CHECK(ds.labels[i] >= 0 && ds.labels[i] < ds.classes);
		float mean[1], std[1];
		dnn_dataset_channel_stats(&ds, mean, std);
		CHECK(mean[0] >= 0 && mean[0] <= 1 && std[0] >= 0 && std[0] <= 1);
		dnn_dataset_free(&ds);
	}
	free(igz);
	free(lgz);
	return 0;
}
