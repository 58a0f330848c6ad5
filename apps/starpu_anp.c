/* starpu_anp — train / eval / bench DNNs on StarPU.
 *
 *   starpu_anp train [options]     train on Fashion-MNIST (default) and evaluate each epoch
 *   starpu_anp eval  --checkpoint F [options]
 *   starpu_anp predict --checkpoint F [options] IMAGE...   top-5 classes of each image
 *   starpu_anp bench [options]     training throughput on synthetic data
 *   starpu_anp export --checkpoint F --onnx M.onnx   the eval-mode net as an ONNX model
 *   starpu_anp nets                list the built-in nets with their sizes
 *
 * Exit status: 0 success, 1 runtime error, 2 usage error, 3 train stopped early with its checkpoint
 * (--stop-after-steps, --time-limit, SIGTERM, SIGUSR1). Schedulers and worker counts come from
 * StarPU's own environment (STARPU_SCHED, STARPU_NCPU, STARPU_NCUDA, ...).
 */
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "starpu_anp.h"
#ifdef DNN_SIMGRID
/* The simulation build (docs/SIMULATION.md): StarPU's libstarpu provides main() and calls ours. */
#include <starpu_simgrid_wrap.h>
#endif

static const char *prog = "starpu_anp";
static const char *cmd = "";

static void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void usage_error(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s %s: ", prog, cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see '%s %s --help')\n", prog, cmd);
	exit(2);
}

static long parse_long_opt(const char *opt, const char *v, long lo, long hi)
{
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno || end == v || *end || x < lo || x > hi)
		usage_error("--%s: '%s' is not an integer in [%ld, %ld]", opt, v, lo, hi);
	return x;
}

static float parse_float_opt(const char *opt, const char *v, double lo, double hi)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (errno || end == v || *end || !(x >= lo && x <= hi))
		usage_error("--%s: '%s' is not a number in [%g, %g]", opt, v, lo, hi);
	return (float)x;
}

static void help_main(void)
{
	printf("usage: %s <command> [options]\n\n"
	       "Train deep neural networks as StarPU task graphs over CPU cores, GPUs and MPI ranks.\n\n"
	       "commands:\n"
	       "  train   train a net (default: lenet5 on Fashion-MNIST), evaluating after each epoch\n"
	       "  eval    evaluate a checkpoint on the test set\n"
	       "  predict the top-5 classes (ANPs) of image files, with probabilities, from a checkpoint\n"
	       "  generate text from a byte-level language model's checkpoint (docs/transformers.md)\n"
	       "  bench   training throughput on synthetic data (images/s, GFLOP/s)\n"
	       "  export  write a checkpoint's eval-mode net as an ONNX model (onnxruntime, ...)\n"
	       "  nets    list the built-in nets\n"
	       "  trace-summary DIR   summarise a --trace directory (traces/trace_summary.py)\n"
	       "  sweep   scheduler x worker-count throughput sweep (traces/sweep.sh --help)\n\n"
	       "'%s <command> --help' lists the command's options. StarPU's environment variables choose\n"
	       "the scheduler and workers, e.g. STARPU_SCHED=dmda STARPU_NCPU=2 %s train.\n\n"
	       "Exit status: 0 done, 1 runtime error, 2 usage error, 3 train stopped before the end of\n"
	       "its run with the checkpoint written (--stop-after-steps, --time-limit, SIGTERM, SIGUSR1).\n",
	       prog, prog, prog);
}

static void help_export(void)
{
	printf("usage: %s export --checkpoint FILE --onnx MODEL.onnx [--net NAME|FILE] [--input N]\n\n"
	       "Writes the checkpoint's net in eval mode as a standard ONNX model (opset 17): conv, batch\n"
	       "norm, ReLU, LeakyReLU, pooling, dense (Gemm), add, dropout (identity), softmax.\n"
	       "  input  'pixels': float32 N x C x H x W, pixel values 0-255 (the centre crop; the\n"
	       "         normalisation is inside the model)\n"
	       "  output 'probabilities': float32 N x classes (softmax)\n"
	       "  metadata_props: class_names (a JSON list), input_mean, input_std, short_side, net\n\n"
	       "  --checkpoint FILE    checkpoint to export (required; it carries its net)\n"
	       "  --onnx FILE          the ONNX file to write (required)\n"
	       "  --net, --input       only for a version-1 checkpoint, which does not carry its net;\n"
	       "                       given for a newer one, they must be the checkpoint's\n"
	       "  -h, --help           this help\n\n"
	       "The last line of output is 'result: key=value ...'.\n", prog);
}

static void help_generate(void)
{
	printf("usage: %s generate --checkpoint FILE [options]\n\n"
	       "Writes text from a byte-level language model (a net whose input line is 'input NAME tokens T'\n"
	       "and whose vocabulary is 256: trained on --text): the prompt, then one byte per forward pass\n"
	       "on the last T bytes, to stdout as it goes.\n\n"
	       "  --checkpoint FILE    the model (required; it carries its net)\n"
	       "  --net NAME|FILE      only for a version-1 checkpoint, which does not carry its net\n"
	       "  --prompt TEXT        the text to continue (its UTF-8 bytes) [a newline]\n"
	       "  --tokens N           bytes to generate [256]\n"
	       "  --temperature X      sample from softmax(logits / X); 0: greedy, the likeliest byte\n"
	       "                       (deterministic) [0.8]\n"
	       "  --top-k K            sample among the K likeliest bytes; 0: all [40]\n"
	       "  --seed S             the sampler's seed: the same command gives the same text [1]\n"
	       "  --quiet              no summary line on stderr\n"
	       "  -h, --help           this help\n\n"
	       "stdout holds only the text; the summary 'result: key=value ...' goes to stderr.\n", prog);
}

/* A language model's data (train, eval), and eval's --dump-logits. */
static void help_text_data(const char *c)
{
	if (strcmp(c, "eval") == 0)
		printf("  --dump-logits FILE   write every evaluated sample's eval-mode logits, in sample order, as\n"
		       "                       a NumPy .npy of float32: N x classes, or N x T x vocab for a language\n"
		       "                       model (sample i: validation window i)\n");
	if (strcmp(c, "train") != 0 && strcmp(c, "eval") != 0)
		return;
	printf("  --text FILE          a language model's data: UTF-8 text, one token per byte (vocabulary\n"
	       "                       256); its last tenth is the validation set [a net whose input is\n"
	       "                       tokens: the default corpus, the King James Bible that\n"
	       "                       scripts/bootstrap.sh writes to ~/.cache/starpu-anp/corpus/kjv.txt]\n"
	       "  --tokens DIR|FILE    token ids: DIR holds nanoGPT's train.bin and val.bin (little-endian\n"
	       "                       uint16, no header); FILE is an llm.c .bin (header magic 20240520,\n"
	       "                       uint16 tokens), whose validation set is --val-tokens FILE2 or else\n"
	       "                       its last tenth. Every id must be below the net's vocabulary\n"
	       "  --val-tokens FILE    the llm.c .bin of the validation tokens (with --tokens FILE)\n"
	       "  --val-batches N      a language model's evaluation reads the first N x --batch validation\n"
	       "                       windows (0: all) [%s]\n", !strcmp(c, "eval") ? "all" : "20");
}

/* train's own options: the run's length, jobs, metrics and checkpoints. */
static void help_train_run(void)
{
	printf("  --epochs E           epochs [1]\n"
	       "  --max-steps N        the run is N steps long (checkpoint and evaluate there): this sets\n"
	       "                       the run's length, so the learning-rate schedule (warm-up,\n"
	       "                       cosine) spans N steps; to stop early without changing the run,\n"
	       "                       use --stop-after-steps or --time-limit\n"
	       "  --stop-after-steps N this job trains N steps (counted from --resume's step), then\n"
	       "                       writes the checkpoint and exits 3; --resume continues the same\n"
	       "                       run, bit for bit (needs --checkpoint)\n"
	       "  --time-limit S       the same once S seconds have passed since the job started: the\n"
	       "                       steps in flight (--window) finish first, so leave a margin\n"
	       "                       (needs --checkpoint). SIGTERM and SIGUSR1 (Slurm's warning\n"
	       "                       before the wall-time limit) stop the same way; under mpirun\n"
	       "                       send SIGUSR1 to mpirun, which forwards it (on SIGTERM Open\n"
	       "                       MPI's mpirun returns at once and leaves its ranks running),\n"
	       "                       or the signal to every rank, as Slurm does; every rank stops\n"
	       "                       after the step rank 0 picks. Exit status 3 = stopped,\n"
	       "                       checkpoint written\n"
	       "  --limit-train N      use only the first N training samples\n"
	       "  --limit-test N       evaluate on only the first N test samples\n"
	       "  --no-eval            skip the per-epoch test-set evaluation\n"
	       "  --eval-every N       also evaluate every N steps (a language model: an epoch is every\n"
	       "                       window, far longer than a run: evaluate inside it) [off]\n"
	       "  --metrics FILE       write per-step and per-epoch metrics as CSV\n"
	       "  --checkpoint FILE    write a checkpoint after every epoch (atomically)\n"
	       "  --checkpoint-every N also write it every N steps\n"
	       "  --resume FILE        continue from a checkpoint (same net, data and options)\n"
	       "  --summary            print the net's per-layer summary and exit\n");
}

/* train and bench: the learning rate, its schedule and the optimiser. */
static void help_optimizer(void)
{
	printf("  --lr X               learning rate (peak of the schedule) [the --optimizer's recipe in\n"
	       "                       docs/large-batch.md, for a global batch B (--lr-ref-batch if given,\n"
	       "                       else --batch): sgd 0.05; lars 4 x sqrt(B/4096); lamb\n"
	       "                       0.04 x sqrt(B/4096); adamw none: --lr required]\n"
	       "  --lr-schedule S      cosine (decay to 0 over the run) or constant [cosine]\n"
	       "  --warmup-epochs E    linear warm-up from lr/steps to the peak over E epochs (fractions\n"
	       "                       allowed), then the schedule over the rest of the run [0]\n"
	       "  --warmup-steps N     the same over N steps (language models: an epoch of every text\n"
	       "                       window is far longer than a run); not with --warmup-epochs\n"
	       "  --lr-ref-batch N     --lr is for a global batch of N: scaled to --batch by batch/N\n"
	       "                       (the linear scaling rule) [off]\n"
	       "  --optimizer O        sgd (momentum), lars (layer-wise trust ratio, You et al. 2017),\n"
	       "                       adamw (decoupled weight decay, Loshchilov & Hutter) or lamb\n"
	       "                       (AdamW's direction with a layer-wise trust ratio, You et al. 2020)\n"
	       "                       [sgd; a language model (input `tokens`): adamw, with nanoGPT's\n"
	       "                       recipe where its options are not given: --lr 1e-3, --beta2 0.99,\n"
	       "                       --weight-decay 0.1, --clip-grad-norm 1, --warmup-steps 100]\n"
	       "  --momentum X         SGD and LARS momentum [0.9]\n"
	       "  --weight-decay X     weight decay (not applied to biases and batch-norm) [5e-4]\n"
	       "  --lars-eta X         LARS trust coefficient eta [0.001]\n"
	       "  --beta1 X, --beta2 X, --eps X  AdamW's and LAMB's moments and epsilon [0.9, 0.999, 1e-8]\n"
	       "  --clip-grad-norm X   scale every gradient by min(1, X / (norm + 1e-6)) before the\n"
	       "                       update, norm = the L2 norm of all the model's gradients averaged\n"
	       "                       over the global batch (all chunks and ranks), as PyTorch's\n"
	       "                       clip_grad_norm_; every optimizer; its sums run in a fixed order\n"
	       "                       (--deterministic); --metrics' grad_norm column is the norm\n"
	       "                       before clipping. Not with --mode async (no rank sees the\n"
	       "                       global gradient there); 0 = off [0]\n");
}

static void help_cmd(const char *c)
{
	if (!strcmp(c, "export")) {
		help_export();
		return;
	}
	if (!strcmp(c, "generate")) {
		help_generate();
		return;
	}
	printf("usage: %s %s [options]\n\n", prog, c);
	if (!strcmp(c, "eval") || !strcmp(c, "predict"))
		printf("  --net NAME|FILE      not needed: the checkpoint carries its net (given, it must be the\n"
		       "                       checkpoint's); required for a version-1 checkpoint\n");
	else
		printf("  --net NAME|FILE      built-in net (see '%s nets') or a .net file [lenet5]\n", prog);
	if (strcmp(c, "bench") != 0)
		printf("  --data NAME|DIR      fashion-mnist (Debian's dataset-fashion-mnist), synthetic (seeded random\n"
		       "                       samples of the net's shape), or a directory of IDX files, CIFAR-10\n"
		       "                       binary batches, or images: one subfolder per class (adjective_noun),\n"
		       "                       optionally under DIR/train and DIR/val [fashion-mnist]\n");
	help_text_data(c);
	printf("  --batch B            global batch size (a language model: windows of T tokens) [64]\n"
	       "  --chunks K           chunks (micro-batches) per batch [2 x workers; 1 x on CPU workers only\n"
	       "                       for a net without batch norm, or with it where chunks would hold fewer\n"
	       "                       than 32 images]\n");
	printf("  --input N            the net's input is N x N (rewrites its input line; image folders are\n"
	       "                       resized and cropped to it) [as in the net file%s]\n",
	       !strcmp(c, "eval") || !strcmp(c, "predict") ? "; eval, predict: the checkpoint's" : "");
	if (strcmp(c, "predict") != 0)
		printf("  --precision P        fp32, or bf16: dense, lm_head, attention and conv multiply\n"
		       "                       bf16-rounded operands with fp32 sums (oneDNN on CPUs with\n"
		       "                       AVX512_BF16, cuBLAS and cuDNN on GPUs); weights, optimiser state,\n"
		       "                       loss, softmax, normalisation and every other op stay fp32, and\n"
		       "                       so do the activations kept for backward. Refused where CPU\n"
		       "                       workers lack AVX512_BF16 (STARPU_NCPU=0: GPUs alone need none)\n"
		       "                       or a GPU is older than compute capability 8.0 [fp32]\n");
	if (strcmp(c, "train") == 0 || strcmp(c, "eval") == 0)
		printf("  --val-fraction X     image folder without val/: hold out this fraction of each class,\n"
		       "                       chosen by a hash of each file's path (the same in every run) [0.1]\n"
		       "  --report FILE        write the metrics as JSON (image folders: top-1/top-5, adjective and\n"
		       "                       noun accuracy, most-confused pairs, skipped files)\n");
	if (strcmp(c, "predict") == 0) {
		printf("  --checkpoint FILE    checkpoint to predict with (required; its class names are printed)\n"
		       "  IMAGE...             JPEG/PNG/... files: prints 'IMAGE: class=p ...' with the 5 best\n");
	} else if (strcmp(c, "eval") == 0) {
		printf("  --checkpoint FILE    checkpoint to evaluate (required)\n"
		       "  --limit N            evaluate only the first N test samples\n");
	} else {
		help_optimizer();
		printf("  --window W           iterations in flight at most [2]\n"
		       "  --pin-chunks         run all of chunk c's tasks (load, forward, backward) on one\n"
		       "                       worker: K chunks on n CUDA workers (CPU workers without GPUs)\n"
		       "                       in blocks, chunk c on worker c*n/K; the scheduler still\n"
		       "                       places the rest [off]\n"
		       "  --batchnorm B        batch-norm statistics in training: global (over the whole\n"
		       "                       global batch: every chunk and rank; K chunks and N ranks then\n"
		       "                       train as one) or local (each chunk's own, as PyTorch DDP) [local]\n"
		       "  --deterministic D    on: every sum over chunks (gradients, batch-norm statistics) is\n"
		       "                       added in an order fixed by chunk index, so the same command gives\n"
		       "                       the same bits under every STARPU_SCHED, worker count and\n"
		       "                       --pin-chunks, at the cost of K-1 gradient copies and adds;\n"
		       "                       off: StarPU's REDUX adds per-worker copies in the order the\n"
		       "                       workers finish (2+ workers: other bits from run to run).\n"
		       "                       --mode async is never bit-identical across runs: its staleness\n"
		       "                       is timing [on]\n"
		       "  --seed S             seed for initialisation and shuffling [1]\n"
		       "  --mode M             under mpirun: sync (all-reduce every step) or async (sharded\n"
		       "                       parameter server, bounded staleness) [sync]\n"
		       "  --allreduce A        sync under mpirun: how gradients are summed over the ranks, tree\n"
		       "                       (starpu_mpi_redux_data into rank 0, then sent to all), ring\n"
		       "                       (reduce-scatter/all-gather over N chunks), rhd (recursive\n"
		       "                       halving-doubling, power-of-two rank counts), ps (a synchronous\n"
		       "                       parameter server: each tensor summed on one rank, round robin,\n"
		       "                       as TensorFlow 1.x's) or auto: the tree when every rank is on\n"
		       "                       one node, else rhd for a power-of-two number of ranks and the\n"
		       "                       ring otherwise [auto]\n"
		       "  --bucket-mb M        sync under mpirun: pack the gradients smaller than M MiB, in\n"
		       "                       backward order, into buckets of up to M MiB, each all-reduced\n"
		       "                       as one tensor as soon as its last gradient is complete, with\n"
		       "                       --allreduce's algorithm (the tree for a bucket under N x 1 KiB)\n"
		       "                       (fewer, bigger messages); 0: off; auto: off when every rank is\n"
		       "                       on one node, else 1 MiB, or a quarter of the model's gradients\n"
		       "                       if less (a whole small net in one bucket would not overlap\n"
		       "                       the backward any more) [auto]\n"
		       "  --grad-precision G   sync under mpirun: the all-reduces' messages in fp32, or in bf16\n"
		       "                       (half the bytes; each sender rounds to nearest even, every sum\n"
		       "                       stays fp32, the same bits on every rank and run; not with\n"
		       "                       --mode async) [fp32]\n"
		       "  --staleness S        async: step i uses server parameters of step i-S or newer [4]\n"
		       "  --no-lookahead       async: compute gradients on the stale parameters as they are,\n"
		       "                       without estimating the other ranks' last S steps by this\n"
		       "                       rank's own (README, 'Across nodes')\n"
		       "  --step-timeout S     under mpirun: if no step completes for S seconds (a rank or\n"
		       "                       host is unreachable), name the step and rank and stop the job\n"
		       "                       (MPI_Abort after flushing --metrics); 0 = never [300]\n");
	}
	if (strcmp(c, "train") == 0)
		help_train_run();
	if (strcmp(c, "bench") == 0)
		printf("  --steps N            timed steps [20]\n"
		       "  --warmup N           untimed steps first [3]\n"
		       "  --allreduce-bytes S  under mpirun: time only the sync all-reduce (--allreduce, --bucket-mb)\n"
		       "                       of one S-byte tensor per rank, --steps times back to back, and\n"
		       "                       report allreduce_s (docs/NETWORK.md) [off]\n");
	printf("  --trace DIR          record an FxT trace; at exit write DIR/paje.trace (ViTE), tasks.rec,\n"
	       "                       dag.dot, trace.svg, summary.txt and gantt.png (docs/traces.md)\n");
	printf("  --quiet              no progress output (the result line is still printed)\n"
	       "  -h, --help           this help\n\n"
	       "The last line of output is 'result: key=value ...'.\n");
}

/* ---------------------------------------------------------------- the commands */
/* One bit per command that takes options; an option lists the commands it applies to (any other
 * command refuses it as a usage error instead of ignoring it). */
enum { C_TRAIN = 1, C_EVAL = 2, C_BENCH = 4, C_PREDICT = 8, C_EXPORT = 16, C_GENERATE = 32 };
#define C_ALL (C_TRAIN | C_EVAL | C_BENCH | C_PREDICT | C_EXPORT | C_GENERATE)
#define C_RUNS (C_TRAIN | C_EVAL | C_BENCH | C_PREDICT) /* all but export and generate */
#define C_TRAINS (C_TRAIN | C_BENCH)                   /* the training loop */

/* Everything the command line sets. */
typedef struct {
	int cmd;                 /* C_* */
	dnn_train_opts o;
	int summary;
	const char *checkpoint;  /* --checkpoint: written (train) or read (eval, predict, export) */
	const char *trace_dir, *onnx_path;
	const char *const *images; /* predict: the arguments after the options */
	int nimages;
	dnn_generate_opts gen;   /* generate */
	int optimizer_set, wd_set, beta2_set, clip_set; /* given on the command line (the language-model recipe) */
} cli;

static const struct {
	const char *name;
	int bit;
} commands[] = {{"train", C_TRAIN}, {"eval", C_EVAL}, {"bench", C_BENCH}, {"predict", C_PREDICT}, {"export", C_EXPORT},
	      {"generate", C_GENERATE}};

/* ---------------------------------------------------------------- the options */
enum { O_NET = 1000, O_DATA, O_BATCH, O_CHUNKS, O_LR, O_MOM, O_WD, O_WINDOW, O_SEED, O_STEPS, O_EPOCHS,
       O_LIMIT_TRAIN, O_LIMIT_TEST, O_NO_EVAL, O_METRICS, O_CHECKPOINT, O_RESUME, O_SUMMARY, O_WARMUP, O_QUIET,
       O_LIMIT, O_BSTEPS, O_SCHEDULE, O_CKPT_EVERY, O_MODE, O_ALLREDUCE, O_STALENESS, O_NO_LOOKAHEAD,
       O_STEP_TIMEOUT, O_PIN_CHUNKS, O_BATCHNORM, O_DETERMINISTIC, O_BUCKET_MB, O_TRACE, O_INPUT, O_VAL_FRACTION, O_REPORT, O_ONNX,
       O_OPTIMIZER, O_WARMUP_EPOCHS, O_WARMUP_STEPS, O_LR_REF_BATCH, O_BETA1, O_BETA2, O_EPS, O_LARS_ETA, O_AR_BYTES,
       O_STOP_AFTER, O_TIME_LIMIT, O_CLIP, O_TEXT, O_TOKENS, O_VAL_TOKENS, O_VAL_BATCHES, O_EVAL_EVERY, O_PROMPT,
       O_TEMPERATURE, O_TOP_K, O_DUMP_LOGITS, O_PRECISION, O_GRAD_PRECISION };

/* Each option: its name, whether it takes a value, its id, and the commands it applies to. */
static const struct {
	const char *name;
	int has_arg, id, cmds;
} options[] = {
	{"net", 1, O_NET, C_ALL},
	{"data", 1, O_DATA, C_TRAIN | C_EVAL},
	{"text", 1, O_TEXT, C_TRAIN | C_EVAL},
	{"tokens", 1, O_TOKENS, C_TRAIN | C_EVAL | C_GENERATE}, /* generate: how many */
	{"val-tokens", 1, O_VAL_TOKENS, C_TRAIN | C_EVAL},
	{"val-batches", 1, O_VAL_BATCHES, C_TRAIN | C_EVAL},
	{"eval-every", 1, O_EVAL_EVERY, C_TRAIN},
	{"prompt", 1, O_PROMPT, C_GENERATE},
	{"temperature", 1, O_TEMPERATURE, C_GENERATE},
	{"top-k", 1, O_TOP_K, C_GENERATE},
	{"batch", 1, O_BATCH, C_RUNS},
	{"chunks", 1, O_CHUNKS, C_RUNS},
	{"lr", 1, O_LR, C_TRAINS},
	{"momentum", 1, O_MOM, C_TRAINS},
	{"weight-decay", 1, O_WD, C_TRAINS},
	{"window", 1, O_WINDOW, C_TRAINS},
	{"pin-chunks", 0, O_PIN_CHUNKS, C_TRAINS},
	{"batchnorm", 1, O_BATCHNORM, C_TRAINS},
	{"deterministic", 1, O_DETERMINISTIC, C_TRAINS},
	{"seed", 1, O_SEED, C_RUNS | C_GENERATE},
	{"max-steps", 1, O_STEPS, C_TRAIN},
	{"stop-after-steps", 1, O_STOP_AFTER, C_TRAIN},
	{"time-limit", 1, O_TIME_LIMIT, C_TRAIN},
	{"steps", 1, O_BSTEPS, C_BENCH},
	{"epochs", 1, O_EPOCHS, C_TRAIN},
	{"limit-train", 1, O_LIMIT_TRAIN, C_TRAIN},
	{"limit-test", 1, O_LIMIT_TEST, C_TRAIN},
	{"limit", 1, O_LIMIT, C_EVAL},
	{"no-eval", 0, O_NO_EVAL, C_TRAIN},
	{"metrics", 1, O_METRICS, C_TRAIN},
	{"checkpoint", 1, O_CHECKPOINT, C_TRAIN | C_EVAL | C_PREDICT | C_EXPORT | C_GENERATE},
	{"resume", 1, O_RESUME, C_TRAIN},
	{"summary", 0, O_SUMMARY, C_TRAIN},
	{"warmup", 1, O_WARMUP, C_BENCH},
	{"quiet", 0, O_QUIET, C_RUNS | C_GENERATE},
	{"lr-schedule", 1, O_SCHEDULE, C_TRAINS},
	{"optimizer", 1, O_OPTIMIZER, C_TRAINS},
	{"warmup-epochs", 1, O_WARMUP_EPOCHS, C_TRAINS},
	{"warmup-steps", 1, O_WARMUP_STEPS, C_TRAINS},
	{"lr-ref-batch", 1, O_LR_REF_BATCH, C_TRAINS},
	{"beta1", 1, O_BETA1, C_TRAINS},
	{"beta2", 1, O_BETA2, C_TRAINS},
	{"eps", 1, O_EPS, C_TRAINS},
	{"lars-eta", 1, O_LARS_ETA, C_TRAINS},
	{"clip-grad-norm", 1, O_CLIP, C_TRAINS},
	{"checkpoint-every", 1, O_CKPT_EVERY, C_TRAIN},
	{"mode", 1, O_MODE, C_TRAINS},
	{"staleness", 1, O_STALENESS, C_TRAINS},
	{"no-lookahead", 0, O_NO_LOOKAHEAD, C_TRAINS},
	{"allreduce", 1, O_ALLREDUCE, C_TRAINS},
	{"step-timeout", 1, O_STEP_TIMEOUT, C_TRAINS},
	{"bucket-mb", 1, O_BUCKET_MB, C_TRAINS},
	{"grad-precision", 1, O_GRAD_PRECISION, C_TRAINS},
	{"allreduce-bytes", 1, O_AR_BYTES, C_BENCH},
	{"trace", 1, O_TRACE, C_RUNS},
	{"input", 1, O_INPUT, C_ALL},
	{"val-fraction", 1, O_VAL_FRACTION, C_TRAIN | C_EVAL},
	{"report", 1, O_REPORT, C_TRAIN | C_EVAL},
	{"dump-logits", 1, O_DUMP_LOGITS, C_EVAL},
	{"precision", 1, O_PRECISION, C_TRAIN | C_EVAL | C_BENCH},
	{"onnx", 1, O_ONNX, C_EXPORT},
	{"help", 0, 'h', C_ALL},
};
#define NOPTIONS (int)(sizeof(options) / sizeof(options[0]))

static void check_readable_file(const char *opt, const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		usage_error("--%s: %s: %s", opt, path, strerror(errno));
	if (S_ISDIR(st.st_mode))
		usage_error("--%s: %s: is a directory", opt, path);
}

static void check_exists(const char *opt, const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		usage_error("--%s: %s: %s", opt, path, strerror(errno));
}

static void check_writable_parent(const char *opt, const char *path)
{
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		usage_error("--%s: %s: is a directory", opt, path);
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash) {
		*slash = '\0';
		if (dir[0] && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)))
			usage_error("--%s: directory '%s' does not exist", opt, dir);
	}
}

/* One of the words, or a usage error naming the option and the words. */
static int parse_word(const char *opt, const char *v, const char *a, const char *b)
{
	if (strcmp(v, a) && strcmp(v, b))
		usage_error("--%s: '%s' is not %s or %s", opt, v, a, b);
	return strcmp(v, a) == 0 ? 0 : 1;
}

static dnn_optimizer parse_optimizer(const char *opt, const char *v)
{
	if (strcmp(v, "sgd") == 0)
		return DNN_OPT_SGD;
	if (strcmp(v, "lars") == 0)
		return DNN_OPT_LARS;
	if (strcmp(v, "adamw") == 0)
		return DNN_OPT_ADAMW;
	if (strcmp(v, "lamb") == 0)
		return DNN_OPT_LAMB;
	usage_error("--%s: '%s' is not sgd, lars, adamw or lamb", opt, v);
	return DNN_OPT_SGD;
}

/* The value of option `id` (already known to apply to the command) into c. */
static void set_option(cli *c, int id, const char *name, const char *v)
{
	dnn_train_opts *o = &c->o;
	switch (id) {
	case O_NET: o->net = v, o->net_set = 1; break;
	case O_ONNX: check_writable_parent(name, v); c->onnx_path = v; break;
	case O_DATA: o->data_dir = v, o->data_set = 1; break;
	case O_TEXT: check_readable_file(name, v); o->text_path = v; break;
	case O_TOKENS:
		if (c->cmd == C_GENERATE) {
			c->gen.tokens = parse_long_opt(name, v, 1, 1L << 30);
			break;
		}
		check_exists(name, v);
		o->tokens_path = v;
		break;
	case O_VAL_TOKENS: check_readable_file(name, v); o->val_tokens_path = v; break;
	case O_VAL_BATCHES: o->val_batches = (int)parse_long_opt(name, v, 0, INT_MAX); break;
	case O_EVAL_EVERY: o->eval_every = parse_long_opt(name, v, 1, 1L << 40); break;
	case O_PROMPT: c->gen.prompt = v; break;
	case O_TEMPERATURE: c->gen.temperature = parse_float_opt(name, v, 0, 100); break;
	case O_TOP_K: c->gen.top_k = (int)parse_long_opt(name, v, 0, 1 << 20); break;
	case O_BATCH: o->batch = (int)parse_long_opt(name, v, 1, 1 << 20); break;
	case O_CHUNKS: o->chunks = (int)parse_long_opt(name, v, 1, 1 << 16); break;
	case O_LR: o->optim.lr = parse_float_opt(name, v, 0, 100), o->lr_set = 1; break;
	case O_MOM: o->optim.momentum = parse_float_opt(name, v, 0, 0.9999); break;
	case O_WD: o->optim.weight_decay = parse_float_opt(name, v, 0, 1), c->wd_set = 1; break;
	case O_WINDOW: o->window = (int)parse_long_opt(name, v, 1, 64); break;
	case O_PIN_CHUNKS: o->pin_chunks = 1; break;
	case O_SEED: o->seed = (uint64_t)parse_long_opt(name, v, 0, LONG_MAX), o->seed_set = 1; break;
	case O_STEPS: case O_BSTEPS: o->max_steps = parse_long_opt(name, v, 1, 1L << 40); break;
	case O_STOP_AFTER: o->stop_after_steps = parse_long_opt(name, v, 1, 1L << 40); break;
	case O_TIME_LIMIT: o->time_limit = parse_float_opt(name, v, 0.001, 1e9); break;
	case O_EPOCHS: o->epochs = (int)parse_long_opt(name, v, 1, 100000); break;
	case O_LIMIT_TRAIN: o->limit_train = (int)parse_long_opt(name, v, 1, INT_MAX); break;
	case O_LIMIT_TEST: case O_LIMIT: o->limit_test = (int)parse_long_opt(name, v, 1, INT_MAX); break;
	case O_NO_EVAL: o->eval = 0; break;
	case O_METRICS: check_writable_parent(name, v); o->metrics_path = v; break;
	case O_CHECKPOINT:
		if (c->cmd == C_TRAIN)
			check_writable_parent(name, v);
		else
			check_readable_file(name, v);
		c->checkpoint = v;
		break;
	case O_RESUME: check_readable_file(name, v); o->resume_path = v; break;
	case O_SUMMARY: c->summary = 1; break;
	case O_CKPT_EVERY: o->checkpoint_every = parse_long_opt(name, v, 1, 1L << 40); break;
	case O_WARMUP: o->warmup = (int)parse_long_opt(name, v, 0, 1000000); break;
	case O_QUIET: o->quiet = 1; break;
	case O_TRACE: c->trace_dir = v; break;
	case O_INPUT: o->input = (int)parse_long_opt(name, v, 1, 16384); break;
	case O_VAL_FRACTION: o->val_fraction = parse_float_opt(name, v, 0, 0.9); break;
	case O_REPORT: check_writable_parent(name, v); o->report_path = v; break;
	case O_DUMP_LOGITS: check_writable_parent(name, v); o->dump_logits = v; break;
	case O_MODE: o->mode = parse_word(name, v, "sync", "async") ? DNN_MODE_ASYNC : DNN_MODE_SYNC; break;
	case O_ALLREDUCE: { /* the words are dnn_allreduce_name's, in the enum's order */
		int a = DNN_ALLREDUCE_TREE;
		while (a <= DNN_ALLREDUCE_AUTO && strcmp(v, dnn_allreduce_name((dnn_allreduce)a)))
			a++;
		if (a > DNN_ALLREDUCE_AUTO)
			usage_error("--%s: '%s' is not tree, ring, rhd, ps or auto", name, v);
		o->allreduce = (dnn_allreduce)a;
		break;
	}
	case O_STALENESS: o->staleness = (int)parse_long_opt(name, v, 0, 1000); break;
	case O_NO_LOOKAHEAD: o->async_lookahead = 0; break;
	case O_STEP_TIMEOUT: o->step_timeout = parse_float_opt(name, v, 0, 86400); break;
	case O_BUCKET_MB: {
		if (strcmp(v, "auto") == 0) {
			o->bucket_mb = -1; /* graph/dist.h dnn_dist_choose_bucket_mb */
			break;
		}
		errno = 0;
		char *end;
		const double mb = strtod(v, &end);
		if (errno || end == v || *end || !(mb >= 0 && mb <= 4096))
			usage_error("--%s: '%s' is not auto or a number of MiB in [0, 4096]", name, v);
		o->bucket_mb = mb;
		break;
	}
	case O_AR_BYTES: o->allreduce_bytes = parse_long_opt(name, v, 64, 1L << 31); break;
	case O_BATCHNORM: o->batchnorm_global = !parse_word(name, v, "global", "local"); break;
	case O_DETERMINISTIC: o->deterministic = !parse_word(name, v, "on", "off"); break;
	case O_PRECISION: o->bf16 = !parse_word(name, v, "bf16", "fp32"); break;
	case O_GRAD_PRECISION: o->grad_bf16 = !parse_word(name, v, "bf16", "fp32"); break;
	case O_SCHEDULE: o->cosine = !parse_word(name, v, "cosine", "constant"); break;
	case O_OPTIMIZER: o->optim.optimizer = parse_optimizer(name, v), c->optimizer_set = 1; break;
	case O_WARMUP_EPOCHS: o->warmup_epochs = parse_float_opt(name, v, 0, 100000); break;
	case O_WARMUP_STEPS: o->warmup_steps = parse_long_opt(name, v, 0, 1L << 40); break;
	case O_LR_REF_BATCH: o->lr_ref_batch = (int)parse_long_opt(name, v, 1, 1 << 20); break;
	case O_BETA1: o->optim.beta1 = parse_float_opt(name, v, 0, 0.999999); break;
	case O_BETA2: o->optim.beta2 = parse_float_opt(name, v, 0, 0.999999), c->beta2_set = 1; break;
	case O_EPS: o->optim.eps = parse_float_opt(name, v, 1e-30, 1); break;
	case O_LARS_ETA: o->optim.trust = parse_float_opt(name, v, 1e-9, 100); break;
	case O_CLIP: o->optim.clip_norm = parse_float_opt(name, v, 0, 1e38), c->clip_set = 1; break;
	default: break;
	}
}

/* The options after the command (argv[1] is the command: it serves as getopt's argv[0]); returns
 * 1 when --help was shown. */
static int parse_options(cli *c, int argc, char **argv)
{
	struct option longopts[NOPTIONS + 1];
	for (int i = 0; i < NOPTIONS; i++)
		longopts[i] = (struct option){options[i].name, options[i].has_arg ? required_argument : no_argument, 0,
					      options[i].id};
	longopts[NOPTIONS] = (struct option){0, 0, 0, 0};
	opterr = 0;
	/* optind = 0 makes glibc's getopt start afresh even if something before main() used it (SMPI,
	 * in the simulation build, does: optind = 2 then resumed a stale permutation). */
	char **sub = argv + 1;
	const int subc = argc - 1;
	optind = 0;
	int id;
	while ((id = getopt_long(subc, sub, ":h", longopts, NULL)) != -1) {
		if (id == ':')
			usage_error("option %s needs a value", sub[optind - 1]);
		int k = 0;
		while (k < NOPTIONS && options[k].id != id)
			k++;
		if (k == NOPTIONS) {
			if (optopt)
				usage_error("unknown option '-%c'", optopt);
			usage_error("unknown option '%s'", sub[optind - 1]);
		}
		/* Options that make no sense for this command are usage errors, not silently ignored. */
		if (!(options[k].cmds & c->cmd))
			usage_error("option --%s does not apply to '%s'", options[k].name, cmd);
		if (id == 'h') {
			help_cmd(cmd);
			return 1;
		}
		set_option(c, id, options[k].name, optarg);
	}
	if (optind < subc && c->cmd != C_PREDICT)
		usage_error("unexpected argument '%s'", sub[optind]);
	c->images = (const char *const *)sub + optind;
	c->nimages = subc - optind;
	return 0;
}

/* A language model trained without --optimizer: nanoGPT's recipe for a small character-level GPT
 * (AdamW, lr 1e-3, beta2 0.99, weight decay 0.1, gradients clipped at norm 1, 100 warm-up steps),
 * each part only where its option was not given. SGD's image recipe does not train a transformer
 * well. A net that does not load here is left alone: the run reports it. */
static void language_model_recipe(cli *c)
{
	dnn_train_opts *o = &c->o;
	if (dnn_net_is_language_model(o->net) != 1)
		return;
	o->lm_recipe = 1;
	o->optim.optimizer = DNN_OPT_ADAMW;
	if (!o->lr_set)
		o->optim.lr = 1e-3f, o->lr_set = 1;
	if (!c->wd_set)
		o->optim.weight_decay = 0.1f;
	if (!c->beta2_set)
		o->optim.beta2 = 0.99f;
	if (!c->clip_set && o->mode != DNN_MODE_ASYNC)
		o->optim.clip_norm = 1.0f;
	if (o->warmup_steps == 0 && o->warmup_epochs == 0)
		o->warmup_steps = 100;
}

/* What the options imply together: required ones, the checkpoint's role, the data folder. */
static void finish_options(cli *c)
{
	dnn_train_opts *o = &c->o;
	if (c->cmd & (C_EVAL | C_PREDICT | C_EXPORT | C_GENERATE)) {
		if (!c->checkpoint)
			usage_error("--checkpoint FILE is required");
		o->checkpoint_in = c->checkpoint;
	}
	if (c->cmd == C_PREDICT && c->nimages == 0)
		usage_error("no IMAGE given");
	if (c->cmd == C_GENERATE && !c->gen.prompt[0])
		usage_error("--prompt: empty (give at least one byte to continue)");
	if (c->cmd == C_EXPORT && !c->onnx_path)
		usage_error("--onnx FILE is required");
	if (c->cmd == C_BENCH)
		o->max_steps += o->warmup;
	if (o->warmup_steps > 0 && o->warmup_epochs > 0)
		usage_error("--warmup-steps and --warmup-epochs both set the warm-up: give one");
	if (o->mode == DNN_MODE_ASYNC && o->optim.optimizer != DNN_OPT_SGD)
		usage_error("--optimizer %s: --mode async pushes SGD deltas to the parameter server; use --mode sync or "
			    "--optimizer sgd", o->optim.optimizer == DNN_OPT_LARS    ? "lars"
					       : o->optim.optimizer == DNN_OPT_ADAMW ? "adamw"
										   : "lamb");
	if (o->allreduce_bytes > 0 && o->optim.clip_norm > 0)
		usage_error("--clip-grad-norm: bench --allreduce-bytes times one all-reduce alone, without updates to clip");
	if (o->mode == DNN_MODE_ASYNC && o->grad_bf16)
		usage_error("--grad-precision bf16: not with --mode async, whose parameter server takes fp32 pushes "
			    "(graph/dist_async.c); use --mode sync or --grad-precision fp32");
	if (o->mode == DNN_MODE_ASYNC && o->optim.clip_norm > 0)
		usage_error("--clip-grad-norm: not with --mode async: each rank there updates with its own share of the "
			    "batch and no rank sees the global gradient whose norm it clips (use --mode sync)");
	if ((c->cmd & C_TRAINS) && !c->optimizer_set)
		language_model_recipe(c);
	/* No --lr: the optimiser's recipe (docs/large-batch.md), at the batch --lr is for; AdamW has none. */
	if ((c->cmd & C_TRAINS) && !o->lr_set) {
		o->optim.lr = dnn_train_opts_default_lr(o->optim.optimizer, o->lr_ref_batch > 0 ? o->lr_ref_batch : o->batch);
		if (!(o->optim.lr > 0))
			usage_error("--optimizer adamw needs --lr: docs/large-batch.md has no AdamW recipe to take a "
				    "default rate from");
	}
	if (c->cmd == C_TRAIN) {
		o->checkpoint_out = c->checkpoint;
		if (o->checkpoint_every && !c->checkpoint)
			usage_error("--checkpoint-every needs --checkpoint FILE");
		if (o->stop_after_steps && !c->checkpoint)
			usage_error("--stop-after-steps needs --checkpoint FILE (the state a later --resume continues)");
		if (o->time_limit > 0 && !c->checkpoint)
			usage_error("--time-limit needs --checkpoint FILE (the state a later --resume continues)");
	}
#ifdef DNN_SIMGRID
	/* No kernel runs in simulation: only the commands that measure time make sense. */
	if (!(c->cmd & C_TRAINS))
		usage_error("this is the simulation build (docs/SIMULATION.md): only train and bench run here; "
			    "use the real build for %s", cmd);
	if (c->checkpoint)
		usage_error("--checkpoint: a simulated run computes no values, so it has no checkpoint to write");
	if (o->resume_path)
		usage_error("--resume: a simulated run computes no values, so it cannot resume one");
	if (c->trace_dir)
		usage_error("--trace: the simulation StarPU is built without FxT (docs/SIMULATION.md)");
#endif
}

/* --data's folder exists (train, eval of an image net: a language model reads --text/--tokens,
 * and dnn_cmd_check_net has checked those). After the net is known: o->lm says which it is. */
static void check_data_dir(const cli *c)
{
	const dnn_train_opts *o = &c->o;
	if (!(c->cmd & (C_TRAIN | C_EVAL)) || o->lm || strcmp(o->data_dir, "synthetic") == 0)
		return;
	const char *dir = strcmp(o->data_dir, "fashion-mnist") == 0 ? DNN_FASHION_MNIST_DIR : o->data_dir;
	struct stat st;
	if (stat(dir, &st) != 0)
		usage_error("--data: '%s': %s%s", dir, strerror(errno),
			    dir == o->data_dir ? "" : " (install Debian's dataset-fashion-mnist)");
	if (!S_ISDIR(st.st_mode))
		usage_error("--data: '%s' is not a directory", dir);
}

/* --precision bf16 on a CPU without AVX512_BF16 (or DNN_CPU_MASK=avx512_bf16, after load_knobs):
 * refused here, before StarPU starts, unless the build has CUDA, where a run on the GPUs alone
 * (STARPU_NCPU=0) needs no bf16 CPU: run_command then asks the workers StarPU started
 * (dnn_runtime_check_bf16), with the same kind of line. */
static void check_precision(const cli *c)
{
#if !defined(DNN_HAVE_CUDA) || defined(DNN_SIMGRID)
	if (c->o.bf16 && !dnn_cpu_has_bf16())
		usage_error("--precision bf16: this CPU has no AVX512_BF16 (cpuid); use --precision fp32");
#else
	(void)c;
#endif
}

/* The DNN_* environment variables: a bad value is a usage error (exit 2). */
static void load_knobs(void)
{
	char err[PATH_MAX + 256];
	if (dnn_knobs_load(err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		exit(2);
	}
}

/* Start StarPU, run the command, stop StarPU: the command's exit status. */
static int run_command(cli *c, int *argc, char ***argv)
{
	/* Under mpirun (Open MPI, or any PMI launcher) StarPU-MPI starts; otherwise plain StarPU. */
	int use_mpi = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
#ifdef DNN_SIMGRID
	use_mpi = 1; /* starpu_smpirun (SMPI) runs every simulation, one rank or many */
#endif
	if (!(c->cmd & C_TRAINS))
		use_mpi = 0;
	char err[1024];
	if (dnn_runtime_init(argc, argv, use_mpi, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return 1;
	}
	const dnn_train_opts *o = &c->o;
#if defined(DNN_HAVE_CUDA) && !defined(DNN_SIMGRID)
	if (o->bf16 && dnn_runtime_check_bf16(err, sizeof(err)) != 0) {
		dnn_runtime_shutdown();
		usage_error("%s", err);
	}
#endif
	int rc = c->cmd == C_EVAL      ? dnn_cmd_eval(o)
		 : c->cmd == C_GENERATE ? dnn_cmd_generate(o, &c->gen)
		 : c->cmd == C_PREDICT ? dnn_cmd_predict(o, c->images, c->nimages)
		 : c->cmd == C_EXPORT  ? dnn_cmd_export(o, c->onnx_path)
				       : o->allreduce_bytes ? dnn_cmd_allreduce_bench(o)
				       : dnn_cmd_train(o);
	dnn_runtime_shutdown();
	if (c->trace_dir && dnn_trace_finish() != 0 && rc == 0)
		rc = 1;
	return rc;
}

/* The command of argv[1] (nets, trace-summary and sweep run here): its C_* bit, or -1 with *rc
 * set when it is done. */
static int command_of(int argc, char **argv, int *rc)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		help_main();
		*rc = argc < 2 ? 2 : 0;
		return -1;
	}
	cmd = argv[1];
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(cmd, commands[i].name))
			return commands[i].bit;
	if (!strcmp(cmd, "nets") || !strcmp(cmd, "trace-summary") || !strcmp(cmd, "sweep")) {
		load_knobs();
		*rc = !strcmp(cmd, "nets") ? dnn_cmd_nets() : dnn_trace_tool_main(cmd, argc - 2, argv + 2);
		return -1;
	}
	fprintf(stderr, "%s: unknown command '%s' (commands: train eval predict generate bench export nets trace-summary sweep; see '%s --help')\n", prog, cmd,
		prog);
	*rc = 2;
	return -1;
}

int main(int argc, char **argv)
{
	int rc = 0;
	cli c = {0};
	if ((c.cmd = command_of(argc, argv, &rc)) < 0)
		return rc;
	dnn_train_opts_default(&c.o);
	c.o.cmd = cmd;
	if (c.cmd == C_BENCH) {
		c.o.bench = 1, c.o.max_steps = 20, c.o.warmup = 3, c.o.eval = 0, c.o.epochs = 1000000;
	}
	if (c.cmd == C_EVAL)
		c.o.val_batches = 0; /* eval reads every validation window unless --val-batches says otherwise */
	c.gen = (dnn_generate_opts){.prompt = "\n", .tokens = 256, .temperature = 0.8, .top_k = 40};
	if (parse_options(&c, argc, argv))
		return 0; /* --help */
	finish_options(&c);
	load_knobs();
	check_precision(&c);
	/* Parse the net before starting StarPU: net-file errors come fast and alone. */
	rc = dnn_cmd_check_net(&c.o, c.summary);
	if (rc != 0 || c.summary)
		return rc;
	check_data_dir(&c);
	if (c.trace_dir) { /* FxT settings go into the environment before StarPU starts */
		char terr[PATH_MAX + 256];
		if (dnn_trace_setup(c.trace_dir, terr, sizeof(terr)) != 0)
			usage_error("%s", terr);
	}
	rc = run_command(&c, &argc, &argv);
#ifdef DNN_SIMGRID
	/* SMPI drops main()'s return value (starpu_smpirun would exit 0 after a failed run); exit()
	 * carries it. */
	fflush(stdout);
	exit(rc);
#endif
	return rc;
}
