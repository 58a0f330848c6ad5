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

void dnn_dataset_free(dnn_dataset *ds);

/* Per-channel mean/std of pixels/255 over the set (for input normalisation). */
void dnn_dataset_channel_stats(const dnn_dataset *ds, float *mean, float *std);
#endif
