/* load_images.h — input loading from image files as a task: decode (stb_image: JPEG, PNG, BMP,
 * GIF, TGA, PNM), resize so the short side is dnn_image_short_side(H, W), crop H x W (random
 * position and horizontal flip when augmenting, centre otherwise), normalise per channel, and
 * write the chunk's input tensor and labels. The image-folder dataset (runtime/imagefolder.h)
 * inserts these tasks. CPU and CUDA forms: the CUDA one decodes, resizes and crops on the host
 * (dnn_load_images_stage, unflipped, into the CUDA worker's pinned staging block: dnn_staging.h),
 * copies on the worker's stream, and flips, substitutes and normalises on the device; same
 * augmentation decisions, and the CPU form's values bit for bit.
 *
 * A file that cannot be decoded never stops the run: the kernel reports it (on_bad) and the
 * task fills its slot with a copy of another sample of the same chunk (pixels and label), so
 * training only ever sees real images.
 */
#ifndef DNN_LOAD_IMAGES_H
#define DNN_LOAD_IMAGES_H
#include <stddef.h>
#include <stdint.h>
#include <starpu.h>

#include "dnn_codelet.h"

/* Largest image accepted (pixels): bigger ones are reported as unreadable, not decoded. */
#define DNN_IMAGE_MAX_PIXELS (64L << 20)
/* Largest file read (bytes). */
#define DNN_IMAGE_MAX_BYTES (256L << 20)

/* Short side of the resized image before the H x W crop: 8/7 of the crop (224 -> 256, 32 -> 37). */
int dnn_image_short_side(int H, int W);

/* Decode an encoded image held in memory (buf, len) and write the crop as (C, H, W) floats,
 * x = (pixel/255 - mean[c]) / std[c]. C is 1 (grey) or 3 (RGB). augment: random crop position
 * and flip drawn from rng; else the centre crop. Returns 0, or -1 with the reason in why. */
int dnn_image_decode_crop_mem(float *dst, const unsigned char *buf, size_t len, int C, int H, int W,
			      int augment, uint64_t rng, const float *mean, const float *std, char *why,
			      size_t whylen);
/* The same from a file. */
int dnn_image_decode_crop(float *dst, const char *path, int C, int H, int W, int augment, uint64_t rng,
			  const float *mean, const float *std, char *why, size_t whylen);

/* dnn_image_decode_crop without the normalisation and without the flip: dst gets the unflipped
 * crop in [0, 255] and *flip whether augmentation mirrors it. The flipped crop is exactly this one
 * mirrored (output column x of a flipped resample has column W-1-x's source pixels and weights). */
int dnn_image_decode_crop_raw(float *dst, const char *path, int C, int H, int W, int augment, uint64_t rng, int *flip,
			      char *why, size_t whylen);

/* Resample an 8-bit interleaved image src (h, w, comp) into the crop (C, H, W) of its resize to
 * (rh, rw), starting at (oy, ox); flip mirrors the crop horizontally. Box filter when shrinking,
 * bilinear when enlarging. Returns the values in [0, 255] before normalisation. */
void dnn_image_resample(float *dst, const unsigned char *src, int h, int w, int comp, int C, int rh, int rw,
			int oy, int ox, int H, int W, int flip);

typedef struct {
	const char *const *paths; // (n_total) file of each dataset index
	const int32_t *labels;    // (n_total)
	const float *mean, *std;  // (C)
	int C, H, W;
	int augment;
	uint64_t seed;            // this step's augmentation seed (mixed with each sample's index)
	void (*on_bad)(void *ctx, int index, const char *why); // called once per failing sample
	void *ctx;
	int n;                    // samples in this chunk
	int idx[];                // (n) dataset indices
} dnn_load_images_args;

/* x: (n, C, H, W), y: (n). Returns the number of samples that failed to decode. */
int dnn_load_images_cpu(float *x, int32_t *y, const dnn_load_images_args *a);
/* The augmentation stream of data-set index k in a step whose seed is `seed` (both forms). */
uint64_t dnn_image_sample_rng(uint64_t seed, int k);
/* The CUDA form's host half: raw (n, C, H, W) unflipped crops in [0, 255] (dnn_image_decode_crop_raw),
 * labels y (n), and map (n): output sample i is raw sample map[i] >> 1, mirrored when map[i] & 1,
 * normalised as x = v * scale[c] - shift[c]; map[i] = -1: zeros (no sample of the chunk readable).
 * Unreadable samples are reported (on_bad) and substituted as by the CPU form. Returns their count. */
int dnn_load_images_stage(float *raw, int32_t *y, int32_t *map, float *scale, float *shift,
			  const dnn_load_images_args *a);
void dnn_load_images_cuda(void *buffers[], void *cl_arg);

/* (W x, W labels) */
extern struct starpu_codelet cl_load_images;
/* a is copied (with its idx[0..a->n)) into the task's argument block. */
int dnn_insert_load_images(const dnn_task_opts *o, const dnn_load_images_args *a, starpu_data_handle_t x, starpu_data_handle_t y);
#endif
