/* imagefolder.h — image-folder datasets (`--data DIR`): the layout every vision user knows.
 *
 *   DIR/<class>/<image files>                  one subfolder per class, e.g. DIR/cute_dog/0001.jpg
 *   DIR/train/<class>/..., DIR/val/<class>/...  an explicit split, used when DIR/train exists
 *
 * Classes are the sorted (bytewise) names of the class subfolders (of DIR/train when present);
 * for the ANP metrics a name is `adjective_noun`, split at its first '_'. Files are found
 * recursively in each class folder by extension (.jpg .jpeg .png .bmp .gif .tga .ppm .pgm .pnm,
 * any case); hidden files and folders are ignored. Without DIR/val, a `val_fraction` of each
 * class is held out: the files whose hash of (path below DIR) is smallest, so the split is the same
 * in every run (train, eval, resumed, any --seed, any number of ranks) and stable when files are added.
 *
 * Nothing is decoded when the folder is listed (except a small sample for the input statistics):
 * each step's input-loading task decodes, resizes, crops and normalises its chunk's files
 * (codelets/load_images.h), so loading overlaps compute and the prefetch is bounded by the
 * training window (--window: the steps in flight). Files that cannot be read or decoded are
 * skipped with a warning and counted (dnn_imagefolder_skipped); they never stop a run.
 */
#ifndef DNN_IMAGEFOLDER_H
#define DNN_IMAGEFOLDER_H
#include <stddef.h>
#include <stdint.h>
#include <starpu.h>

#include "dataset.h"
#include "dnn_codelet.h" /* dnn_task_opts */

typedef struct dnn_imagefolder dnn_imagefolder;

/* 1 if DIR looks like an image folder: DIR/train/ exists, or a subfolder of DIR holds an image. */
int dnn_imagefolder_is_root(const char *dir);

/* The class names of DIR (allocated; free each and the array). Returns the count, or -1 with err. */
int dnn_imagefolder_classes(const char *dir, char ***names, char *err, size_t errlen);

/* List the training (train=1) or validation (train=0) files of DIR as a dataset of samples of
 * shape (C, H, W) (C = 1 or 3), with classes and class_names set and images NULL.
 * limit > 0 keeps a seeded subset of `limit` files. seed drives the augmentation (crops, flips)
 * and the sample used for the channel statistics. quiet: no informational line. */
int dnn_imagefolder_load(dnn_dataset *ds, const char *dir, int train, double val_fraction, int limit,
			 uint64_t seed, int C, int H, int W, int quiet, char *err, size_t errlen);

/* A dataset of the given files (predict): one class per file is not known, labels are 0. */
int dnn_imagefolder_from_files(dnn_dataset *ds, const char *const *paths, int n, int C, int H, int W,
			       char *err, size_t errlen);

void dnn_imagefolder_free(dnn_imagefolder *f);

/* Per-channel mean/std of pixels/255, measured on up to 256 seeded training images (centre crops). */
void dnn_imagefolder_channel_stats(const dnn_imagefolder *f, float *mean, float *std);

/* Files skipped so far (empty or unreadable when listed, or failed to decode in a task). */
int dnn_imagefolder_skipped(const dnn_imagefolder *f);
/* 1 when sample i failed to decode (its slot in a batch held a substitute). */
int dnn_imagefolder_is_bad(const dnn_imagefolder *f, int i);
/* Under MPI each rank decodes only its shard: mark (and count, once) as skipped the samples that
 * any rank found unreadable, given flags[i] != 0 for those (n = the folder's sample count). */
void dnn_imagefolder_merge_bad(dnn_imagefolder *f, const float *flags, int n);
/* Path of sample i. */
const char *dnn_imagefolder_path(const dnn_imagefolder *f, int i);
/* The first (at most max) skipped files, for reports. Returns how many were written to paths. */
int dnn_imagefolder_skipped_list(const dnn_imagefolder *f, const char **paths, int max);

/* Insert the input-loading task of one chunk: samples idx[0..n) of ds into x (n, C, H, W) and
 * labels y (n). augment: random crops and flips (training) drawn from (seed, step, sample
 * index), so the result does not depend on chunks, workers or ranks; else centre crops.
 * step: the GLOBAL step number (so a resumed run augments as an uninterrupted one). o: the
 * insert options (the chunk's worker under --pin-chunks) or NULL.
 * Returns 0 or a negative errno (-ENOMEM). */
int dnn_imagefolder_insert_load(const dnn_task_opts *o, const dnn_dataset *ds, const int *idx, int n, int augment,
				long step, const float *mean, const float *std, starpu_data_handle_t x,
				starpu_data_handle_t y);
#endif
