/* load_images.c — decode + resize + crop + normalise image files as a task (see load_images.h). */
#include "load_images.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dnn_codelet.h"

/* Debian's libstb-dev ships the single-file headers (and a libstb.so built from them); the
 * decoder is compiled here, in this one file, so nothing extra is linked or carried. */
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_HDR
#define STBI_NO_LINEAR
#define STBI_NO_PSD
#define STBI_NO_PIC
#define STBI_FAILURE_USERMSG
#include <stb/stb_image.h>

#include "dnn_rng.h"


int dnn_image_short_side(int H, int W)
{
	int m = H > W ? H : W;
	return (m * 8 + 3) / 7;
}

/* ---------------------------------------------------------------- resampling */
/* One axis: output o (crop index) reads source pixels start[o] .. start[o]+cnt[o]-1 with weights
 * wt[o * taps + k] (summing to 1). The crop starts at `off` in the resized axis of length rsz. */
typedef struct {
	int taps;
	int *start, *cnt;
	float *wt;
} axis_map;

static int axis_build(axis_map *a, int in, int rsz, int off, int out, int flip)
{
	double scale = (double)in / rsz; /* source pixels per resized pixel */
	a->taps = scale > 1.0 ? (int)ceil(scale) + 2 : 2;
	a->start = malloc(sizeof(int) * (size_t)out);
	a->cnt = malloc(sizeof(int) * (size_t)out);
	a->wt = malloc(sizeof(float) * (size_t)out * (size_t)a->taps);
	if (!a->start || !a->cnt || !a->wt)
		return -1;
	for (int o = 0; o < out; o++) {
		int r = off + (flip ? out - 1 - o : o);
		float *w = a->wt + (size_t)o * a->taps;
		if (scale >= 1.0) { /* shrinking (or 1:1): average the footprint [lo, hi) */
			double lo = r * scale, hi = (r + 1) * scale;
			int i0 = (int)floor(lo), i1 = (int)ceil(hi);
			if (i1 > in)
				i1 = in;
			if (i0 >= i1)
				i0 = i1 - 1;
			int n = i1 - i0;
			if (n > a->taps)
				n = a->taps;
			double sum = 0;
			for (int k = 0; k < n; k++) {
				double a0 = i0 + k > lo ? i0 + k : lo, b0 = i0 + k + 1 < hi ? i0 + k + 1 : hi;
				w[k] = (float)(b0 > a0 ? b0 - a0 : 0);
				sum += w[k];
			}
			for (int k = 0; k < n; k++)
				w[k] = sum > 0 ? (float)(w[k] / sum) : 1.0f / n;
			a->start[o] = i0, a->cnt[o] = n;
		} else { /* enlarging: bilinear between the two nearest source pixels */
			double c = (r + 0.5) * scale - 0.5;
			if (c < 0)
				c = 0;
			if (c > in - 1)
				c = in - 1;
			int i0 = (int)floor(c);
			if (i0 > in - 2)
				i0 = in > 1 ? in - 2 : 0;
			double t = c - i0;
			a->start[o] = i0;
			a->cnt[o] = in > 1 ? 2 : 1;
			w[0] = (float)(1 - t), w[1] = (float)t;
			if (in == 1)
				w[0] = 1.0f;
		}
	}
	return 0;
}

static void axis_free(axis_map *a)
{
	free(a->start), free(a->cnt), free(a->wt);
}

void dnn_image_resample(float *dst, const unsigned char *src, int h, int w, int comp, int C, int rh, int rw,
			int oy, int ox, int H, int W, int flip)
{
	axis_map ax = {0}, ay = {0};
	/* Rows the crop reads, then a horizontal pass over just those rows: tmp (rows, W, C). */
	float *tmp = NULL;
	if (axis_build(&ax, w, rw, ox, W, flip) != 0 || axis_build(&ay, h, rh, oy, H, 0) != 0)
		goto oom;
	int r0 = ay.start[0], r1 = ay.start[H - 1] + ay.cnt[H - 1];
	tmp = malloc(sizeof(float) * (size_t)(r1 - r0) * W * C);
	if (!tmp)
		goto oom;
	for (int y = r0; y < r1; y++) {
		const unsigned char *row = src + (size_t)y * w * comp;
		float *t = tmp + (size_t)(y - r0) * W * C;
		for (int x = 0; x < W; x++) {
			const float *wt = ax.wt + (size_t)x * ax.taps;
			const unsigned char *p = row + (size_t)ax.start[x] * comp;
			for (int c = 0; c < C; c++) {
				float s = 0;
				for (int k = 0; k < ax.cnt[x]; k++)
					s += wt[k] * p[k * comp + c];
				t[x * C + c] = s;
			}
		}
	}
	for (int y = 0; y < H; y++) {
		const float *wt = ay.wt + (size_t)y * ay.taps;
		for (int x = 0; x < W; x++)
			for (int c = 0; c < C; c++) {
				float s = 0;
				for (int k = 0; k < ay.cnt[y]; k++)
					s += wt[k] * tmp[((size_t)(ay.start[y] - r0 + k) * W + x) * C + c];
				dst[((size_t)c * H + y) * W + x] = s;
			}
	}
	free(tmp);
	axis_free(&ax), axis_free(&ay);
	return;
oom:
	/* Out of memory for a few rows of floats: leave a grey image rather than stop the run. */
	for (size_t i = 0; i < (size_t)C * H * W; i++)
		dst[i] = 127.5f;
	free(tmp);
	axis_free(&ax), axis_free(&ay);
}

/* ---------------------------------------------------------------- decoding */
/* Decode, resize, crop: dst gets the crop in [0, 255]. apply_flip: mirror it when augmentation
 * says so; else leave it unflipped and only say so in *flip. */
static int decode_resample(float *dst, const unsigned char *buf, size_t len, int C, int H, int W, int augment,
			   uint64_t rng, int apply_flip, int *flip_out, char *why, size_t whylen)
{
	if (C != 1 && C != 3) {
		snprintf(why, whylen, "the net's input has %d channels (image folders need 1 or 3)", C);
		return -1;
	}
	if (len == 0) {
		snprintf(why, whylen, "empty file");
		return -1;
	}
	if (len > (size_t)INT32_MAX) {
		snprintf(why, whylen, "file too large");
		return -1;
	}
	int w, h, comp;
	if (!stbi_info_from_memory(buf, (int)len, &w, &h, &comp)) {
		snprintf(why, whylen, "not a readable image (%s)", stbi_failure_reason());
		return -1;
	}
	if (w < 1 || h < 1 || (long)w * h > DNN_IMAGE_MAX_PIXELS) {
		snprintf(why, whylen, "%dx%d pixels is out of range (at most %ld pixels)", w, h, DNN_IMAGE_MAX_PIXELS);
		return -1;
	}
	unsigned char *px = stbi_load_from_memory(buf, (int)len, &w, &h, &comp, C);
	if (!px) {
		snprintf(why, whylen, "cannot decode (%s)", stbi_failure_reason());
		return -1;
	}
	/* Resize so the short side is S, keeping the aspect ratio; crop H x W out of it. */
	const int S = dnn_image_short_side(H, W);
	int rh, rw;
	if (h <= w)
		rh = S, rw = (int)((double)w * S / h + 0.5);
	else
		rw = S, rh = (int)((double)h * S / w + 0.5);
	if (rw < W)
		rw = W;
	if (rh < H)
		rh = H;
	int oy = (rh - H) / 2, ox = (rw - W) / 2, flip = 0;
	if (augment) {
		oy = (int)(dnn_splitmix64(&rng) % (uint64_t)(rh - H + 1));
		ox = (int)(dnn_splitmix64(&rng) % (uint64_t)(rw - W + 1));
		flip = (int)(dnn_splitmix64(&rng) & 1);
	}
	if (flip_out)
		*flip_out = flip;
	dnn_image_resample(dst, px, h, w, C, C, rh, rw, oy, ox, H, W, apply_flip ? flip : 0);
	stbi_image_free(px);
	return 0;
}

int dnn_image_decode_crop_mem(float *dst, const unsigned char *buf, size_t len, int C, int H, int W,
			      int augment, uint64_t rng, const float *mean, const float *std, char *why,
			      size_t whylen)
{
	if (decode_resample(dst, buf, len, C, H, W, augment, rng, 1, NULL, why, whylen) != 0)
		return -1;
	const size_t HW = (size_t)H * W;
	for (int c = 0; c < C; c++) {
		const float scale = 1.0f / (255.0f * std[c]), shift = mean[c] / std[c];
		for (size_t k = 0; k < HW; k++)
			dst[c * HW + k] = dst[c * HW + k] * scale - shift;
	}
	return 0;
}

/* The whole file in *buf (malloc'd), its length in *len; 0, or -1 with why. */
static int read_file(const char *path, unsigned char **bufp, size_t *lenp, char *why, size_t whylen)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(why, whylen, "%s", strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(why, whylen, "not a regular file");
		fclose(f);
		return -1;
	}
	if (st.st_size > DNN_IMAGE_MAX_BYTES) {
		snprintf(why, whylen, "file is %lld bytes (at most %ld)", (long long)st.st_size, DNN_IMAGE_MAX_BYTES);
		fclose(f);
		return -1;
	}
	size_t len = (size_t)st.st_size;
	unsigned char *buf = malloc(len ? len : 1);
	if (!buf) {
		snprintf(why, whylen, "out of memory");
		fclose(f);
		return -1;
	}
	size_t got = fread(buf, 1, len, f);
	fclose(f);
	if (got != len) {
		snprintf(why, whylen, "read %zu of %zu bytes", got, len);
		free(buf);
		return -1;
	}
	*bufp = buf, *lenp = len;
	return 0;
}

int dnn_image_decode_crop(float *dst, const char *path, int C, int H, int W, int augment, uint64_t rng,
			  const float *mean, const float *std, char *why, size_t whylen)
{
	unsigned char *buf;
	size_t len;
	if (read_file(path, &buf, &len, why, whylen) != 0)
		return -1;
	int rc = dnn_image_decode_crop_mem(dst, buf, len, C, H, W, augment, rng, mean, std, why, whylen);
	free(buf);
	return rc;
}

int dnn_image_decode_crop_raw(float *dst, const char *path, int C, int H, int W, int augment, uint64_t rng, int *flip,
			      char *why, size_t whylen)
{
	unsigned char *buf;
	size_t len;
	if (read_file(path, &buf, &len, why, whylen) != 0)
		return -1;
	int rc = decode_resample(dst, buf, len, C, H, W, augment, rng, 0, flip, why, whylen);
	free(buf);
	return rc;
}

/* ---------------------------------------------------------------- the task */
int dnn_load_images_cpu(float *x, int32_t *y, const dnn_load_images_args *a)
{
	const size_t per = (size_t)a->C * a->H * a->W;
	char *bad = calloc((size_t)a->n, 1);
	int nbad = 0, good = -1;
	for (int i = 0; i < a->n; i++) {
		const int k = a->idx[i];
		char why[256];
		uint64_t rng = dnn_image_sample_rng(a->seed, k);
		y[i] = a->labels[k];
		if (dnn_image_decode_crop(x + i * per, a->paths[k], a->C, a->H, a->W, a->augment, rng, a->mean, a->std,
					  why, sizeof(why)) != 0) {
			if (bad)
				bad[i] = 1;
			nbad++;
			if (a->on_bad)
				a->on_bad(a->ctx, k, why);
		} else if (good < 0) {
			good = i;
		}
	}
	/* Unreadable samples take the place of a readable one of the chunk (or zeros: the mean). */
	for (int i = 0; bad && nbad && i < a->n; i++)
		if (bad[i]) {
			if (good >= 0) {
				memcpy(x + i * per, x + good * per, per * sizeof(float));
				y[i] = y[good];
			} else {
				memset(x + i * per, 0, per * sizeof(float));
			}
		}
	free(bad);
	return nbad;
}

uint64_t dnn_image_sample_rng(uint64_t seed, int k)
{
	uint64_t rng = seed ^ (DNN_RNG_GOLDEN * (uint64_t)(k + 1));
	dnn_splitmix64(&rng);
	return rng;
}

int dnn_load_images_stage(float *raw, int32_t *y, int32_t *map, float *scale, float *shift, const dnn_load_images_args *a)
{
	const size_t per = (size_t)a->C * a->H * a->W;
	for (int c = 0; c < a->C; c++)
		scale[c] = 1.0f / (255.0f * a->std[c]), shift[c] = a->mean[c] / a->std[c];
	int nbad = 0, good = -1;
	for (int i = 0; i < a->n; i++) {
		const int k = a->idx[i];
		char why[256];
		int flip = 0;
		y[i] = a->labels[k];
		if (dnn_image_decode_crop_raw(raw + i * per, a->paths[k], a->C, a->H, a->W, a->augment,
					      dnn_image_sample_rng(a->seed, k), &flip, why, sizeof(why)) != 0) {
			map[i] = -1;
			nbad++;
			if (a->on_bad)
				a->on_bad(a->ctx, k, why);
		} else {
			map[i] = (int32_t)(((uint32_t)i << 1) | (uint32_t)flip);
			if (good < 0)
				good = i;
		}
	}
	/* As the CPU form: an unreadable sample is a copy of the chunk's first readable one (pixels
	 * and label), or zeros when there is none (map stays -1). */
	for (int i = 0; nbad && good >= 0 && i < a->n; i++)
		if (map[i] < 0)
			map[i] = map[good], y[i] = y[good];
	return nbad;
}

static void load_images_cpu_task(void *buffers[], void *cl_arg)
{
	const dnn_load_images_args *a = cl_arg;
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[0]) == (size_t)a->n * a->C * a->H * a->W);
	STARPU_ASSERT(STARPU_VECTOR_GET_NX(buffers[1]) == (size_t)a->n);
	dnn_load_images_cpu((float *)STARPU_VECTOR_GET_PTR(buffers[0]), (int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]), a);
}

/* Default (data-size) footprint: the files differ at every step, the cost roughly does not. */
static struct starpu_perfmodel load_images_model = {
	.type = STARPU_HISTORY_BASED,
	.symbol = "dnn_cl_load_images",
};

struct starpu_codelet cl_load_images = {
	.name = "cl_load_images",
	.cpu_funcs = {load_images_cpu_task},
	.cpu_funcs_name = {"load_images_cpu_task"},
	.cuda_funcs = {DNN_CUDA_FN(dnn_load_images_cuda)},
	.cuda_flags = {STARPU_CUDA_ASYNC},
	.nbuffers = 2,
	.modes = {STARPU_W, STARPU_W},
	.model = &load_images_model,
	.color = DNN_COLOR_DATA,
};
DNN_CUDA_DECLARED(cl_load_images);

int dnn_insert_load_images(const dnn_task_opts *o, const dnn_load_images_args *a, starpu_data_handle_t x, starpu_data_handle_t y)
{
	size_t sz = sizeof(dnn_load_images_args) + (size_t)a->n * sizeof(int);
	return DNN_TASK_INSERT_CL_ARGS(o, &cl_load_images, "load_images", dnn_args_dup(a, sz), sz, STARPU_W, x, STARPU_W, y);
}
