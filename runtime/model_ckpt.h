/* model_ckpt.h — a model's checkpoint: which tensors go into the file (checkpoint.h: the format)
 * and how they are taken from / put back into StarPU's handles. Shared by train, eval and predict. */
#ifndef DNN_MODEL_CKPT_H
#define DNN_MODEL_CKPT_H
#include <stddef.h>
#include <stdint.h>

#include "checkpoint.h" /* dnn_ckpt_meta */
#include "model.h"
#include "starpu_anp.h"

/* Write m (parameters, momentum, batch-norm running statistics, input normalisation, class names)
 * with step, epoch and the run's seed (the checkpoint's rng_state). Refuses (-1, err) a model
 * that holds a non-finite value, so the last good checkpoint stays. Returns 0 or -1 with err. */
int dnn_model_save(dnn_model *m, const char *path, uint64_t step, uint32_t epoch, uint64_t seed, char *err,
		   size_t errlen);

/* Load the checkpoint at path into m (the same net: dnn_ckpt_check_net, then the fingerprint and
 * every tensor's name and size, batch-norm running statistics at m->running_n; an image
 * folder's class names must be the checkpoint's). step, epoch, seed: NULL or filled.
 * Returns 0, or -1 with one line in err. */
int dnn_model_load(dnn_model *m, const char *path, uint64_t *step, uint32_t *epoch, uint64_t *seed, char *err,
		   size_t errlen);

/* The one test of "the same net" (graph.h) between a net g and the checkpoint at path whose header
 * is info (dnn_checkpoint_read_info): its net text (versions 2 and 3) against g's canonical text,
 * node by node and key by key; a checkpoint without its net text (version 1) by the hash it stored
 * (dnn_graph_structure_hash). Every command that pairs a net with a checkpoint calls it: train
 * --resume (dnn_cmd_check_net, before StarPU starts), eval, predict and export (dnn_ckpt_open_net
 * when --net is given; a version-1 checkpoint once the net is rewritten), and dnn_model_load. Returns
 * 0; 1 (a damaged file: its CRC is checked before a refusal, or a net text that does not parse);
 * 2, the usage error of every command, with
 * "--net NET is not the net of PATH: node 4 (d1): p=0.899999976 in --net, p=0.25 in the
 * checkpoint[ (hint)]" in err. */
int dnn_ckpt_check_net(const dnn_graph *g, const char *net, const char *path, const dnn_ckpt_meta *info,
		       const char *hint, char *err, size_t errlen);

/* The net of checkpoint o->checkpoint_in, for eval, predict and export. A checkpoint of version 2
 * carries it (every rewrite included): then --net and --input are optional, and given, they must
 * agree with it (--net once sized to the checkpoint's input and classes). A version-1 checkpoint
 * needs --net (and --input), as before. The file is verified (size, CRC) first. name (may be
 * NULL) gets the net's name for result lines: --net's, or the one the checkpoint records.
 * Returns 0, 1 (runtime error: bad file) or 2 (usage error: missing or disagreeing --net or
 * --input), with one line in err. */
int dnn_ckpt_open_net(dnn_graph *g, const dnn_train_opts *o, char *name, size_t namelen, char *err, size_t errlen);
/* dnn_ckpt_open_net, then an image folder's class count (data_dir, may be NULL), then (version 1)
 * dnn_ckpt_check_net; prints the error line itself and returns the exit status (0, 1 or 2). */
int dnn_ckpt_open_graph(dnn_graph *g, const dnn_train_opts *o, const char *data_dir);
/* dnn_ckpt_open_graph without a data folder, then the checkpoint's class names into meta (freed
 * with dnn_ckpt_free_names) and its class count into g: what predict and export start from.
 * Prints the error line itself and returns the exit status (0, 1 or 2). */
int dnn_ckpt_open_graph_classes(dnn_graph *g, const dnn_train_opts *o, dnn_ckpt_meta *meta);
#endif
