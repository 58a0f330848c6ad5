/* exec_config.h — the execution config: every project environment variable (DNN_*, ANP_*),
 * parsed once by runtime/knobs.c (its only reader of the environment) and carried from there.
 *
 * Nothing below runtime/ reads the environment or keeps a process-wide copy of these values:
 * the plan holds a copy (model.h dnn_plan.cfg, given to dnn_plan_create) and hands each task
 * what it needs: the conv algorithm in the conv's argument struct (conv2d.h dnn_conv2d_args.algo),
 * the pinning mode in the task's insert options (dnn_codelet.h dnn_task_opts.pin_queue), the
 * fusion level to graph/fuse.c. The start-up calls take theirs as arguments (dnn_cuda_init: cuda,
 * dnn_sim_models_install: sim, dnn_cpu_kernels_init: the BLAS fields). The remaining fields are
 * runtime/'s own (runtime/knobs.h dnn_knobs_get). */
#ifndef DNN_EXEC_CONFIG_H
#define DNN_EXEC_CONFIG_H

#include "conv2d.h"        /* dnn_conv_algo */
#include "dnn_codelet.h"   /* dnn_cuda_env */
#include "dnn_sim_model.h" /* dnn_sim_env */

typedef struct dnn_exec_config {
	/* ---- carried by the plan to graph/ and the tasks */
	int fuse;                /* DNN_FUSE=0|1|2|3 [1] (fuse.h) */
	dnn_conv_algo conv_algo; /* DNN_CONV_ALGO=auto|im2col|winograd|winograd4|onednn [auto] (codelets/conv2d.h) */
	int pin_by_mask;         /* DNN_PIN_MODE=mask|queue [mask]: how pinned tasks are pinned (dnn_codelet.h) */
	int allreduce_prio;      /* DNN_ALLREDUCE_PRIO=0|1|2 [2]: first layers' all-reduce first (dist.h) */
	int allreduce_on;        /* DNN_ALLREDUCE_ON=device|host|host-update [device]: where the hops run (dist.h) */
	int bf16;                /* not an environment variable: --precision bf16 (dnn_train_opts.bf16), set by
				  * dnn_cmd_train/eval (runtime/knobs.h dnn_knobs_set_bf16): dense, lm_head and
				  * attention in bf16 */
	int bf16_act;            /* DNN_BF16_ACTIVATIONS=0|1 [1]: with --precision bf16, activations whose writer
				  * and every reader take bf16 are stored in bf16 (model.h dnn_plan.y_bf16); 0:
				  * every activation fp32 (to measure what the storage gives) */
	int cpu_mask_bf16;       /* DNN_CPU_MASK=avx512_bf16: tests only, the CPU is taken to lack AVX512_BF16
				  * (dnn_knobs_load hands it to codelets/gemm_bf16.h dnn_cpu_mask_bf16), so the
				  * refusal of --precision bf16 can be tested on a CPU that has it */
	int test_sum_reverse;    /* DNN_TEST_SUM_ORDER=tree|reverse [tree]: tests only, another fixed order of the
				  * sums over chunks (graph/chunksum.h), to show a test sees an order change */
	/* ---- handed by runtime/ to the start-up calls */
	dnn_cuda_env cuda;       /* DNN_CUDA_MATH=tf32|fp32 [tf32], DNN_CUDA_WORKSPACE_MB=0..65536 (dnn_cuda_init) */
	dnn_sim_env sim;         /* ANP_SIM_* (dnn_sim_model.h; the simulation build) */
	const char *blas_coretype;   /* DNN_BLAS_CORETYPE=auto|keep, NULL when unset (runtime/cpu_kernels.h) */
	const char *blas_reexec_from; /* DNN_BLAS_REEXEC_FROM: set by runtime/cpu_kernels.c for the process it
				       * re-executes (the kernels OpenBLAS had chosen), or NULL */
	/* ---- runtime/'s own */
	const char *traces_dir;  /* DNN_TRACES_DIR: a folder holding trace_summary.py, or NULL */
	int breakdown;           /* DNN_BREAKDOWN=0|1|2 [0]: the result line's time breakdown (breakdown.h);
				  * 2: also each rank's critical path by codelet on stderr */
	const char *host;        /* ANP_HOST: the host name the step watchdog reports, or NULL (gethostname) */
	const char *self_exe;    /* STARPU_ANP: the starpu_anp binary traces/sweep.sh runs, or NULL */
	const char *cache_dir;   /* STARPU_ANP_CACHE (scripts/bootstrap.sh's cache, which holds the default
				  * text corpus), or NULL: $HOME/.cache/starpu-anp */
	const char *home;        /* HOME, for that default, or NULL */
} dnn_exec_config;

/* The defaults: what an empty environment gives (dnn_knobs_parse). */
#define DNN_EXEC_CONFIG_DEFAULTS                                                                   \
	{                                                                                          \
		.fuse = 1, .conv_algo = DNN_CONV_ALGO_AUTO, .pin_by_mask = 1, .allreduce_prio = 2, \
		.allreduce_on = 0, .bf16_act = 1, .cuda = {.fp32 = 0, .workspace_mb = -1}                         \
	}
#endif
