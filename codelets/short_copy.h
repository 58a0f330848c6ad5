/* short_copy.h — copies and zero fills of a few floats without a libc call, for the CPU
 * kernels' row loops.
 *
 * A memcpy or memset of a variable, small length is a call into libc (~10-20 ns), and GCC turns
 * a plain element loop into one too. The Winograd and im2col kernels did millions of them per
 * step on the ResNets' 7-, 14- and 28-wide rows: 3.6 M calls per step of resnet8 at batch 256,
 * mostly of 25-85 bytes (counted by bench/libc_copies.sh, 2026-12-06). These helpers copy in
 * fixed 8- and 4-float moves, which GCC inlines, and finish with a fall-through switch; lengths
 * past SHORT_COPY_MAX floats still go to libc, whose call cost is then small. */
#ifndef DNN_SHORT_COPY_H
#define DNN_SHORT_COPY_H
#include <string.h>

#define SHORT_COPY_MAX 64

/* d[0..n) = s[0..n) (no overlap; n <= 0: nothing). */
static inline void dnn_copy_floats(float *restrict d, const float *restrict s, long n)
{
	if (n > SHORT_COPY_MAX) {
		memcpy(d, s, (size_t)n * sizeof(float));
		return;
	}
	long i = 0;
	for (; i + 8 <= n; i += 8)
		memcpy(d + i, s + i, 8 * sizeof(float)); // a fixed size: inlined, no call
	if (i + 4 <= n) {
		memcpy(d + i, s + i, 4 * sizeof(float));
		i += 4;
	}
	switch (n - i) {
	case 3: d[i + 2] = s[i + 2]; /* fall through */
	case 2: d[i + 1] = s[i + 1]; /* fall through */
	case 1: d[i] = s[i]; /* fall through */
	default: break;
	}
}

/* d[0..n) = 0 (n <= 0: nothing). */
static inline void dnn_zero_floats(float *d, long n)
{
	if (n > SHORT_COPY_MAX) {
		memset(d, 0, (size_t)n * sizeof(float));
		return;
	}
	long i = 0;
	for (; i + 8 <= n; i += 8)
		memset(d + i, 0, 8 * sizeof(float));
	if (i + 4 <= n) {
		memset(d + i, 0, 4 * sizeof(float));
		i += 4;
	}
	switch (n - i) {
	case 3: d[i + 2] = 0.0f; /* fall through */
	case 2: d[i + 1] = 0.0f; /* fall through */
	case 1: d[i] = 0.0f; /* fall through */
	default: break;
	}
}

#endif
