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
	const char *cpu, *cpu_here;          /* ANP_SIM_CPU, ANP_SIM_CPU_HERE: the simulated cores and ours */
} dnn_sim_env;

/* The cores of a simulated CPU node (docs/SIMULATION.md, "CPU nodes of another machine"). Without
 * it a simulated core is one of this machine's (its calibrated history); with ANP_SIM_CPU (the
 * simulated node's cores) and ANP_SIM_CPU_HERE (this machine's, which the history timed), both
 * "name:peak_gflops:core_gbs:socket_gbs:cores_per_socket:llc_mb", each CPU task's history time is
 * split into a compute part, scaled by the ratio of the cores' peaks, and a memory part, its
 * buffers' bytes at the bandwidth it gets on the simulated socket, shared with the CPU tasks
 * running there. Rates count each buffer once (STREAM's convention), as a task's bytes do. */
typedef struct dnn_sim_cpu {
	char name[64];
	double peak_gflops;   /* one core's FP32 peak, GFLOP/s */
	double core_gbs;      /* one core streaming alone on its socket, GB/s */
	double socket_gbs;    /* a socket with every core streaming, GB/s */
	int cores_per_socket; /* cores that share socket_gbs */
	double llc_mb;        /* the socket's last-level cache, MB: a task whose buffers fit in a core's share
				 (llc_mb / cores_per_socket) streams nothing from memory */
} dnn_sim_cpu;

/* Parses spec ("name:peak_gflops:core_gbs:socket_gbs:cores_per_socket:llc_mb") into *c; 0, or -1 with a
 * line naming var. */
int dnn_sim_cpu_parse(dnn_sim_cpu *c, const char *var, const char *spec, char *err, size_t errlen);

/* The time of a CPU task on a target core, from its time alone on a core here (t_here_us, the
 * calibrated mean) and the bytes of its buffers, with n >= 1 streams (this task's included)
 * sharing the target socket's bandwidth:
 *   memory part here     m = min(t_here, bytes / here->core_gbs), 0 if bytes fit here's cache share
 *   compute part here    c = t_here - m
 *   on the target        t = c * here->peak / target->peak
 *                            + bytes / min(target->core_gbs, target->socket_gbs / n)
 *                              (that term 0 if bytes fit the target's cache share)
 * Returns t in us; *mem_us (if not NULL) gets the target's memory part, *frac_mem (if not NULL) the
 * share of the task's time alone on the target (n = 1) that is memory: what the task adds to the
 * socket's streams while it runs (dnn_sim_cpu_streams). Bytes in B, rates in GB/s = 1e3 B/us. */
double dnn_sim_cpu_task_us(const dnn_sim_cpu *here, const dnn_sim_cpu *target, double t_here_us, double bytes,
			   double n, double *mem_us, double *frac_mem);

/* The streams a task starting at now_us on one core of a socket shares bandwidth with. Each other
 * core of the socket counts its current task's memory share (frac_mem) while it runs, and, when
 * idle at now, the share of the window [now - window_us, now) it spent in its last tasks (a wave
 * of equal tasks starts at one instant; the first to start would otherwise see the others idle
 * and none of them would see the whole wave): n = 1 + sum over the other cores. */
#define DNN_SIM_CPU_HIST 4
typedef struct {
	double start[DNN_SIM_CPU_HIST], end[DNN_SIM_CPU_HIST], frac[DNN_SIM_CPU_HIST];
	int next; /* ring position of the next record */
} dnn_sim_cpu_core;

double dnn_sim_cpu_streams(const dnn_sim_cpu_core *cores, int ncores, int self, double now_us, double window_us);
/* Records the task [start, end) with memory share frac on core c. */
void dnn_sim_cpu_record(dnn_sim_cpu_core *c, double start_us, double end_us, double frac);

/* Installs the models from env; 0, or -1 with a one-line message (a malformed $ANP_SIM_GPU, no CPU
 * model directory). Call after StarPU starts and before any task is submitted. No-op outside
 * the simulation build. */
int dnn_sim_models_install(const dnn_sim_env *env, char *err, size_t errlen);

#endif
