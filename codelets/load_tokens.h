/* load_tokens.h — input loading of a language model as a task: the windows of a token stream
 * (runtime/dataset.h "token streams") into a chunk's input tensor and its labels. Sample i of the
 * chunk is the window starting at token idx[i] * stride: x (n, T) = tokens[s..s+T) as floats
 * (exact: ids < 2^16), y (n, T) = tokens[s+1..s+T+1) (the next token at every position).
 * CPU and CUDA forms: the CUDA one gathers the n windows of T+1 tokens on the host into the CUDA
 * worker's pinned staging block (dnn_staging.h), copies them on the worker's stream and expands
 * them on the device; its results are the CPU form's, bit for bit. */
#ifndef DNN_LOAD_TOKENS_H
#define DNN_LOAD_TOKENS_H
#include <stdint.h>
#include <starpu.h>

#include "dnn_codelet.h"

typedef struct {
	const uint16_t *tokens; // (ntokens) of the data set: every window [s, s+T] lies inside
	int T, stride;
	int n;                  // samples in this chunk
	int idx[];              // (n) window indices
} dnn_load_tokens_args;

void dnn_load_tokens_cpu(float *x, int32_t *y, const dnn_load_tokens_args *a);
/* The CUDA form's host half: the chunk's windows w (n, T+1), gathered from the stream. */
void dnn_load_tokens_stage(uint16_t *w, const dnn_load_tokens_args *a);
void dnn_load_tokens_cuda(void *buffers[], void *cl_arg);

/* (W x, W labels) */
extern struct starpu_codelet cl_load_tokens;
/* Copies idx[0..n) into the task's argument block. */
int dnn_insert_load_tokens(const dnn_task_opts *o, const uint16_t *tokens, int T, int stride, const int *idx, int n,
			   starpu_data_handle_t x, starpu_data_handle_t y);
#endif
