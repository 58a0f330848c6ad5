/* dnn_sim_model.c — see dnn_sim_model.h. */
#include "dnn_sim_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The CPU node model's pure parts (dnn_sim_model.h), built in every configuration so that the unit
 * test checks them against their formulas without SimGrid. */
int dnn_sim_cpu_parse(dnn_sim_cpu *c, const char *var, const char *spec, char *err, size_t errlen)
{
	char name[64], tail;
	double v[4];
	int cores;
	int n = sscanf(spec, "%63[^:]:%lf:%lf:%lf:%d:%lf%c", name, &v[0], &v[1], &v[2], &cores, &v[3], &tail);
	if (n != 6 || !(v[0] > 0) || !(v[1] > 0) || !(v[2] >= v[1]) || cores < 1 || cores > 1024 || !(v[3] >= 0)) {
		snprintf(err, errlen,
			 "%s='%s': expected name:peak_gflops:core_gbs:socket_gbs:cores_per_socket:llc_mb (rates > 0, "
			 "socket_gbs >= core_gbs, 1..1024 cores, llc_mb >= 0)",
			 var, spec);
		return -1;
	}
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->peak_gflops = v[0], c->core_gbs = v[1], c->socket_gbs = v[2], c->cores_per_socket = cores;
	c->llc_mb = v[3];
	return 0;
}

double dnn_sim_cpu_task_us(const dnn_sim_cpu *here, const dnn_sim_cpu *target, double t_here_us, double bytes,
			   double n, double *mem_us, double *frac_mem)
{
	/* GB/s = 1e3 B/us. The memory part here is what the bytes take at one core's stream rate,
	 * capped by the task's time; the rest is compute, which the cores' peak ratio scales. Buffers
	 * that fit a core's share of the last-level cache are taken to come from it: no memory part
	 * (on the machine whose cache it is). */
	const int dram_here = bytes > here->llc_mb * 1e6 / here->cores_per_socket;
	const int dram_target = bytes > target->llc_mb * 1e6 / target->cores_per_socket;
	const double m_here = dram_here ? fmin(t_here_us, bytes / (here->core_gbs * 1e3)) : 0;
	const double c_target = (t_here_us - m_here) * here->peak_gflops / target->peak_gflops;
	const double alone = dram_target ? bytes / (target->core_gbs * 1e3) : 0;
	const double rate = fmin(target->core_gbs, target->socket_gbs / (n < 1 ? 1 : n));
	const double mem = dram_target ? bytes / (rate * 1e3) : 0;
	if (mem_us)
		*mem_us = mem;
	if (frac_mem)
		*frac_mem = c_target + alone > 0 ? alone / (c_target + alone) : 0;
	return c_target + mem;
}

double dnn_sim_cpu_streams(const dnn_sim_cpu_core *cores, int ncores, int self, double now_us, double window_us)
{
	double n = 1;
	for (int w = 0; w < ncores; w++) {
		if (w == self)
			continue;
		const dnn_sim_cpu_core *c = &cores[w];
		double running = 0, busy = 0;
		for (int i = 0; i < DNN_SIM_CPU_HIST; i++) {
			if (!(c->end[i] > c->start[i]))
				continue;
			if (c->start[i] <= now_us && c->end[i] > now_us)
				running = c->frac[i];
			if (window_us > 0) { /* the part of [now - window, now) spent in this task */
				const double lo = fmax(c->start[i], now_us - window_us), hi = fmin(c->end[i], now_us);
				if (hi > lo)
					busy += (hi - lo) / window_us * c->frac[i];
			}
		}
		n += running > 0 ? running : fmin(busy, 1);
	}
	return n;
}

void dnn_sim_cpu_record(dnn_sim_cpu_core *c, double start_us, double end_us, double frac)
{
	c->start[c->next] = start_us, c->end[c->next] = end_us, c->frac[c->next] = frac;
	c->next = (c->next + 1) % DNN_SIM_CPU_HIST;
}

#ifndef DNN_SIMGRID
int dnn_sim_models_install(const dnn_sim_env *env, char *err, size_t errlen)
{
	(void)env, (void)err, (void)errlen;
	return 0;
}
#else

#include <math.h>
#include <starpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attention.h"
#include "dnn_codelet.h"
#include "embed.h"

#define DNN_SIM_MAX_CODELETS 96
#define DNN_PERFMODEL_VERSION_DIR "codelets/45" /* StarPU 1.4's history file layout */

#define DNN_SIM_MAX_CPU_DIRS 4

typedef struct {
	struct starpu_perfmodel worker_model; /* what the codelet now points at */
	/* CPU: one history per directory of ANP_SIM_CPU_MODELS, searched in order */
	struct starpu_perfmodel cpu_hist[DNN_SIM_MAX_CPU_DIRS], cuda_hist;
	int have_cpu[DNN_SIM_MAX_CPU_DIRS], have_cuda, ncpu_dirs;
	char cpu_path[1024], cuda_path[1024]; /* for messages: the first directory's file */
	const char *symbol;
	uint32_t (*footprint)(struct starpu_task *); /* the codelet's own (NULL: StarPU's data footprint) */
} sim_model;

static sim_model g_models[DNN_SIM_MAX_CODELETS];
static int g_nmodels;
static struct {
	char name[64];
	double peak_gflops, mem_gbs, eff_compute, eff_memory, launch_us;
	int set;
} g_gpu;

static void missing(const sim_model *sm, const char *kind, const char *path, uint32_t fp, struct starpu_task *task)
{
	size_t bytes = 0;
	for (unsigned i = 0; i < STARPU_TASK_GET_NBUFFERS(task); i++)
		bytes += starpu_data_get_size(STARPU_TASK_GET_HANDLE(task, i));
	dnn_worker_error("simulation: no calibrated %s model for %s at this shape (footprint %08x, %zu bytes of "
			 "data, %.3g MFLOP) in %s; calibrate these shapes first (scripts/simulate.sh does it for "
			 "the CPU, docs/SIMULATION.md)",
			 kind, sm->symbol, fp, bytes, task->flops / 1e6, path[0] ? path : "(no file)");
}

/* The mean of the first of n histories that has the task's shape; NAN when none has. */
static double lookup(struct starpu_perfmodel *hist, const int *have, int n, struct starpu_task *task,
		     unsigned workerid, unsigned nimpl, uint32_t *fp)
{
	struct starpu_perfmodel_arch *arch = starpu_worker_get_perf_archtype((int)workerid, task->sched_ctx);
	for (int i = 0; i < n; i++) {
		if (!have[i])
			continue;
		*fp = starpu_task_footprint(&hist[i], task, arch, nimpl);
		double us = starpu_perfmodel_history_based_expected_perf(&hist[i], arch, *fp);
		if (us > 0)
			return us;
	}
	return NAN;
}

static double history(const sim_model *sm, struct starpu_perfmodel *hist, const int *have, int n, const char *path,
		      const char *kind, struct starpu_task *task, unsigned workerid, unsigned nimpl)
{
	uint32_t fp = 0;
	double us = lookup(hist, have, n, task, workerid, nimpl, &fp);
	if (!(us > 0)) {
		if (!fp) /* no history to ask: hash the shape as the real run's model does */
			fp = sm->footprint ? sm->footprint(task) : starpu_task_data_footprint(task);
		missing(sm, kind, path, fp, task);
		return 1.0; /* StarPU _exit()s on NaN or 0; the recorded error ends the run */
	}
	return us;
}

/* What a CUDA kernel does beyond its task's STARPU_FLOPS and buffers, for the codelets whose
 * CUDA side does more (docs/SIMULATION.md, "GPU, estimated"):
 * - attention (attention.cu): per sample and group of G heads, cuBLAS strided-batched SGEMMs over
 *   the whole T x T square (cuBLAS does not skip the causal half that STARPU_FLOPS counts: twice
 *   the FLOPs), through a T x T matrix per head in the worker's workspace: forward S written by
 *   the scores' GEMM, read and written by the softmax, read by P v (4 passes of T^2 floats per
 *   head); backward P written, recomputed (2), read by dv, dP written, dS read with P and
 *   written (3), read by dq and by dk (10 passes); kernel launches per (sample, group): 3
 *   forward, 7 backward. G = heads whose T x T matrices (1 forward, 2 backward) fit in the
 *   workspace (DNN_CUDA_WORKSPACE_MB, else DNN_CUDA_WORKSPACE_DEFAULT_MB: 512 MiB; dnn_cuda.cu
 *   caps it at 1/16 of the device, which K80 and H200 dies exceed).
 * - embed's backward (embed.cu): the deterministic owner search compares ids, at most
 *   rows^2 / 2 compares for the owners' scans and rows^2 / 2 for their walks when every id of
 *   the chunk is distinct (random tokens over GPT-2's vocabulary nearly are): rows^2 operations,
 *   counted at the FLOP rate. */
static double g_workspace_bytes = (double)DNN_CUDA_WORKSPACE_DEFAULT_MB * 1024 * 1024;

static void kernel_extra(const sim_model *sm, struct starpu_task *task, double *flops, double *bytes, double *launches)
{
	if (!task->cl_arg)
		return;
	if (!strncmp(sm->symbol, "dnn_cl_attention_", 17) && task->cl_arg_size == sizeof(dnn_attention_args)) {
		const dnn_attention_args *a = (const dnn_attention_args *)task->cl_arg;
		const int bwd = strstr(sm->symbol, "bwd") != NULL;
		const double tt = (double)a->T * a->T * sizeof(float);
		double G = tt > 0 ? floor(g_workspace_bytes / ((bwd ? 2 : 1) * tt)) : a->H;
		G = G < 1 ? 1 : G > a->H ? a->H : G;
		*flops *= 2; /* the full square */
		*bytes += (bwd ? 10.0 : 4.0) * a->N * (double)a->H * tt;
		*launches = (double)a->N * ceil(a->H / G) * (bwd ? 7 : 3);
	} else if (!strcmp(sm->symbol, "dnn_cl_embed_bwd") && task->cl_arg_size == sizeof(dnn_embed_args)) {
		const dnn_embed_args *a = (const dnn_embed_args *)task->cl_arg;
		const double rows = (double)a->N * a->T;
		*flops += rows * rows;
	}
}

static double roofline_us(const sim_model *sm, struct starpu_task *task)
{
	double bytes = 0, flops = task->flops, launches = 1;
	for (unsigned i = 0; i < STARPU_TASK_GET_NBUFFERS(task); i++)
		bytes += (double)starpu_data_get_size(STARPU_TASK_GET_HANDLE(task, i));
	kernel_extra(sm, task, &flops, &bytes, &launches);
	/* peak in GFLOP/s = 1e3 FLOP/us; bandwidth in GB/s = 1e3 B/us */
	const double compute = flops / (g_gpu.peak_gflops * 1e3 * g_gpu.eff_compute);
	const double memory = bytes / (g_gpu.mem_gbs * 1e3 * g_gpu.eff_memory);
	return g_gpu.launch_us * launches + (compute > memory ? compute : memory);
}

/* ANP_SIM_CPU_VEC_GBS (GB/s, > 0; unset: the calibrated history): the CPU vector codelets (zero,
 * adds, slices), which only stream memory, timed as 1 us + the bytes they move / that rate instead
 * of from their calibrated history. Their multi-rank calibration runs N ranks on this machine's
 * cores, where a descheduled rank turns a 1 ms add into 40 ms (means 2-30x off with deviations of
 * several means); a stream rate is what a node's spare core gives. Bytes moved, n the smallest
 * buffer: zero n, add / axpy 3n (read both, write one), add_clear 4n (both read and written),
 * slices 2n (the chunk read and written). --clip-grad-norm's codelets stream too: a gradient's
 * sum of squares reads its gradient once (1x the largest buffer), the coefficient reads one double
 * per tensor (1x the bytes of all its buffers). */
static double g_cpu_vec_gbs;

static double cpu_vec_us(const sim_model *sm, struct starpu_task *task)
{
	const int clip = !strcmp(sm->symbol, "dnn_cl_grad_sumsq") || !strcmp(sm->symbol, "dnn_cl_clip_coef");
	if (!(g_cpu_vec_gbs > 0) || (strncmp(sm->symbol, "dnn_cl_vec_", 11) != 0 && !clip))
		return NAN;
	size_t n = SIZE_MAX, largest = 0, total = 0;
	for (unsigned i = 0; i < STARPU_TASK_GET_NBUFFERS(task); i++) {
		size_t b = starpu_data_get_size(STARPU_TASK_GET_HANDLE(task, i));
		n = b < n ? b : n;
		largest = b > largest ? b : largest, total += b;
	}
	if (clip)
		return 1.0 + (double)(strstr(sm->symbol, "sumsq") ? largest : total) / (g_cpu_vec_gbs * 1e3);
	double k = 3;
	if (strstr(sm->symbol, "_zero"))
		k = 1;
	else if (strstr(sm->symbol, "_slice_"))
		k = 2;
	else if (strstr(sm->symbol, "_add_clear"))
		k = 4;
	return 1.0 + k * (double)n / (g_cpu_vec_gbs * 1e3);
}

/* ANP_SIM_CPU / ANP_SIM_CPU_HERE (dnn_sim_model.h): the simulated node's cores and this machine's.
 * Set: every CPU task's calibrated time is split and scaled by dnn_sim_cpu_task_us, its memory
 * part shared with the CPU tasks on the same socket (dnn_sim_cpu_streams). CPU worker d (StarPU's
 * devid) sits on socket d / cores_per_socket, as StarPU binds workers to cores in order. A task
 * is recorded on its core when its own worker asks at the start of its execution (StarPU's
 * current task is then this one); the scheduler's predictions (dmda asks for every worker) see
 * the same sharing but record nothing. Each SMPI rank (simulated node) has its own copy. */
static dnn_sim_cpu g_cpu_here, g_cpu_target;
static int g_cpu_set;
#define DNN_SIM_MAX_CORES 1024
static dnn_sim_cpu_core g_cores[DNN_SIM_MAX_CORES];

static double cpu_node_us(struct starpu_task *task, unsigned workerid, double t_here_us)
{
	double bytes = 0;
	for (unsigned i = 0; i < STARPU_TASK_GET_NBUFFERS(task); i++)
		bytes += (double)starpu_data_get_size(STARPU_TASK_GET_HANDLE(task, i));
	const int d = starpu_worker_get_devid((int)workerid), cps = g_cpu_target.cores_per_socket;
	if (d < 0 || d >= DNN_SIM_MAX_CORES)
		return dnn_sim_cpu_task_us(&g_cpu_here, &g_cpu_target, t_here_us, bytes, 1, NULL, NULL);
	const int first = d / cps * cps, ncores = first + cps > DNN_SIM_MAX_CORES ? DNN_SIM_MAX_CORES - first : cps;
	const double now = starpu_timing_now();
	double frac = 0;
	/* the window over which idle neighbours count: this task's time alone on the target */
	const double alone = dnn_sim_cpu_task_us(&g_cpu_here, &g_cpu_target, t_here_us, bytes, 1, NULL, &frac);
	const double n = frac > 0 ? dnn_sim_cpu_streams(&g_cores[first], ncores, d - first, now, alone) : 1;
	const double us = dnn_sim_cpu_task_us(&g_cpu_here, &g_cpu_target, t_here_us, bytes, n, NULL, NULL);
	if (starpu_task_get_current() == task && starpu_worker_get_id() == (int)workerid)
		dnn_sim_cpu_record(&g_cores[d], now, now + us, frac);
	return us;
}

/* ANP_SIM_CPU_SHARE = "F[:R:Q]" (unset: 1): processor sharing of the machine's cores, for ranks whose
 * threads want more cores than the machine has (namespace hosts on 2 cores: each rank's worker,
 * StarPU-MPI's progress thread, the submitting thread). Every CPU task takes F times its CPU time.
 * The calibrated time t is not the CPU time where the calibration ran R ranks per core: a task
 * longer than the scheduler's time slice Q (us) was preempted inside it and holds most of the
 * sharing; a shorter one ran whole once it had a core, and its wait fell between tasks (2 hosts
 * sharing one core ran lenet5 at half the images/s of 2 cores with the same calibrated task times;
 * docs/studies/2026-12-06-sim-validation-netns-hosts.md). So the CPU time is t / s(t), with
 * s(t) = 1 + (R - 1) t / (Q + t), and the task lasts t F / s(t). F comes from the run's demand
 * (scripts/lib.sh anp_netbench_simulate: a first run at F = 1 gives it). */
static double g_cpu_share = 1.0, g_cpu_share_r = 1.0, g_cpu_share_q = 1.0;

static double shared_us(double us)
{
	if (!(us > 0))
		return us;
	const double s = 1.0 + (g_cpu_share_r - 1.0) * us / (g_cpu_share_q + us);
	return us * g_cpu_share / s;
}

static double sim_cpu_us(sim_model *sm, struct starpu_task *task, unsigned workerid, unsigned nimpl)
{
	if (cpu_vec_us(sm, task) > 0)
		return shared_us(cpu_vec_us(sm, task));
	if (g_cpu_set) {
		uint32_t fp = 0;
		const double us = lookup(sm->cpu_hist, sm->have_cpu, sm->ncpu_dirs, task, workerid, nimpl, &fp);
		if (us > 0)
			return shared_us(cpu_node_us(task, workerid, us));
	}
	return shared_us(history(sm, sm->cpu_hist, sm->have_cpu, sm->ncpu_dirs, sm->cpu_path, "CPU", task, workerid, nimpl));
}

static double sim_cost(struct starpu_task *task, unsigned workerid, unsigned nimpl)
{
	sim_model *sm = (sim_model *)((char *)task->cl->model - offsetof(sim_model, worker_model));
	/* StarPU's own STARPU_REDUX tasks (datawizard/reduction.c names them redux_task_*) are internal
	 * jobs, which StarPU 1.4.10's SimGrid mode ran in zero time; third_party/
	 * starpu-simgrid-time-redux.patch times those whose codelet has a model, so they cost what
	 * their codelet (cl_vec_redux_add: an add of two vectors; cl_vec_zero) costs, as below. */
	switch (starpu_worker_get_type((int)workerid)) {
	case STARPU_CPU_WORKER:
		return sim_cpu_us(sm, task, workerid, nimpl);
	case STARPU_CUDA_WORKER:
		if (g_gpu.set)
			return roofline_us(sm, task);
		return history(sm, &sm->cuda_hist, &sm->have_cuda, 1, sm->cuda_path, "CUDA", task, workerid, nimpl);
	default:
		missing(sm, "(unsupported worker kind)", "", 0, task);
		return 1.0;
	}
}

/* Perf models renamed with their codelets: the vector codelets (codelets/vec.c, formerly
 * grad_accum.c) and the optimiser update (codelets/optim.c, formerly sgd.c, cl_sgd_update). A
 * history file is named after its model's symbol only, so one calibrated under the old name is
 * read when the new one has none, and saved calibrations (CPU and CUDA) stay usable. */
static const char *const renamed_models[][2] = {
	{"dnn_cl_vec_zero", "dnn_cl_grad_zero"},           {"dnn_cl_vec_add", "dnn_cl_grad_accum"},
	{"dnn_cl_vec_axpy", "dnn_cl_grad_axpy"},           {"dnn_cl_vec_slice_get", "dnn_cl_grad_slice_get"},
	{"dnn_cl_vec_slice_put", "dnn_cl_grad_slice_put"}, {"dnn_cl_optim_update", "dnn_cl_sgd_update"},
};

static const char *old_symbol(const char *symbol)
{
	for (size_t i = 0; i < sizeof(renamed_models) / sizeof(renamed_models[0]); i++)
		if (strcmp(symbol, renamed_models[i][0]) == 0)
			return renamed_models[i][1];
	return NULL;
}

/* path = DIR/codelets/45/SYMBOL.HOST (or the symbol's old name's file when only that exists); 1
 * when that file exists and loads. */
static int load_history(struct starpu_perfmodel *hist, const struct starpu_perfmodel *orig, const char *dir,
			const char *host, char *path, size_t pathlen)
{
	path[0] = 0;
	if (!dir || !*dir || !host || !*host)
		return 0;
	snprintf(path, pathlen, "%s/%s/%s.%s", dir, DNN_PERFMODEL_VERSION_DIR, orig->symbol, host);
	if (access(path, R_OK) != 0) {
		const char *old = old_symbol(orig->symbol);
		char alt[1024];
		if (!old)
			return 0;
		snprintf(alt, sizeof(alt), "%s/%s/%s.%s", dir, DNN_PERFMODEL_VERSION_DIR, old, host);
		if (access(alt, R_OK) != 0)
			return 0;
		snprintf(path, pathlen, "%s", alt);
	}
	memset(hist, 0, sizeof(*hist));
	hist->type = STARPU_HISTORY_BASED;
	if (starpu_perfmodel_load_file(path, hist) != 0)
		return 0;
	hist->footprint = orig->footprint; /* the same shapes hash the same way as in the real run */
	return 1;
}

static int parse_gpu(const char *spec, char *err, size_t errlen)
{
	char name[64];
	double v[5];
	int n = sscanf(spec, "%63[^:]:%lf:%lf:%lf:%lf:%lf", name, &v[0], &v[1], &v[2], &v[3], &v[4]);
	/* eff_compute is of the direct FLOP count: cuDNN's Winograd 3x3 convolutions do 2.25-4x fewer
	 * multiplies, so a 3x3-conv net (VGG-16) can be timed above 1 (sim/platform.py --roofline). */
	if (n != 6 || !(v[0] > 0) || !(v[1] > 0) || !(v[2] > 0 && v[2] <= 4) || !(v[3] > 0 && v[3] <= 1) || !(v[4] >= 0)) {
		snprintf(err, errlen,
			 "ANP_SIM_GPU='%s': expected name:peak_gflops:mem_gbs:eff_compute:eff_memory:launch_us "
			 "(eff_compute in (0,4], eff_memory in (0,1])",
			 spec);
		return -1;
	}
	snprintf(g_gpu.name, sizeof(g_gpu.name), "%s", name);
	g_gpu.peak_gflops = v[0], g_gpu.mem_gbs = v[1], g_gpu.eff_compute = v[2], g_gpu.eff_memory = v[3];
	g_gpu.launch_us = v[4];
	g_gpu.set = 1;
	return 0;
}


int dnn_sim_models_install(const dnn_sim_env *env, char *err, size_t errlen)
{
	const char *cpu_dir = env->cpu_models, *cpu_host = env->cpu_host;
	const char *cuda_dir = env->cuda_models, *cuda_host = env->cuda_host;
	const char *gpu = env->gpu;
	if (!cpu_dir || !*cpu_dir || !cpu_host || !*cpu_host) {
		snprintf(err, errlen, "simulation: ANP_SIM_CPU_MODELS and ANP_SIM_CPU_HOST must name the calibrated CPU "
				      "models (run through scripts/simulate.sh, which sets them)");
		return -1;
	}
	if (gpu && *gpu && parse_gpu(gpu, err, errlen) != 0)
		return -1;
	if (env->cuda_workspace_mb >= 0) /* the attention's head groups (kernel_extra) */
		g_workspace_bytes = (double)env->cuda_workspace_mb * 1024 * 1024;
	const char *vec = env->cpu_vec_gbs;
	if (vec && *vec) {
		char *end;
		g_cpu_vec_gbs = strtod(vec, &end);
		if (*end || !(g_cpu_vec_gbs > 0)) {
			snprintf(err, errlen, "ANP_SIM_CPU_VEC_GBS='%s': expected a rate in GB/s > 0", vec);
			return -1;
		}
	}
	const char *cpu = env->cpu, *here = env->cpu_here;
	if ((cpu && *cpu) != (here && *here)) {
		snprintf(err, errlen, "simulation: ANP_SIM_CPU and ANP_SIM_CPU_HERE go together (the simulated cores and "
				      "this machine's, which timed the calibration; scripts/simulate.sh --cpu sets both)");
		return -1;
	}
	if (cpu && *cpu) {
		if (dnn_sim_cpu_parse(&g_cpu_target, "ANP_SIM_CPU", cpu, err, errlen) != 0 ||
		    dnn_sim_cpu_parse(&g_cpu_here, "ANP_SIM_CPU_HERE", here, err, errlen) != 0)
			return -1;
		g_cpu_set = 1;
	}
	const char *share = env->cpu_share;
	if (share && *share) {
		char tail;
		int n = sscanf(share, "%lf:%lf:%lf%c", &g_cpu_share, &g_cpu_share_r, &g_cpu_share_q, &tail);
		if ((n != 1 && n != 3) || (n == 1 && strchr(share, ':')) || !(g_cpu_share > 0 && isfinite(g_cpu_share)) ||
		    !(g_cpu_share_r >= 1 && isfinite(g_cpu_share_r)) || !(g_cpu_share_q > 0 && isfinite(g_cpu_share_q))) {
			snprintf(err, errlen, "ANP_SIM_CPU_SHARE='%s': expected F or F:R:Q (F > 0 the stretch, R >= 1 the "
					      "calibration's ranks per core, Q > 0 the time slice in us)", share);
			return -1;
		}
		if (n == 1)
			g_cpu_share_r = 1.0, g_cpu_share_q = 1.0;
	}
	/* Every buffer StarPU allocates in main memory (the home-less handles' host replicas: activations
	 * staged for the host, the all-reduce's gradient copies, slices and buckets) folded onto a few
	 * shared pages (SMPI's shared malloc): no kernel runs and nothing reads them, and one process
	 * holds all the ranks, so 16 ranks of GPT-2 (498 MB of gradient each, several copies per rank)
	 * went past this VM's 24 GB (killed, exit 137). The pinned-allocation cost StarPU simulates
	 * comes before the allocation and is unchanged. ANP_SIM_FOLD_UNIQUE=1 adds UNIQUE: one folded
	 * block per size, shared by every buffer of that size: each folded allocation is at least one
	 * mapping of SMPI's block file, and 16 ranks of GPT-2 XL went past vm.max_map_count (65,530)
	 * with one per buffer. Not the default: StarPU frees its small-buffer chunks at shutdown with
	 * the flags of then, and a chunk allocated before these flags were set fails UNIQUE's lookup
	 * (an assertion at shutdown, after the result line: 2 resnet18 ranks, ring). */
	const int unique = env->fold_unique && !strcmp(env->fold_unique, "1");
	starpu_malloc_on_node_set_default_flags(STARPU_MAIN_RAM, STARPU_MALLOC_PINNED | STARPU_MALLOC_COUNT |
								 STARPU_MALLOC_SIMULATION_FOLDED |
								 (unique ? STARPU_MALLOC_SIMULATION_UNIQUE : 0));
	size_t ncl;
	struct starpu_codelet *const *all = dnn_cuda_codelets(&ncl);
	for (size_t j = 0; j < ncl; j++) {
		struct starpu_codelet *cl = all[j];
		if (!cl->model || cl->model->type != STARPU_HISTORY_BASED)
			continue;
		if (g_nmodels == DNN_SIM_MAX_CODELETS) {
			snprintf(err, errlen, "simulation: more than %d codelets (raise DNN_SIM_MAX_CODELETS)",
				 DNN_SIM_MAX_CODELETS);
			return -1;
		}
		sim_model *sm = &g_models[g_nmodels++];
		sm->symbol = cl->model->symbol;
		sm->footprint = cl->model->footprint;
		/* ANP_SIM_CPU_MODELS: DIR[:DIR...]; the first directory that has a shape wins */
		char dirs[4096], *save = NULL, path[1024];
		snprintf(dirs, sizeof(dirs), "%s", cpu_dir);
		for (char *d = strtok_r(dirs, ":", &save); d && sm->ncpu_dirs < DNN_SIM_MAX_CPU_DIRS;
		     d = strtok_r(NULL, ":", &save)) {
			int i = sm->ncpu_dirs++;
			sm->have_cpu[i] = load_history(&sm->cpu_hist[i], cl->model, d, cpu_host, path, sizeof(path));
			if (i == 0)
				snprintf(sm->cpu_path, sizeof(sm->cpu_path), "%s", path);
		}
		sm->have_cuda =
			load_history(&sm->cuda_hist, cl->model, cuda_dir, cuda_host, sm->cuda_path, sizeof(sm->cuda_path));
		sm->worker_model.type = STARPU_PER_WORKER;
		sm->worker_model.worker_cost_function = sim_cost;
		sm->worker_model.symbol = cl->model->symbol;
		cl->model = &sm->worker_model;
	}
	return 0;
}
#endif
