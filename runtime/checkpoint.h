/* checkpoint.h — model checkpoints, written atomically.
 *
 * Format (little-endian), version 1:
 *   magic "ANPCKPT\0" (8 bytes) | u32 version | u32 header_len | header | payload | u32 crc32
 *   header: u64 net_fingerprint, u64 step, u32 epoch, u32 ntensors, u64 rng_state,
 *           u32 nclasses, class names (u32 len + bytes each), per tensor: u32 name_len, name, u64 n
 *   payload: for each tensor, n float32 values (parameters, then optimiser momentum, then
 *            batch-norm running statistics — whatever the caller registers, in order)
 *   crc32 (zlib) covers everything before it.
 * Writes go to PATH.tmp.<pid>, fsync, rename over PATH, fsync of the directory, so a crash at
 * any moment leaves the previous checkpoint intact.
 * Loading verifies magic, version, sizes, the CRC, the fingerprint and every tensor's name and
 * length before touching the caller's buffers; any mismatch is one line in err naming the file.
 */
#ifndef DNN_CHECKPOINT_H
#define DNN_CHECKPOINT_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
	const char *name; // e.g. "c1.weight", "c1.weight.momentum", "bn1.running"
	float *data;
	uint64_t n;
} dnn_ckpt_tensor;

typedef struct {
	uint64_t net_fingerprint; // hash of the net's structure (dnn_graph_fingerprint)
	uint64_t step;            // optimiser steps done
	uint32_t epoch;           // completed epochs
	uint64_t rng_state;
	uint32_t nclasses;        // 0, or number of class names
	char **class_names;       // on load: allocated (free with dnn_ckpt_free_names)
} dnn_ckpt_meta;

int dnn_checkpoint_save(const char *path, const dnn_ckpt_meta *meta, const dnn_ckpt_tensor *tensors,
			int ntensors, char *err, size_t errlen);
/* Fills tensors[i].data (which must already have length tensors[i].n) and meta. Checks that
 * the file's fingerprint equals meta->net_fingerprint as passed in (0 = do not check). */
int dnn_checkpoint_load(const char *path, dnn_ckpt_meta *meta, const dnn_ckpt_tensor *tensors,
			int ntensors, char *err, size_t errlen);
void dnn_ckpt_free_names(dnn_ckpt_meta *meta);
/* Reads only the header's fixed fields and class names (no CRC check, no tensors): what predict
 * needs to shape the net before loading. The full dnn_checkpoint_load still verifies the file. */
int dnn_checkpoint_read_classes(const char *path, dnn_ckpt_meta *meta, char *err, size_t errlen);
#endif
