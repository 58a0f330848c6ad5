/* fuzz_tokens — libFuzzer harness for a language model's token readers in runtime/tokens.c:
 * UTF-8 text (byte tokens) and llm.c .bin files, one file split 90/10 or a pair. Input layout in
 * fuzz_common.h. The reader must either fill a consistent set (every window inside its stream,
 * every id below the vocabulary, the stride of the set) or fail with one line naming one of the
 * files and leave the set empty. */
#include "fuzz_common.h"

#include "dataset.h"

#define CHECK(c)                                                                                     \
	do {                                                                                         \
		if (!(c)) {                                                                          \
			fprintf(stderr, "fuzz_tokens: invariant broken: %s (line %d)\n", #c, __LINE__); \
			abort();                                                                     \
		}                                                                                    \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 6)
		return 0;
	const unsigned flags = data[0];
	const int T = data[1], vocab = fuzz_le16(data + 2), mode = (int)(flags & 3u), train = (flags & FUZZ_TOKENS_TRAIN) != 0;
	size_t len1 = fuzz_le16(data + 4);
	data += 6, size -= 6;
	if (mode < 2 || len1 > size)
		len1 = size;
	const char *p1 = fuzz_file(0, data, len1), *p2 = mode >= 2 ? fuzz_file(1, data + len1, size - len1) : NULL;
	dnn_token_files f = {0};
	if (mode == 0)
		f.text = p1;
	else
		f.tokens = p1, f.val_tokens = p2;
	dnn_dataset ds;
	memset(&ds, 0xA5, sizeof(ds));
	char err[512];
	err[0] = '\0';
	int rc = dnn_dataset_load_tokens(&ds, &f, train, T, vocab, err, sizeof(err));
	fuzz_note("tokens", rc, err);
	if (rc != 0) {
		CHECK(rc == -1);
		CHECK(err[0] && strchr(err, '\n') == NULL);
		CHECK(strncmp(err, p1, strlen(p1)) == 0 || (p2 && strncmp(err, p2, strlen(p2)) == 0));
		CHECK(ds.tokens == NULL && ds.n == 0 && ds.images == NULL && ds.labels == NULL);
	} else {
		CHECK(ds.n >= 1 && ds.T == T && ds.vocab == vocab && ds.stride == (train ? 1 : T));
		CHECK((long)(ds.n - 1) * ds.stride + T + 1 <= ds.ntokens);
		CHECK(ds.bytes == (mode == 0) && ds.C == 1 && ds.H == T && ds.W == 1 && ds.classes == vocab);
		for (long i = 0; i < ds.ntokens; i++)
			CHECK(ds.tokens[i] < vocab);
		dnn_dataset_free(&ds);
	}
	return 0;
}
