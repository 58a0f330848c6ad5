/* bnstats.h — batch norm over the global batch (--batchnorm global; docs/batchnorm.md).
 *
 * With local statistics (the default of PyTorch DDP) each chunk normalises with its own mean and
 * variance, so a net with batch norm trains differently with K chunks or N ranks. Global
 * statistics make every batch norm see the whole global batch: per step and batchnorm node, each
 * chunk adds its per-channel sums (codelets/batchnorm.h) into its own partial handle, summed in a
 * fixed order into one handle of this process (chunksum.h; STARPU_REDUX with --deterministic
 * off, as the weight gradients), the processes' handles are summed over the ranks
 * (StarPU-MPI: a STARPU_MPI_REDUX contribution per rank, starpu_mpi_redux_data into rank 0, sent
 * to every rank: graph/dist.c's tree), and every chunk normalises with the sums of the global
 * batch. The backward does the same with its two sums. All of it is tasks of the step's DAG;
 * nothing waits on the host. graph/ops/batchnorm.c submits them; this file owns the handles.
 */
#ifndef DNN_BNSTATS_H
#define DNN_BNSTATS_H
#include "model.h"

enum { DNN_BN_FWD = 0, DNN_BN_BWD = 1 };

/* Global (1) or local (0) statistics for a training plan: registers the sum handles of every
 * batchnorm node (and, for a multi-rank sync plan, the cross-rank ones; every rank calls it in
 * the same order). Global statistics in a multi-rank async plan cover this rank's shard (its
 * replica trains alone). 0, or -1 with one line in err. */
int dnn_plan_set_batchnorm(dnn_plan *p, int global, char *err, size_t errlen);
void dnn_plan_bn_destroy(dnn_plan *p);
/* The handle this process's chunks' sums of node i end in (slot, phase), which chunk 0 zeroes. */
starpu_data_handle_t dnn_bn_sums_local(const dnn_plan *p, int i, int slot, int phase);
/* The handle chunk c's task adds its sums into, and its mode: the one local handle in
 * STARPU_REDUX (plan->sum_redux), else chunk c's partial sums in STARPU_RW (c = 0: the local
 * handle), which dnn_bn_sums_reduce adds in a fixed order (chunksum.h). */
starpu_data_handle_t dnn_bn_sums_chunk(const dnn_plan *p, int i, int slot, int phase, int c, int *mode);
/* Register the chunks' partial sums of every batchnorm node (global statistics, fixed-order sums,
 * 2 chunks or more), or free them; dnn_plan_set_batchnorm and dnn_plan_set_sum_redux call it. */
int dnn_bn_parts_register(dnn_plan *p, char *err, size_t errlen);
/* After the last chunk's sums: the chunks' partial sums added in a fixed order (unless
 * sum_redux), then *out = the handle holding the global batch's sums (the local one
 * in one process; in a multi-rank sync plan, their sum over the ranks, which this submits). 0 or
 * a negative errno. */
int dnn_bn_sums_reduce(dnn_plan *p, int i, int slot, int phase, starpu_data_handle_t *out);
#endif
