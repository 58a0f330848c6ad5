/* chunksum.h — sums over chunks in an order fixed by chunk index (--deterministic on, the
 * default; docs/ARCHITECTURE.md "The training DAG").
 *
 * StarPU's STARPU_REDUX gives each worker a private copy, and adds the copies in the order the
 * workers finish: with two workers or more the same command gives other bits from run to run,
 * and a scheduler or worker count changes them. Here each chunk c accumulates (+=) into its
 * own partial handle instead, part[c] (part[0] is the summed handle itself: a parameter's hg,
 * a batch norm's sums), and a fixed pairwise tree of add tasks over chunk index sums them into
 * part[0]:
 *     stride 1: part[0] += part[1], part[2] += part[3], ...
 *     stride 2: part[0] += part[2], part[4] += part[6], ...     and so on,
 * each add zeroing its source (cl_vec_add_clear), so the partials are zero again for the next
 * step's backward. StarPU still places and overlaps these tasks freely; only their operands are
 * fixed, so the sum is the same bits under every scheduler, worker count and --pin-chunks.
 * The cost: K - 1 partial copies of every gradient and K - 1 adds per tensor and step.
 * --deterministic off keeps the REDUX path (plan->sum_redux).
 */
#ifndef DNN_CHUNKSUM_H
#define DNN_CHUNKSUM_H
#include <starpu.h>

#include "dnn_codelet.h"
#include "model.h"

/* Submit the fixed-order sum of part[0..K) into part[0], zeroing part[1..K). Float or double
 * vectors of one length. Returns the number of tasks inserted (K - 1), or a negative errno.
 * reverse (the plan's cfg.test_sum_reverse: a test-only knob, DNN_TEST_SUM_ORDER): 0 the pairwise
 * tree [default]; 1 a chain from the last chunk down, part[0] + (part[1] + (... + part[K-1])),
 * another fixed order, which the determinism tests use to prove they see an order change. */
int dnn_chunksum_submit(const dnn_task_opts *o, starpu_data_handle_t *part, int K, int reverse);

/* A training plan's sums over chunks: sum_redux 0 (fixed order, the default of dnn_plan_create)
 * registers every parameter's K - 1 partial gradients (plan->gpart) and,
 * under --batchnorm global, the batch-norm sums' (bnstats.c); 1 frees them and returns to
 * StarPU's REDUX. 0, or -1 with one line in err. */
int dnn_plan_set_sum_redux(dnn_plan *p, int sum_redux, char *err, size_t errlen);
/* Register the parameters' partial gradients (unless p->sum_redux or not training; nothing is
 * allocated yet), or free them. */
int dnn_chunksum_plan_register(dnn_plan *p, char *err, size_t errlen);
void dnn_chunksum_plan_free(dnn_plan *p);
/* After every chunk's backward: each parameter's tree (none under sum_redux), the last
 * parameters' first, into its hg, which the update (or graph/dist.c) reads. 0 or a negative errno. */
int dnn_chunksum_submit_grads(dnn_plan *p);
/* Chunk c's handle for parameter q's gradient and the access mode its backward task uses:
 * under sum_redux the parameter's hg in STARPU_REDUX, else partial c in STARPU_RW. */
starpu_data_handle_t dnn_chunksum_grad(const dnn_plan *p, int q, int c, int *mode);
#endif
