/* dnn_sim_model.h — the perf models of the simulation build (docs/SIMULATION.md).
 *
 * Under SimGrid no kernel runs: each task lasts what its codelet's perf model says. The
 * simulation build replaces every codelet's history model by a per-worker cost function:
 *   - CPU workers: the mean measured on this machine for the task's exact shape (footprint), read
 *     from the calibrated history files DIR/codelets/45/<symbol>.<$ANP_SIM_CPU_HOST>, for each DIR of
 *     $ANP_SIM_CPU_MODELS (DIR[:DIR...], searched in order: the first that has the shape wins);
 *   - CUDA workers: the same from calibrated GPU files when $ANP_SIM_CUDA_MODELS and
 *     $ANP_SIM_CUDA_HOST name them, else a roofline estimate from $ANP_SIM_GPU
 *     ("name:peak_gflops:mem_gbs:eff_compute:eff_memory:launch_us"):
 *       t = launch_us + max(flops / (peak x eff_compute), bytes / (bandwidth x eff_memory)),
 *     flops being the task's STARPU_FLOPS and bytes the size of all its buffers (attention and
 *     embed's backward add what their CUDA kernels do beyond that: dnn_sim_model.c, kernel_extra).
 * A task whose shape has no calibrated entry never runs on a guess: the first one records a
 * worker error naming the codelet, the worker kind and the shape, and the run stops with it.
 * The codelets covered are those of the dnn_cuda_cl registry (DNN_CUDA_DECLARED): all of them. */
#ifndef DNN_SIM_MODEL_H
#define DNN_SIM_MODEL_H

#include <stddef.h>

/* The ANP_SIM_* variables, as the environment has them (NULL when unset; runtime/knobs.c reads
 * them, scripts/simulate.sh sets them). */
typedef struct dnn_sim_env {
	const char *cpu_models, *cpu_host;   /* ANP_SIM_CPU_MODELS (DIR[:DIR...]), ANP_SIM_CPU_HOST */
	const char *cuda_models, *cuda_host; /* ANP_SIM_CUDA_MODELS, ANP_SIM_CUDA_HOST */
	const char *gpu;                     /* ANP_SIM_GPU: the roofline of a GPU without calibrated files */
	const char *cpu_vec_gbs;             /* ANP_SIM_CPU_VEC_GBS: the vector codelets' stream rate */
	const char *platform, *models;       /* ANP_SIM_PLATFORM, ANP_SIM_MODELS: named in the result line */
	long cuda_workspace_mb;              /* DNN_CUDA_WORKSPACE_MB, -1 unset: the attention's head groups */
	const char *fold_unique;             /* ANP_SIM_FOLD_UNIQUE=1: one folded host block per size */
} dnn_sim_env;

/* Installs the models from env; 0, or -1 with a one-line message (a malformed $ANP_SIM_GPU, no CPU
 * model directory). Call after StarPU starts and before any task is submitted. No-op outside
 * the simulation build. */
int dnn_sim_models_install(const dnn_sim_env *env, char *err, size_t errlen);

#endif
