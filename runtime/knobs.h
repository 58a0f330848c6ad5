/* knobs.h — the DNN_* environment variables, read once at start-up (README "Environment
 * variables"). One policy: a bad value is a usage error (the app prints `error: <line>`, exit 2),
 * the line naming the variable and the values it accepts. The layers below runtime/ never read
 * the environment: dnn_knobs_apply hands them the parsed values through their setters. */
#ifndef DNN_KNOBS_H
#define DNN_KNOBS_H
#include <stddef.h>

#include "conv2d.h"      /* dnn_conv_algo */
#include "dnn_codelet.h" /* dnn_cuda_env */
#include "starpu_anp.h"  /* dnn_knobs_load */

typedef struct {
	int fuse;                /* DNN_FUSE=0|1|2 [1] (graph/fuse.h) */
	dnn_conv_algo conv_algo; /* DNN_CONV_ALGO=auto|im2col|winograd|winograd4 [auto] (codelets/conv2d.h) */
	dnn_cuda_env cuda;       /* DNN_CUDA_MATH=tf32|fp32 [tf32], DNN_CUDA_WORKSPACE_MB=0..65536 */
	const char *blas_coretype; /* DNN_BLAS_CORETYPE=auto|keep, NULL when unset (runtime/cpu_kernels.h) */
	const char *traces_dir;  /* DNN_TRACES_DIR: a folder holding trace_summary.py, or NULL */
	int breakdown;           /* DNN_BREAKDOWN=0|1|2 [0]: the result line's time breakdown (breakdown.h);
				  * 2: also each rank's critical path by codelet on stderr */
	int allreduce_prio;      /* DNN_ALLREDUCE_PRIO=0|1|2 [2]: first layers' all-reduce first (graph/dist.h) */
	int pin_by_mask;         /* DNN_PIN_MODE=mask|queue [mask]: how pinned tasks are pinned (dnn_codelet.h) */
	int allreduce_on;        /* DNN_ALLREDUCE_ON=device|host|host-update [device]: where the hops run (graph/dist.h) */
	int test_sum_reverse;    /* DNN_TEST_SUM_ORDER=tree|reverse [tree]: tests only, another fixed order of the
				  * sums over chunks (graph/chunksum.h), to show a test sees an order change */
} dnn_knobs;

/* Reads the variables into *k (the defaults where unset or empty); no side effect. 0, or -1 with
 * one line in err. */
int dnn_knobs_parse(dnn_knobs *k, char *err, size_t errlen);
/* Hands the values to the layers that use them (fusion level, conv algorithm, CUDA math and
 * workspace, the traces folder). */
void dnn_knobs_apply(const dnn_knobs *k);
/* The DNN_TRACES_DIR in effect (traces/trace.c), NULL when unset. */
const char *dnn_knobs_traces_dir(void);
/* DNN_BLAS_CORETYPE in effect ("auto", "keep"), NULL when unset. */
const char *dnn_knobs_blas_coretype(void);
/* DNN_BREAKDOWN in effect (0 or 1). */
int dnn_knobs_breakdown(void);
/* dnn_knobs_load (starpu_anp.h) = parse + apply; dnn_knobs_loaded: it succeeded once. */
int dnn_knobs_loaded(void);
#endif
