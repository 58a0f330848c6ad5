/* load_batch.h — input loading as a task: gathers samples of an in-memory dataset into a
 * chunk's input tensor (uint8 -> float, per-channel normalised) and its label vector.
 * CPU and CUDA forms: the CUDA one gathers the samples on the host into the CUDA worker's pinned
 * staging block (dnn_staging.h), copies it on the worker's stream and normalises on the device;
 * its results are the CPU form's, bit for bit. */
#ifndef DNN_LOAD_BATCH_H
#define DNN_LOAD_BATCH_H
#include <stdint.h>
#include <starpu.h>

#include "dnn_codelet.h"

typedef struct {
	const uint8_t *images; // (n_total, C, H, W) of the dataset
	const int32_t *labels; // (n_total)
	const float *mean, *std; // (C): x = (pixel/255 - mean) / std
	int C, HW;
	int n;       // samples in this chunk
	int idx[];   // (n) dataset indices
} dnn_load_batch_args;

void dnn_load_batch_cpu(float *x, int32_t *y, const dnn_load_batch_args *a);
/* The CUDA form's host half: the chunk's pixels px (n, C, HW) and labels y (n) gathered from the
 * data set, and the normalisation's factors, x = px * scale[c] - shift[c] (the CPU kernel's). */
void dnn_load_batch_stage(uint8_t *px, int32_t *y, float *scale, float *shift, const dnn_load_batch_args *a);
void dnn_load_batch_cuda(void *buffers[], void *cl_arg);

/* (W x, W labels) */
extern struct starpu_codelet cl_load_batch;
/* Copies idx[0..n) into the task's argument block. */
int dnn_insert_load_batch(const dnn_task_opts *o, const uint8_t *images, const int32_t *labels, const float *mean,
			   const float *std, int C, int HW, const int *idx, int n,
			   starpu_data_handle_t x, starpu_data_handle_t y);
#endif
