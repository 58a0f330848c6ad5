/* dnn_codelet.h — what every codelet file shares.
 *
 * One op per file pair: codelets/<op>.c holds the CPU kernels (plain functions on pointers and
 * shapes, no StarPU inside), the StarPU codelets, their perf models and the insert helper;
 * codelets/<op>.cu holds the CUDA implementations.
 *
 * DNN_CODELET() generates a codelet `cl_<op>_<phase>` with a history-based perf model whose
 * footprint combines the data sizes with the op's argument struct (so two convs with the same
 * buffer sizes but different strides get separate histories). Access modes are given at insert
 * time, Chameleon style, so one codelet serves R/W/RW/REDUX uses. That is why every codelet
 * is declared with STARPU_VARIABLE_NBUFFERS: with a fixed nbuffers and no .modes, StarPU stores
 * the modes of the first insert into the codelet and aborts when a later insert differs (e.g. a
 * dx written with STARPU_W by one task and accumulated with STARPU_RW by another). The macros'
 * NBUF argument only documents the most buffers a task of the codelet takes.
 */
#ifndef DNN_CODELET_H
#define DNN_CODELET_H

#include <starpu.h>
#ifndef __CUDACC__ /* the insert macro is for C files; .cu files only see the types */
#include <starpu_mpi.h>
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where and how an insert helper submits its task: one path for one process and for MPI
 * (Chameleon's submit macro). NULL = a local task (starpu_task_build + dnn_task_submit_: what
 * starpu_task_insert does), the helper's name, priority 0. */
typedef struct {
	int mpi;          /* 1: starpu_mpi_task_insert(MPI_COMM_WORLD, ...) */
	int node;         /* with mpi: STARPU_EXECUTE_ON_NODE node; -1: owner computes */
	int priority;     /* STARPU_PRIORITY */
	const char *name; /* STARPU_NAME; NULL: the helper's default ("relu_fwd", ...) */
	int color;        /* STARPU_TASK_COLOR where the helper supports it (vec_add); 0: default */
	int pinned;       /* 1 = run on `worker` (a chunk's worker under --pin-chunks; under MPI the
			   * executing rank's worker of that id; how: pin_queue), 0 = the
			   * scheduler chooses */
	int worker;
	int pin_queue;    /* how a pinned task is pinned (DNN_PIN_MODE, the plan's config): see below */
} dnn_task_opts;

static inline const char *dnn_task_name(const dnn_task_opts *o, const char *dflt)
{
	return o && o->name ? o->name : dflt;
}

/* How a pinned task (dnn_task_opts.pinned) is pinned (dnn_task_opts.pin_queue, which the plan sets
 * from DNN_PIN_MODE: graph/exec_config.h). pin_queue 0 [default, DNN_PIN_MODE=mask]:
 * with a worker mask (STARPU_TASK_WORKERIDS of that one worker): the scheduler queues it on that
 * worker in its order, with StarPU's own STARPU_REDUX reduction tasks. 1 (queue): STARPU_EXECUTE_ON_WORKER,
 * the worker's local queue, which StarPU serves before anything its scheduler queued: a reduction
 * task of a gradient (unpinned, internal) then waits until the worker has no pinned task ready,
 * i.e. the end of the backward, and no all-reduce overlaps it (docs/SIMULATION.md, study 5). */
/* The STARPU_TASK_WORKERIDS bit mask of one worker (static storage: StarPU keeps the pointer). */
const uint32_t *dnn_worker_mask(int worker);

/* STARPU_EXECUTE_ON_WORKER's argument for a local insert: o's worker when pinned on the local
 * queue, or -1 (the scheduler's choice, within dnn_task_wmask's worker when pinned by mask). */
static inline int dnn_task_worker(const dnn_task_opts *o)
{
	return o && o->pinned && o->pin_queue ? o->worker : -1;
}
/* STARPU_TASK_WORKERIDS' arguments: o's worker's mask when pinned by mask, else none (0, NULL). */
static inline unsigned dnn_task_wlen(const dnn_task_opts *o)
{
	return o && o->pinned && !o->pin_queue ? (unsigned)(o->worker / 32 + 1) : 0;
}
static inline uint32_t *dnn_task_wmask(const dnn_task_opts *o)
{
	return o && o->pinned && !o->pin_queue ? (uint32_t *)dnn_worker_mask(o->worker) : NULL;
}

/* Every insert helper's one call: StarPU's return code (0 or a negative errno). NAME is the
 * helper's default task name; the trailing arguments are starpu_task_insert's, without the 0. */
#define DNN_TASK_INSERT(o, cl, NAME, ...)                                                           \
	((o) && (o)->mpi                                                                            \
		 ? ((o)->node >= 0 ? dnn_mpi_task_insert_(NULL, (cl), __VA_ARGS__,                   \
							     STARPU_EXECUTE_ON_NODE, (o)->node,       \
							     STARPU_EXECUTE_ON_WORKER, dnn_task_worker(o), STARPU_TASK_WORKERIDS, dnn_task_wlen(o), dnn_task_wmask(o), \
							     STARPU_PRIORITY, (o)->priority, STARPU_NAME, \
							     dnn_task_name((o), (NAME)), 0)               \
				   : dnn_mpi_task_insert_(NULL, (cl), __VA_ARGS__,                   \
							     STARPU_EXECUTE_ON_WORKER, dnn_task_worker(o), STARPU_TASK_WORKERIDS, dnn_task_wlen(o), dnn_task_wmask(o), \
							     STARPU_PRIORITY, (o)->priority, STARPU_NAME, \
							     dnn_task_name((o), (NAME)), 0))              \
		 : dnn_task_submit_(starpu_task_build((cl), __VA_ARGS__, STARPU_PRIORITY, (o) ? (o)->priority : 0, \
				      STARPU_EXECUTE_ON_WORKER, dnn_task_worker(o), STARPU_TASK_WORKERIDS, dnn_task_wlen(o), dnn_task_wmask(o), STARPU_NAME,                \
				      dnn_task_name((o), (NAME)), 0)))

/* Footprint of a task = data footprint mixed with a CRC of its argument struct, hashed byte for
 * byte: argument structs are copied whole (dnn_args_dup), so each is laid out without padding
 * (an explicit zero `pad_` field where needed; DNN_ARGS_NO_PADDING checks it at compile time). */
uint32_t dnn_args_footprint(struct starpu_task *task);
#define DNN_ARGS_NO_PADDING(T, FIELD_BYTES) \
	_Static_assert(sizeof(T) == (FIELD_BYTES), #T " has padding: its footprint would hash it")

/* A malloc'd copy of `size` bytes for STARPU_CL_ARGS (the task frees it); NULL when out of memory. */
void *dnn_args_dup(const void *args, size_t size);

#ifndef __CUDACC__
/* DNN_TASK_INSERT with an argument block: ARGS (SIZE bytes, malloc'd; evaluated once) goes in as
 * STARPU_CL_ARGS and belongs to the task from here on, on every path: StarPU frees it with the
 * task, and under MPI a rank that does not run the task frees it (plain starpu_mpi_task_insert
 * leaks it there). Evaluates to -ENOMEM when ARGS is NULL, else StarPU's return code. Under MPI a
 * node of -1 is ignored by STARPU_EXECUTE_ON_NODE (the owner of the written data computes). */
#define DNN_TASK_INSERT_CL_ARGS(o, cl, NAME, ARGS, SIZE, ...)                                       \
	__extension__({                                                                             \
		void *dnn_args_ = (ARGS);                                                           \
		size_t dnn_argsz_ = (SIZE);                                                         \
		!dnn_args_ ? -ENOMEM                                                                \
		: (o) && (o)->mpi                                                                   \
			? dnn_mpi_task_insert_(dnn_args_, (cl), __VA_ARGS__, STARPU_CL_ARGS, dnn_args_,  \
					       dnn_argsz_, STARPU_EXECUTE_ON_NODE, (o)->node,            \
					       STARPU_EXECUTE_ON_WORKER, dnn_task_worker(o), STARPU_TASK_WORKERIDS, dnn_task_wlen(o), dnn_task_wmask(o),             \
					       STARPU_PRIORITY, (o)->priority, STARPU_NAME,              \
					       dnn_task_name((o), (NAME)), 0)                            \
			: dnn_task_submit_(starpu_task_build((cl), __VA_ARGS__, STARPU_CL_ARGS, dnn_args_, dnn_argsz_, \
					     STARPU_PRIORITY, (o) ? (o)->priority : 0,                   \
					     STARPU_EXECUTE_ON_WORKER, dnn_task_worker(o), STARPU_TASK_WORKERIDS, dnn_task_wlen(o), dnn_task_wmask(o), STARPU_NAME,   \
					     dnn_task_name((o), (NAME)), 0));                            \
	})

/* The usual case: a copy of the argument struct *A (so the helper's caller keeps its own). */
#define DNN_TASK_INSERT_ARGS(o, cl, NAME, A, ...) \
	DNN_TASK_INSERT_CL_ARGS(o, cl, NAME, dnn_args_dup((A), sizeof(*(A))), sizeof(*(A)), __VA_ARGS__)

/* starpu_mpi_task_build + submit + post_build on MPI_COMM_WORLD with the 0-terminated list after
 * cl, which passes `args` (or NULL) as STARPU_CL_ARGS; frees `args` where no task is built
 * (another rank runs it). Returns StarPU's return code. For the insert macros only. */
int dnn_mpi_task_insert_(void *args, struct starpu_codelet *cl, ...);
#endif
/* Submits a task built by starpu_task_build (NULL: -EINVAL), destroying it if the submission
 * fails, as starpu_task_insert does. With dnn_mpi_task_insert_, the one place where the insert
 * macros submit, so that DNN_BREAKDOWN's critical path (runtime/critpath.h) sees every task. */
int dnn_task_submit_(struct starpu_task *task);
/* A function called with every task those two submit, just before starpu_task_submit (NULL:
 * none, the default: one branch per task); mpi: 1 when starpu_mpi_task_build built it (its handles
 * are then registered with StarPU-MPI). It may set the task's callback (chaining any). */
void dnn_task_set_submit_hook(void (*hook)(struct starpu_task *task, int mpi));

/* A task that cannot do its work (scratch allocation, a CUDA/cuBLAS/cuDNN error) records the
 * first such error here (thread-safe; not printed) and returns; dnn_wait_step then ends the run
 * with it, so the app prints it once, as its one error line. dnn_worker_error_get: 1 and the
 * message when one happened (it then counts as reported). dnn_worker_error_unreported: the same
 * for an error nobody has asked for yet (dnn_runtime_shutdown prints such a one, e.g. a test's
 * task that failed outside a training step, so no failure goes unseen). */
void dnn_worker_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int dnn_worker_error_get(char *msg, size_t len);
int dnn_worker_error_unreported(char *msg, size_t len);

/* The settings of the CUDA codelets, from the environment (parsed once at start-up by
 * runtime/knobs.c, in every build, with or without CUDA workers, so a typo is caught on a CPU
 * machine too; graph/exec_config.h):
 *   DNN_CUDA_MATH=tf32|fp32 (default tf32): tf32 lets cuDNN's convolutions (CUDNN_DEFAULT_MATH)
 *     and cuBLAS's SGEMMs (CUBLAS_TF32_TENSOR_OP_MATH) use TF32 tensor cores on Ampere and
 *     later, as PyTorch's cuDNN convolutions do by default; fp32 keeps both in plain FP32
 *     (CUDNN_FMA_MATH, CUBLAS_DEFAULT_MATH), for comparisons with the CPU.
 *   DNN_CUDA_WORKSPACE_MB=N (0..65536; default: 512, at most 1/16 of the device's memory): the
 *     cuDNN workspace each CUDA worker allocates once at start-up; convolution algorithms that
 *     need more are not chosen (0: only algorithms without workspace).
 * dnn_cuda_init (dnn_cuda.h) takes them. */
typedef struct dnn_cuda_env {
	int fp32;          /* DNN_CUDA_MATH=fp32 */
	long workspace_mb; /* DNN_CUDA_WORKSPACE_MB, -1 when unset (the default cap) */
} dnn_cuda_env;
#define DNN_CUDA_WORKSPACE_DEFAULT_MB 512L
#define DNN_CUDA_WORKSPACE_MAX_MB 65536L
/* The block dnn_cuda_scratch (dnn_cuda.h) allocates for a request of `bytes` beyond its current one: an eighth
 * more, rounded up to whole MiB (a few growths cover a net's shapes). Here, not in dnn_cuda.cu, because the
 * GPU memory preflight (runtime/preflight.c) counts it too. */
static inline size_t dnn_cuda_scratch_alloc_bytes(size_t bytes) { return ((bytes + bytes / 8) | ((1u << 20) - 1)) + 1; }

/* CUDA function pointer, or NULL in a build without CUDA. The simulation build (DNN_SIMGRID)
 * compiles no CUDA but must tell StarPU which codelets have a CUDA form, so that its simulated
 * CUDA workers get them: it points them all at dnn_sim_cuda_placeholder, which does nothing
 * (kernels become delays; see dnn_codelet.c for the one call StarPU still makes). */
#ifdef DNN_HAVE_CUDA
#define DNN_CUDA_FN(fn) fn
#elif defined(DNN_SIMGRID)
void dnn_sim_cuda_placeholder(void *buffers[], void *cl_arg);
#define DNN_CUDA_FN(fn) dnn_sim_cuda_placeholder
#else
#define DNN_CUDA_FN(fn) NULL
#endif

/* The codelets that declare a CUDA implementation in source, in every build: DNN_CODELET and
 * DNN_CODELET_FP register theirs; a codelet written out by hand with .cuda_funcs =
 * {DNN_CUDA_FN(fn)} adds DNN_CUDA_DECLARED(its name); after it. Entries are pointers in the linker
 * section dnn_cuda_cl (GNU ld and lld define __start_/__stop_ for it), so there is no list to keep.
 * dnn_codelet_declares_cuda: 1 when cl is registered. A build without CUDA has NULL cuda_funcs;
 * tests/unit_cuda_coverage.c asks this instead there. */
#define DNN_CUDA_DECLARED(NAME)                                                    \
	static struct starpu_codelet *NAME##_cuda_declared                         \
		__attribute__((used, section("dnn_cuda_cl"))) = &NAME
int dnn_codelet_declares_cuda(const struct starpu_codelet *cl);
/* The registered codelets (the dnn_cuda_cl section) and their count; NULL, 0 when none. */
struct starpu_codelet *const *dnn_cuda_codelets(size_t *n);

/* FOOTPRINT: a footprint function, or NULL for StarPU's default (data sizes only) — for ops whose
 * arguments change at every step without changing the cost (SGD's learning rate). */
#define DNN_CODELET_FP(NAME, NBUF, CPU_FN, CUDA_FN, FOOTPRINT)                    \
	static struct starpu_perfmodel NAME##_model = {                            \
		.type = STARPU_HISTORY_BASED,                                      \
		.symbol = "dnn_" #NAME,                                           \
		.footprint = FOOTPRINT,                                            \
	};                                                                         \
	struct starpu_codelet NAME = {                                             \
		.name = #NAME,                                                     \
		.cpu_funcs = {CPU_FN},                                             \
		.cpu_funcs_name = {#CPU_FN},                                       \
		.cuda_funcs = {DNN_CUDA_FN(CUDA_FN)},                              \
		.cuda_flags = {STARPU_CUDA_ASYNC},                                 \
		.nbuffers = STARPU_VARIABLE_NBUFFERS, /* NBUF buffers, modes per insert */ \
		.model = &NAME##_model,                                            \
	};                                                                         \
	DNN_CUDA_DECLARED(NAME)

#define DNN_CODELET(NAME, NBUF, CPU_FN, CUDA_FN) DNN_CODELET_FP(NAME, NBUF, CPU_FN, CUDA_FN, dnn_args_footprint)

/* Colours for ViTE: one hue family per op class, darker for backward phases. */
enum {
	DNN_COLOR_CONV_FWD = 0x1f77b4,
	DNN_COLOR_CONV_BWD_DATA = 0x0b3d66,
	DNN_COLOR_CONV_BWD_FILTER = 0x6baed6,
	DNN_COLOR_DENSE_FWD = 0x2ca02c,
	DNN_COLOR_DENSE_BWD = 0x145214,        // dense_bwd_data
	DNN_COLOR_DENSE_BWD_WEIGHT = 0x98df8a, // dense_bwd_weight (light green, like conv's filter gradient)
	DNN_COLOR_ELTWISE_FWD = 0xffbb78,
	DNN_COLOR_ELTWISE_BWD = 0xff7f0e,
	DNN_COLOR_POOL_FWD = 0xc5b0d5,
	DNN_COLOR_POOL_BWD = 0x9467bd,
	DNN_COLOR_BN_FWD = 0xf7b6d2,
	DNN_COLOR_BN_BWD = 0xe377c2,
	DNN_COLOR_LOSS = 0xd62728,
	DNN_COLOR_REDUX = 0x7f7f7f,
	DNN_COLOR_UPDATE = 0xbcbd22,
	DNN_COLOR_DATA = 0x17becf,
};

/* Per-thread scratch memory for CPU kernels (im2col columns etc.). Grows, never shrinks;
 * returns NULL only when malloc fails. Not for CUDA. */
float *dnn_cpu_scratch(size_t nfloats);
/* A second such buffer, independent of the first: for a kernel that keeps its own data (a normalised
 * input) while it calls a kernel that takes dnn_cpu_scratch (codelets/conv2d_bnfuse.c). */
float *dnn_cpu_scratch_aux(size_t nfloats);
/* Frees the calling thread's scratch, both buffers (run on every CPU worker at shutdown). */
void dnn_cpu_scratch_release(void);

#ifdef __cplusplus
}
#endif
#endif
