/* dataset.h — in-memory labelled image datasets (uint8 pixels, int32 labels).
 *
 * Readers validate everything (magic numbers, dimensions, counts, label range, truncation,
 * absurd sizes) and never crash on bad input: on error they return -1 and leave one line in
 * err, naming the file and what is wrong ("path: wrong magic 0x... (want 0x00000803 for IDX images)").
 */
#ifndef DNN_DATASET_H
#define DNN_DATASET_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
	int n;          // number of samples
	int C, H, W;    // sample shape
	int classes;    // number of classes (labels are in [0, classes))
	uint8_t *images; // (n, C, H, W), pixels 0..255
	int32_t *labels; // (n)
	char **class_names; // NULL, or `classes` strings (image folders; freed with the set)
	/* Image folders (imagefolder.h): images is NULL; the files are decoded, resized, cropped and
	 * normalised by the input-loading task of each step. Freed with the set. */
	struct dnn_imagefolder *folder;
	void (*free_folder)(struct dnn_imagefolder *);
	/* Token streams (language models, tokens.c): images and labels are NULL; sample i is the
	 * window of T tokens from token i*stride: x = tokens[s..s+T) as floats, labels =
	 * tokens[s+1..s+T+1) (T int32 per sample). Training sets have stride 1 (every window, in the
	 * seeded per-epoch order), validation sets stride T (windows that do not overlap). */
	uint16_t *tokens;   // (ntokens), every one < vocab; the set's own copy, freed with it
	long ntokens;
	int T, stride, vocab;
	int bytes;          // 1: the byte-level tokenizer's (token = byte; bits per byte is loss / ln 2)
} dnn_dataset;

/* IDX pair (MNIST / Fashion-MNIST layout): images magic 0x00000803 (n, rows, cols) and labels
 * magic 0x00000801 (n). Files may be gzip'd (.gz, detected by content, not name). classes = 10
 * unless a label is larger (then error: labels must be < 10 for these sets... see max_classes).
 * max_classes bounds labels (10 for Fashion-MNIST). limit > 0 keeps only the first `limit`. */
int dnn_dataset_load_idx(dnn_dataset *ds, const char *images_path, const char *labels_path,
			 int max_classes, int limit, char *err, size_t errlen);

/* Fashion-MNIST from a directory holding {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]. */
int dnn_dataset_load_fashion(dnn_dataset *ds, const char *dir, int train, int limit, char *err,
			     size_t errlen);

/* CIFAR-10 binary batches (each record: 1 label byte + 3072 pixel bytes). paths: n_paths files. */
int dnn_dataset_load_cifar10(dnn_dataset *ds, const char *const *paths, int n_paths, int limit,
			     char *err, size_t errlen);

/* ---- token streams (runtime/tokens.c) */
/* Where the tokens come from: --text FILE (UTF-8 through the byte-level tokenizer), --tokens DIR
 * (nanoGPT: DIR/train.bin and DIR/val.bin, little-endian uint16 without a header; a file there
 * that starts with llm.c's magic is read as llm.c's), --tokens FILE (llm.c's .bin: 256 int32 of
 * header, magic 20240520, version 1, the token count, then the uint16 tokens) with --val-tokens
 * FILE2 (the validation set in the same format) or without (the split below). */
typedef struct {
	const char *text;       // --text FILE, or NULL
	const char *tokens;     // --tokens DIR or FILE, or NULL
	const char *val_tokens; // --val-tokens FILE (with --tokens FILE), or NULL
} dnn_token_files;

/* The validation part of a stream of n tokens when one file holds both sets: the last
 * round(n / 10) tokens (the same split in every run and on every rank). */
long dnn_tokens_val_count(long n);

/* The training (train=1, stride 1) or validation (train=0, stride T) windows of the files, for a
 * net of context T and vocabulary vocab. Every token must be < vocab ("path: token at position P
 * is V, not below the net's vocabulary of N"); a set too short for one window of T+1 tokens is an
 * error naming the file. Returns 0, or -1 with one line in err naming the file. */
int dnn_dataset_load_tokens(dnn_dataset *ds, const dnn_token_files *f, int train, int T, int vocab, char *err,
			    size_t errlen);

/* The windows of T tokens (stride apart) over tok[0..n) (copied). bytes: the byte tokenizer's.
 * Returns 0, or -1 with one line in err ("what": the source named in it). */
int dnn_dataset_from_tokens(dnn_dataset *ds, const uint16_t *tok, long n, int T, int stride, int vocab, int bytes,
			    const char *what, char *err, size_t errlen);

void dnn_dataset_free(dnn_dataset *ds);

/* Per-channel mean/std of pixels/255 over the set (for input normalisation); token sets: mean 0,
 * std 1 (the ids go in as they are). */
void dnn_dataset_channel_stats(const dnn_dataset *ds, float *mean, float *std);
#endif
