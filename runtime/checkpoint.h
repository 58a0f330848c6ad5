/* checkpoint.h — model checkpoints, written atomically.
 *
 * Format (little-endian), version 3:
 *   magic "ANPCKPT\0" (8 bytes) | u32 version | u32 header_len | header | payload | u32 crc32
 *   header: u64 net_fingerprint, u64 step, u32 epoch, u32 ntensors, u64 rng_state,
 *           u32 nclasses, class names (u32 len + bytes each),
 *           u32 net_len, net text (net_len bytes, no NUL; 0 = none): the net file that rebuilds
 *           the model, after every rewrite (graph.h dnn_graph_to_text),
 *           per tensor: u32 name_len, name, u64 n (its float count: what the loader checks
 *           each tensor's size against)
 *   payload: for each tensor, n float32 values (parameters, then optimiser momentum, then
 *            batch-norm running statistics — whatever the caller registers, in order)
 *   crc32 (zlib) covers everything before it.
 * Older versions still load: version 2 has the same layout; version 1 has no net_len and no net
 * text (net_text NULL). What the fingerprint hashes is the caller's: a model checkpoint stores
 * dnn_graph_fingerprint (the canonical net text) from version 3 on, dnn_graph_structure_hash in
 * versions 1 and 2 (model_ckpt.c knows which to expect).
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
	uint64_t net_fingerprint; // hash of the net (the caller's; model_ckpt.c: dnn_graph_fingerprint)
	uint64_t step;            // optimiser steps done
	uint32_t epoch;           // completed epochs
	uint64_t rng_state;
	uint32_t nclasses;        // 0, or number of class names
	char **class_names;       // on load: allocated (free with dnn_ckpt_free_names)
	char *net_text;           // NULL or the net file text; on load: allocated (dnn_ckpt_free_names)
	uint32_t version;         // save: 0 = current (3), or an older one (1: no net text); load: the file's
	char state[32];           // load, read_info: tensor 1's name after its last '.' ("" if none, or too
	                          // long): a model checkpoint's first optimiser state (model_ckpt.c)
} dnn_ckpt_meta;
#define DNN_CKPT_VERSION 3u

int dnn_checkpoint_save(const char *path, const dnn_ckpt_meta *meta, const dnn_ckpt_tensor *tensors,
			int ntensors, char *err, size_t errlen);
/* Fills tensors[i].data (which must already have length tensors[i].n) and meta. Checks that
 * the file's fingerprint equals meta->net_fingerprint as passed in (0 = do not check). */
int dnn_checkpoint_load(const char *path, dnn_ckpt_meta *meta, const dnn_ckpt_tensor *tensors,
			int ntensors, char *err, size_t errlen);
/* Frees what a load allocated: the class names and the net text. */
void dnn_ckpt_free_names(dnn_ckpt_meta *meta);
/* Reads the header alone, whatever tensors it lists: the fixed fields, class names, version
 * and net text into meta (free with dnn_ckpt_free_names). With verify, also checks that the file
 * is as long as its header says and its CRC: a 0 then means dnn_checkpoint_load can fail only on
 * a mismatch with the caller's tensors. What eval/predict/export read to rebuild the net. */
int dnn_checkpoint_read_info(const char *path, dnn_ckpt_meta *meta, int verify, char *err, size_t errlen);
/* dnn_checkpoint_read_info without verify (the header only, no CRC check): what --resume and
 * predict read before loading; the full dnn_checkpoint_load still verifies the file. */
int dnn_checkpoint_read_classes(const char *path, dnn_ckpt_meta *meta, char *err, size_t errlen);
#endif
