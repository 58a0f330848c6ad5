/* gradclip.h — global gradient-norm clipping as tasks of the step's DAG (train --clip-grad-norm X:
 * dnn_optim_config.clip_norm > 0; the codelets and the formula: codelets/clip.h).
 *
 * Once a step's gradients are complete (summed over the chunks in their fixed order, chunksum.h,
 * and under sync across ranks all-reduced, dist.c), per parameter tensor q one task writes the sum
 * of squares of its gradient scaled by 1/global batch into its own 1-element double handle
 * (clip_sumsq[q]); one task reads all of them in parameter order (STARPU_DATA_MODE_ARRAY) and writes
 * the step's norm (clip_norm[slot], kept for the metrics) and coefficient (clip_coef[slot]); every
 * update of the step reads the coefficient (optim.h). The order of every sum is fixed (inside a
 * tensor: codelets/clip.h; across tensors: parameter order), so the coefficient is the same bits
 * under every scheduler, worker count and kind of worker, and on every rank of a sync run, which
 * all compute it from the same all-reduced gradients. The cost: one pass over the gradients and
 * nparams + 1 small tasks per step, and the updates wait for the last gradient (sync: its
 * all-reduce) instead of starting layer by layer.
 */
#ifndef DNN_GRADCLIP_H
#define DNN_GRADCLIP_H
#include <starpu.h>

#include "dnn_codelet.h"
#include "model.h"

/* Register a training plan's handles (per parameter a sum, per slot a coefficient and a norm);
 * nothing for an evaluation plan. 0, or -1 with one line in err. */
int dnn_clip_plan_register(dnn_plan *p, char *err, size_t errlen);
void dnn_clip_plan_free(dnn_plan *p);
/* The clipping tasks of the step in `slot`: per parameter q the sum of squares of grad[q] (the
 * handle its update will read; options opts[q], or local tasks when opts is NULL), then the
 * coefficient with max_norm > 0 (options copt, NULL: local). Returns the tasks inserted, or a
 * negative errno. */
int dnn_clip_submit(dnn_plan *p, int slot, const starpu_data_handle_t *grad, const dnn_task_opts *opts,
		    const dnn_task_opts *copt, float max_norm);
/* The coefficient the step in `slot` updates with (after dnn_clip_submit). */
starpu_data_handle_t dnn_clip_coef(const dnn_plan *p, int slot);
/* After dnn_wait_step(slot): the global norm of that step's gradients before clipping (the whole
 * global batch's mean gradient), or NaN when that step was not clipped. 0, or -1 with err. */
int dnn_plan_grad_norm(dnn_plan *p, int slot, double *norm, char *err, size_t errlen);
#endif
