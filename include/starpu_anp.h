/* starpu_anp.h — the one public header of starpu-anp, and the only one an app includes.
 *
 * Self-contained: it includes system headers only, so an app needs nothing but include/ on its
 * include path (apps/CMakeLists.txt links the library, not its internals). It holds the types
 * a user's options are made of and the commands behind `starpu_anp train|bench|eval|predict|
 * nets`, StarPU start-up and the trace hooks. The library's own modules include it for these
 * types (it sits at the bottom of the include graph, with util/: scripts/check_includes.sh), and
 * each module keeps everything else private.
 */
#ifndef STARPU_ANP_H
#define STARPU_ANP_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where Debian's dataset-fashion-mnist package puts its files (--data fashion-mnist). */
#define DNN_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

/* ---------------------------------------------------------------- options */
/* --optimizer: the update rule of every parameter tensor (codelets/optim.h has the formulas). */
typedef enum { DNN_OPT_SGD = 0, DNN_OPT_LARS = 1, DNN_OPT_ADAMW = 2, DNN_OPT_LAMB = 3 } dnn_optimizer;

typedef struct {
	float lr, momentum, weight_decay;
	dnn_optimizer optimizer;   // sgd (momentum), lars (You et al. 2017), adamw (Loshchilov & Hutter), lamb (You et al. 2020)
	float beta1, beta2, eps;   // adamw and lamb [0.9, 0.999, 1e-8, PyTorch's AdamW defaults]
	float trust;               // lars: the trust coefficient eta [0.001]
	long t;                    // adamw, lamb: this update's 1-based count (bias correction); the trainer sets it
	float clip_norm;           // --clip-grad-norm X: scale every gradient by min(1, X / (global norm + 1e-6))
	                           // before the update (graph/gradclip.h); 0 = off [0]
} dnn_optim_config;

/* Across ranks (StarPU-MPI, graph/dist.h): synchronous data parallelism, or asynchronous with
 * parameter-server shards and bounded staleness (docs/ARCHITECTURE.md "Across nodes"). */
typedef enum { DNN_MODE_SYNC = 0, DNN_MODE_ASYNC = 1 } dnn_dist_mode;
/* sync: how each gradient is all-reduced (graph/dist.c): starpu_mpi_redux_data's tree into rank
 * 0 then a send to every rank, a ring of reduce-scatter/all-gather tasks over N chunks, or
 * recursive halving-doubling, or a synchronous parameter server (each tensor summed on one rank,
 * round robin, then sent to all); auto (the default) picks one of them from the ranks' layout
 * (dnn_allreduce_resolve, graph/dist.h) before the run starts. */
typedef enum {
	DNN_ALLREDUCE_TREE = 0,
	DNN_ALLREDUCE_RING = 1,
	DNN_ALLREDUCE_RHD = 2,
	DNN_ALLREDUCE_PS = 3,
	DNN_ALLREDUCE_AUTO = 4
} dnn_allreduce;
/* --allreduce's word for a (tree, ring, rhd, ps, auto). */
static inline const char *dnn_allreduce_name(dnn_allreduce a)
{
	return a == DNN_ALLREDUCE_RING ? "ring" : a == DNN_ALLREDUCE_RHD ? "rhd"
	     : a == DNN_ALLREDUCE_PS ? "ps" : a == DNN_ALLREDUCE_AUTO ? "auto" : "tree";
}

/* The options of `starpu_anp train|bench|eval|predict|export`. */
typedef struct {
	const char *cmd;          // the command (train, bench, eval, predict, export), for messages and result lines
	const char *net;          // built-in name or .net path
	int net_set;              // --net was given (eval/predict/export: else the checkpoint's net)
	const char *data_dir;     // --data: fashion-mnist | synthetic | DIR
	int bench;                // the bench command: random inputs of the net's shape, no data loading
	int epochs;
	long max_steps;           // the run's length in steps (0 = --epochs decide); the schedule spans it
	long stop_after_steps;    // --stop-after-steps N: this job trains N steps, then checkpoints and exits 3 (0 = off)
	double time_limit;        // --time-limit S: this job stops after S seconds the same way (0 = off)
	int warmup;               // bench: steps excluded from the timing
	int batch, chunks, window;
	int pin_chunks;           // --pin-chunks: all of chunk c's tasks on one worker (dnn_plan_pin_chunks)
	int batchnorm_global;     // --batchnorm global|local: batch-norm statistics over the global batch (1) or per chunk (0)
	int bf16;                 // --precision bf16 (1) or fp32 (0): dense, lm_head and attention GEMMs in bf16
	int deterministic;        // --deterministic on|off: sums over chunks in a fixed order (1, graph/chunksum.h) or
	                          // StarPU's REDUX, in the order workers finish (0) [1]
	dnn_optim_config optim;
	int cosine;               // 1: cosine learning-rate decay to 0 over the run; 0: constant
	double warmup_epochs;     // --warmup-epochs E: linear warm-up to the peak lr over E epochs (0 = none)
	long warmup_steps;        // --warmup-steps N: the same over N steps (0 = none; not with warmup_epochs)
	int lr_ref_batch;         // --lr-ref-batch N: --lr is for a global batch of N, scaled by batch/N (0 = off)
	int lr_set;               // --lr was given (else the app sets optim.lr to dnn_train_opts_default_lr's)
	int lm_recipe;            // a language model without --optimizer: the app set the LM recipe (apps/starpu_anp.c)
	uint64_t seed;
	int seed_set;             // --seed was given (a resume then refuses a checkpoint of another seed)
	int limit_train, limit_test; // 0 = whole set
	int eval;                 // evaluate on the test set after each epoch
	const char *metrics_path;
	const char *checkpoint_out;  // train --checkpoint: written after every epoch (and at the end)
	long checkpoint_every;       // also every N steps (0 = only at epoch ends)
	const char *resume_path;     // train --resume: the checkpoint to continue from
	const char *checkpoint_in;   // eval, predict, export --checkpoint: the checkpoint to read
	int quiet;
	dnn_dist_mode mode;       // --mode sync|async (multi-rank runs)
	dnn_allreduce allreduce;  // --allreduce tree|ring|rhd|ps (sync, multi-rank runs)
	int grad_bf16;            // --grad-precision bf16 (1) or fp32 (0): sync, the all-reduces' messages in
	                          // bf16 (half the bytes), their sums in fp32 (graph/allreduce/) [0]
	double bucket_mb;         // --bucket-mb M: sync, pack the gradients into all-reduce buckets of M MiB (0 = off;
	                          // negative = auto, dnn_dist_choose_bucket_mb)
	int staleness;            // --staleness S (async)
	int async_lookahead;      // async: estimate the others' S missing steps by ours [1]; --no-lookahead
	double step_timeout;      // --step-timeout S: multi-rank runs stop when no step completes for S s (0 = off) [300]
	long allreduce_bytes;     // bench --allreduce-bytes S: time the all-reduce of S bytes alone (0 = a training bench)
	/* ANP app (anp.h, imagefolder.h) */
	int input;                // --input N: the net's input is N x N (0 = as in the net file)
	double val_fraction;      // --val-fraction X: held out of an image folder without val/ [0.1]
	const char *report_path;  // --report FILE: JSON metrics (image folders)
	const char *dump_logits;  // eval --dump-logits FILE: every evaluated sample's logits, a NumPy .npy file
	/* language models (docs/transformers.md): a net whose input line is `input NAME tokens T` */
	int data_set;             // --data was given (a language model refuses it)
	const char *text_path;    // --text FILE: UTF-8 text, byte-level tokens
	const char *tokens_path;  // --tokens DIR|FILE: nanoGPT's train.bin/val.bin directory, or an llm.c .bin
	const char *val_tokens_path; // --val-tokens FILE: llm.c .bin of the validation set (with --tokens FILE)
	int val_batches;          // --val-batches N: validation windows per evaluation, in batches (0 = all) [20]
	long eval_every;          // train --eval-every N: also evaluate every N steps (0 = at epoch ends only)
	int lm;                   // set by dnn_cmd_check_net: the net is a language model (its input is tokens)
} dnn_train_opts;

/* The defaults of `starpu_anp train` (the values --help shows in brackets). */
void dnn_train_opts_default(dnn_train_opts *o);
/* --lr when it is not given: the peak rate of the optimiser's recipe in docs/large-batch.md for a
 * global batch of `batch`: sgd 0.05 at every batch, lars 4 x sqrt(batch / 4096), lamb
 * 0.04 x sqrt(batch / 4096); 0 for adamw, which has no documented recipe (--lr is then required). */
float dnn_train_opts_default_lr(dnn_optimizer opt, int batch);
/* 1 when NAME (a built-in net or a .net file) is a language model (its input line is `tokens`),
 * 0 when it is not, -1 when it does not load (the run that uses it reports why). */
int dnn_net_is_language_model(const char *name);

/* ---------------------------------------------------------------- commands
 * Each returns the process exit status (0, or 1 on a runtime error, whose one-line message is
 * already printed). */

/* `starpu_anp nets`: every built-in net with its input, parameters and GFLOPs. No StarPU. */
int dnn_cmd_nets(void);
/* Loads o->net (applying --input) before StarPU starts, so net-file errors come fast and alone;
 * with print_summary, prints the per-layer summary (--summary). No StarPU. For eval, predict
 * and export it reads the checkpoint o->checkpoint_in instead: its net, checked against
 * --net and --input when given; o->net then becomes the checkpoint's net name when --net was
 * not given. For train --resume, the net must be the checkpoint's (exit 2 otherwise, as for the
 * others). Returns the exit status: 0, 1 (bad file) or 2 (usage error), the line printed. */
int dnn_cmd_check_net(dnn_train_opts *o, int print_summary);

/* 1 when this CPU runs AVX512_BF16 (cpuid), which --precision bf16 needs (codelets/gemm_bf16.c). */
int dnn_cpu_has_bf16(void);

/* The project's environment variables (README "Environment variables": DNN_FUSE, DNN_CONV_ALGO,
 * DNN_CUDA_MATH, DNN_CUDA_WORKSPACE_MB, DNN_TRACES_DIR, ..., and the ANP_* ones), parsed once, before
 * StarPU starts, into the execution config that the runtime hands to the layers that use them.
 * 0, or -1 with one line in err naming the variable and the values it accepts (a usage error: exit 2). */
int dnn_knobs_load(char *err, size_t errlen);

/* Start StarPU with our settings: OpenBLAS at one thread per worker, cuBLAS/cuDNN handles on
 * every CUDA worker. With use_mpi, StarPU-MPI is started too (it initialises MPI). Loads the
 * knobs first unless dnn_knobs_load already did. Returns 0; -ENODEV when StarPU finds no worker
 * at all (tests map that to exit 77); or -1 (StarPU, a bad knob, the cuBLAS/cuDNN set-up of a
 * CUDA worker), with one line in err for each. */
int dnn_runtime_init(int *argc, char ***argv, int use_mpi, char *err, size_t errlen);
void dnn_runtime_shutdown(void);
/* --precision bf16 on the workers StarPU started: every CPU worker needs AVX512_BF16
 * (dnn_cpu_has_bf16), every CUDA worker compute capability 8.0 or later; a run on CUDA workers
 * alone (STARPU_NCPU=0) needs no bf16 CPU. 0, or -1 with one line in err (a usage error). */
int dnn_runtime_check_bf16(char *err, size_t errlen);

/* StarPU must be running for these. */
int dnn_cmd_train(const dnn_train_opts *o); /* train and bench */
/* bench --allreduce-bytes: the all-reduce microbenchmark (runtime/allreduce_bench.c). */
int dnn_cmd_allreduce_bench(const dnn_train_opts *o);
int dnn_cmd_eval(const dnn_train_opts *o);
/* The top-5 classes with probabilities of each image (1 when an image could not be read). */
int dnn_cmd_predict(const dnn_train_opts *o, const char *const *images, int nimages);
/* `starpu_anp generate`: text from a byte-level language model's checkpoint (runtime/generate.c). */
typedef struct {
	const char *prompt;       // --prompt TEXT (UTF-8; its bytes are the first tokens) ["\n"]
	long tokens;              // --tokens N: bytes to generate [256]
	double temperature;       // --temperature X: 0 = greedy (argmax) [0.8]
	int top_k;                // --top-k K: sample among the K likeliest (0 = all) [40]
} dnn_generate_opts;
int dnn_cmd_generate(const dnn_train_opts *o, const dnn_generate_opts *g);
/* `starpu_anp export`: the eval-mode net of checkpoint o->checkpoint_in as an ONNX model at
 * onnx_path (runtime/onnx_export.c). */
int dnn_cmd_export(const dnn_train_opts *o, const char *onnx_path);

/* ---------------------------------------------------------------- traces (traces/trace.h)
 * dnn_trace_setup before dnn_runtime_init: 0, or -1 with one line in err (no FxT in this
 * StarPU, or DIR unusable). dnn_trace_finish after dnn_runtime_shutdown: 0, or 1 after printing
 * one error line. dnn_trace_tool_main: `starpu_anp trace-summary|sweep ...`, the tool's status. */
int dnn_trace_setup(const char *dir, char *err, size_t errlen);
int dnn_trace_finish(void);
int dnn_trace_tool_main(const char *tool, int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
