/* starpu_anp — train / eval / bench DNNs on StarPU.
 *
 *   starpu_anp train [options]     train on Fashion-MNIST (default) and evaluate each epoch
 *   starpu_anp eval  --checkpoint F [options]
 *   starpu_anp predict --checkpoint F [options] IMAGE...   top-5 classes of each image
 *   starpu_anp bench [options]     training throughput on synthetic data
 *   starpu_anp export --checkpoint F --onnx M.onnx   the eval-mode net as an ONNX model
 *   starpu_anp nets                list the built-in nets with their sizes
 *
 * Exit status: 0 success, 1 runtime error, 2 usage error. Schedulers and worker counts come from
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
	       "  bench   training throughput on synthetic data (images/s, GFLOP/s)\n"
	       "  export  write a checkpoint's eval-mode net as an ONNX model (onnxruntime, ...)\n"
	       "  nets    list the built-in nets\n"
	       "  trace-summary DIR   summarise a --trace directory (traces/trace_summary.py)\n"
	       "  sweep   scheduler x worker-count throughput sweep (traces/sweep.sh --help)\n\n"
	       "'%s <command> --help' lists the command's options. StarPU's environment variables choose\n"
	       "the scheduler and workers, e.g. STARPU_SCHED=dmda STARPU_NCPU=2 %s train.\n",
	       prog, prog, prog);
}

static void help_export(void)
{
	printf("usage: %s export --checkpoint FILE --onnx MODEL.onnx [--net NAME|FILE] [--input N]\n\n"
	       "Writes the checkpoint's net in eval mode as a standard ONNX model (opset 17): conv, batch\n"
	       "norm, ReLU, pooling, dense (Gemm), add, dropout (identity), softmax.\n"
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

static void help_cmd(const char *c)
{
	if (!strcmp(c, "export")) {
		help_export();
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
	printf("  --batch B            global batch size [64]\n"
	       "  --chunks K           chunks (micro-batches) per batch [2 x workers]\n");
	printf("  --input N            the net's input is N x N (rewrites its input line; image folders are\n"
	       "                       resized and cropped to it) [as in the net file%s]\n",
	       !strcmp(c, "eval") || !strcmp(c, "predict") ? "; eval, predict: the checkpoint's" : "");
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
		printf("  --lr X               learning rate (peak of the schedule) [0.05]\n"
		       "  --lr-schedule S      cosine (decay to 0 over the run) or constant [cosine]\n"
		       "  --momentum X         SGD momentum [0.9]\n"
		       "  --weight-decay X     weight decay (not applied to biases and batch-norm) [5e-4]\n"
		       "  --window W           iterations in flight at most [2]\n"
		       "  --pin-chunks         run all of chunk c's tasks (load, forward, backward) on one\n"
		       "                       worker: CUDA worker c mod n, or CPU worker c mod n without\n"
		       "                       GPUs; the scheduler still places the rest [off]\n"
		       "  --seed S             seed for initialisation and shuffling [1]\n"
		       "  --mode M             under mpirun: sync (all-reduce every step) or async (sharded\n"
		       "                       parameter server, bounded staleness) [sync]\n"
		       "  --allreduce A        sync under mpirun: how gradients are summed over the ranks, tree\n"
		       "                       (starpu_mpi_redux_data into rank 0, then sent to all) or ring\n"
		       "                       (reduce-scatter/all-gather over N chunks) [tree]\n"
		       "  --bucket-mb M        sync under mpirun: pack the gradients that take the tree and\n"
		       "                       are smaller than M MiB, in backward order, into buckets of up\n"
		       "                       to M MiB, one all-reduce each (fewer, bigger messages) [0: off]\n"
		       "  --staleness S        async: step i uses server parameters of step i-S or newer [4]\n"
		       "  --no-lookahead       async: compute gradients on the stale parameters as they are,\n"
		       "                       without estimating the other ranks' last S steps by this\n"
		       "                       rank's own (README, 'Across nodes')\n"
		       "  --step-timeout S     under mpirun: if no step completes for S seconds (a rank or\n"
		       "                       host is unreachable), name the step and rank and stop the job\n"
		       "                       (MPI_Abort after flushing --metrics); 0 = never [300]\n");
	}
	if (strcmp(c, "train") == 0)
		printf("  --epochs E           epochs [1]\n"
		       "  --max-steps N        stop after N steps in total (checkpoint and evaluate there)\n"
		       "  --limit-train N      use only the first N training samples\n"
		       "  --limit-test N       evaluate on only the first N test samples\n"
		       "  --no-eval            skip the per-epoch test-set evaluation\n"
		       "  --metrics FILE       write per-step and per-epoch metrics as CSV\n"
		       "  --checkpoint FILE    write a checkpoint after every epoch (atomically)\n"
		       "  --checkpoint-every N also write it every N steps\n"
		       "  --resume FILE        continue from a checkpoint (same net, data and options)\n"
		       "  --summary            print the net's per-layer summary and exit\n");
	if (strcmp(c, "bench") == 0)
		printf("  --steps N            timed steps [20]\n"
		       "  --warmup N           untimed steps first [3]\n");
	printf("  --trace DIR          record an FxT trace; at exit write DIR/paje.trace (ViTE), tasks.rec,\n"
	       "                       dag.dot, trace.svg, summary.txt and gantt.png (docs/traces.md)\n");
	printf("  --quiet              no progress output (the result line is still printed)\n"
	       "  -h, --help           this help\n\n"
	       "The last line of output is 'result: key=value ...'.\n");
}

enum { O_NET = 1000, O_DATA, O_BATCH, O_CHUNKS, O_LR, O_MOM, O_WD, O_WINDOW, O_SEED, O_STEPS, O_EPOCHS,
       O_LIMIT_TRAIN, O_LIMIT_TEST, O_NO_EVAL, O_METRICS, O_CHECKPOINT, O_RESUME, O_SUMMARY, O_WARMUP, O_QUIET,
       O_LIMIT, O_BSTEPS, O_SCHEDULE, O_CKPT_EVERY, O_MODE, O_ALLREDUCE, O_STALENESS, O_NO_LOOKAHEAD,
       O_STEP_TIMEOUT, O_PIN_CHUNKS, O_BUCKET_MB };
enum { O_TRACE = 2000 };
enum { O_INPUT = 2100, O_VAL_FRACTION, O_REPORT };
enum { O_ONNX = 2200 };

static void check_readable_file(const char *opt, const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		usage_error("--%s: %s: %s", opt, path, strerror(errno));
	if (S_ISDIR(st.st_mode))
		usage_error("--%s: %s: is a directory", opt, path);
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

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		help_main();
		return argc < 2 ? 2 : 0;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "nets"))
		return dnn_cmd_nets();
	if (!strcmp(cmd, "trace-summary") || !strcmp(cmd, "sweep"))
		return dnn_trace_tool_main(cmd, argc - 2, argv + 2);
	int is_train = !strcmp(cmd, "train"), is_eval = !strcmp(cmd, "eval"), is_bench = !strcmp(cmd, "bench");
	int is_predict = !strcmp(cmd, "predict"), is_export = !strcmp(cmd, "export");
	if (!is_train && !is_eval && !is_bench && !is_predict && !is_export) {
		fprintf(stderr, "%s: unknown command '%s' (commands: train eval predict bench export nets trace-summary sweep; see '%s --help')\n", prog, cmd,
			prog);
		return 2;
	}
	dnn_train_opts o;
	dnn_train_opts_default(&o);
	o.cmd = cmd;
	if (is_bench) {
		o.synthetic = 1, o.max_steps = 20, o.warmup = 3, o.eval = 0, o.epochs = 1000000;
	}
	int summary = 0;
	const char *checkpoint = NULL;
	const char *trace_dir = NULL;
	const char *onnx_path = NULL;
	static const struct option longopts[] = {
		{"net", required_argument, 0, O_NET},         {"data", required_argument, 0, O_DATA},
		{"batch", required_argument, 0, O_BATCH},     {"chunks", required_argument, 0, O_CHUNKS},
		{"lr", required_argument, 0, O_LR},           {"momentum", required_argument, 0, O_MOM},
		{"weight-decay", required_argument, 0, O_WD},           {"window", required_argument, 0, O_WINDOW},
		{"pin-chunks", no_argument, 0, O_PIN_CHUNKS},
		{"seed", required_argument, 0, O_SEED},       {"max-steps", required_argument, 0, O_STEPS}, {"steps", required_argument, 0, O_BSTEPS},
		{"epochs", required_argument, 0, O_EPOCHS},   {"limit-train", required_argument, 0, O_LIMIT_TRAIN},
		{"limit-test", required_argument, 0, O_LIMIT_TEST}, {"limit", required_argument, 0, O_LIMIT},
		{"no-eval", no_argument, 0, O_NO_EVAL},       {"metrics", required_argument, 0, O_METRICS},
		{"checkpoint", required_argument, 0, O_CHECKPOINT}, {"resume", required_argument, 0, O_RESUME},
		{"summary", no_argument, 0, O_SUMMARY},       {"warmup", required_argument, 0, O_WARMUP},
		{"quiet", no_argument, 0, O_QUIET}, {"lr-schedule", required_argument, 0, O_SCHEDULE},
		{"checkpoint-every", required_argument, 0, O_CKPT_EVERY},
		{"mode", required_argument, 0, O_MODE}, {"staleness", required_argument, 0, O_STALENESS}, {"no-lookahead", no_argument, 0, O_NO_LOOKAHEAD},           {"help", no_argument, 0, 'h'},
		{"allreduce", required_argument, 0, O_ALLREDUCE}, {"step-timeout", required_argument, 0, O_STEP_TIMEOUT},
		{"bucket-mb", required_argument, 0, O_BUCKET_MB},
		{"trace", required_argument, 0, O_TRACE},
		{"input", required_argument, 0, O_INPUT}, {"val-fraction", required_argument, 0, O_VAL_FRACTION},
		{"report", required_argument, 0, O_REPORT},
		{"onnx", required_argument, 0, O_ONNX},
		{0, 0, 0, 0}};
	opterr = 0;
	int c;
	/* The options after the command: parse argv + 1 (the command as its argv[0]). optind = 0 makes
	 * glibc's getopt start afresh even if something before main() used it (SMPI, in the
	 * simulation build, does: optind = 2 then resumed a stale permutation). */
	char **sub = argv + 1;
	const int subc = argc - 1;
	optind = 0;
	while ((c = getopt_long(subc, sub, ":h", longopts, NULL)) != -1) {
		const char *name = "";
		for (const struct option *lo = longopts; lo->name; lo++)
			if (lo->val == c)
				name = lo->name;
		/* Options that make no sense for this command are usage errors, not silently ignored. */
		int ok = 1;
		switch (c) {
		case O_DATA: ok = !is_bench && !is_predict; break;
		case O_LR: case O_MOM: case O_WD: case O_WINDOW: case O_SCHEDULE: case O_MODE: case O_STALENESS:
		case O_PIN_CHUNKS:
		case O_NO_LOOKAHEAD: case O_ALLREDUCE: case O_STEP_TIMEOUT: case O_BUCKET_MB:
			ok = !is_eval && !is_predict;
			break;
		case O_VAL_FRACTION: case O_REPORT: ok = is_train || is_eval; break;
		case O_STEPS: ok = is_train; break;
		case O_BSTEPS: ok = is_bench; break;
		case O_EPOCHS: case O_LIMIT_TRAIN: case O_LIMIT_TEST: case O_NO_EVAL: case O_METRICS: case O_RESUME:
		case O_SUMMARY: case O_CKPT_EVERY: ok = is_train; break;
		case O_CHECKPOINT: ok = !is_bench; break;
		case O_WARMUP: ok = is_bench; break;
		case O_LIMIT: ok = is_eval; break;
		default: break;
		}
		if (c == O_ONNX || is_export) /* export takes only these */
			ok = c == O_ONNX ? is_export : c == O_NET || c == O_INPUT || c == O_CHECKPOINT || c == 'h' || c == ':' || c == '?';
		if (!ok)
			usage_error("option --%s does not apply to '%s'", name, cmd);
		switch (c) {
		case 'h': help_cmd(cmd); return 0;
		case O_NET: o.net = optarg, o.net_set = 1; break;
		case O_ONNX: check_writable_parent(name, optarg); onnx_path = optarg; break;
		case O_DATA: o.data_dir = optarg; break;
		case O_BATCH: o.batch = (int)parse_long_opt(name, optarg, 1, 1 << 20); break;
		case O_CHUNKS: o.chunks = (int)parse_long_opt(name, optarg, 1, 1 << 16); break;
		case O_LR: o.sgd.lr = parse_float_opt(name, optarg, 0, 100); break;
		case O_MOM: o.sgd.momentum = parse_float_opt(name, optarg, 0, 0.9999); break;
		case O_WD: o.sgd.weight_decay = parse_float_opt(name, optarg, 0, 1); break;
		case O_WINDOW: o.window = (int)parse_long_opt(name, optarg, 1, 64); break;
		case O_PIN_CHUNKS: o.pin_chunks = 1; break;
		case O_SEED: o.seed = (uint64_t)parse_long_opt(name, optarg, 0, LONG_MAX), o.seed_set = 1; break;
		case O_STEPS: case O_BSTEPS: o.max_steps = parse_long_opt(name, optarg, 1, 1L << 40); break;
		case O_EPOCHS: o.epochs = (int)parse_long_opt(name, optarg, 1, 100000); break;
		case O_LIMIT_TRAIN: o.limit_train = (int)parse_long_opt(name, optarg, 1, INT_MAX); break;
		case O_LIMIT_TEST: case O_LIMIT: o.limit_test = (int)parse_long_opt(name, optarg, 1, INT_MAX); break;
		case O_NO_EVAL: o.eval = 0; break;
		case O_METRICS: check_writable_parent(name, optarg); o.metrics_path = optarg; break;
		case O_CHECKPOINT:
			if (is_train)
				check_writable_parent(name, optarg);
			else
				check_readable_file(name, optarg);
			checkpoint = optarg;
			break;
		case O_RESUME: check_readable_file(name, optarg); o.resume_path = optarg; break;
		case O_SUMMARY: summary = 1; break;
		case O_CKPT_EVERY: o.checkpoint_every = parse_long_opt(name, optarg, 1, 1L << 40); break;
		case O_WARMUP: o.warmup = (int)parse_long_opt(name, optarg, 0, 1000000); break;
		case O_QUIET: o.quiet = 1; break;
		case O_TRACE: trace_dir = optarg; break;
		case O_INPUT: o.input = (int)parse_long_opt(name, optarg, 1, 16384); break;
		case O_VAL_FRACTION: o.val_fraction = parse_float_opt(name, optarg, 0, 0.9); break;
		case O_REPORT: check_writable_parent(name, optarg); o.report_path = optarg; break;
		case O_MODE:
			if (strcmp(optarg, "sync") && strcmp(optarg, "async"))
				usage_error("--mode: '%s' is not sync or async", optarg);
			o.mode = !strcmp(optarg, "async") ? DNN_MODE_ASYNC : DNN_MODE_SYNC;
			break;
		case O_ALLREDUCE:
			if (strcmp(optarg, "tree") && strcmp(optarg, "ring"))
				usage_error("--allreduce: '%s' is not tree or ring", optarg);
			o.allreduce = !strcmp(optarg, "ring") ? DNN_ALLREDUCE_RING : DNN_ALLREDUCE_TREE;
			break;
		case O_STALENESS: o.staleness = (int)parse_long_opt(name, optarg, 0, 1000); break;
		case O_NO_LOOKAHEAD: o.async_lookahead = 0; break;
		case O_STEP_TIMEOUT: o.step_timeout = parse_float_opt(name, optarg, 0, 86400); break;
		case O_BUCKET_MB: o.bucket_mb = parse_float_opt(name, optarg, 0, 4096); break;
		case O_SCHEDULE:
			if (strcmp(optarg, "cosine") && strcmp(optarg, "constant"))
				usage_error("--lr-schedule: '%s' is not cosine or constant", optarg);
			o.cosine = !strcmp(optarg, "cosine");
			break;
		case ':': usage_error("option %s needs a value", sub[optind - 1]);
		case '?':
		default:
			if (optopt)
				usage_error("unknown option '-%c'", optopt);
			usage_error("unknown option '%s'", sub[optind - 1]);
		}
	}
	if (optind < subc && !is_predict)
		usage_error("unexpected argument '%s'", sub[optind]);
	/* predict: the image files are the arguments after the options */
	const char *const *images = (const char *const *)sub + optind;
	const int nimages = subc - optind;
	if (is_predict) {
		if (!checkpoint)
			usage_error("--checkpoint FILE is required");
		if (nimages == 0)
			usage_error("no IMAGE given");
		o.resume_path = checkpoint;
	}
	if (is_export) {
		if (!checkpoint)
			usage_error("--checkpoint FILE is required");
		if (!onnx_path)
			usage_error("--onnx FILE is required");
		o.resume_path = checkpoint;
	}
	if (is_bench)
		o.max_steps += o.warmup;
	if (is_eval) {
		if (!checkpoint)
			usage_error("--checkpoint FILE is required");
		o.resume_path = checkpoint;
	} else if (is_train) {
		o.checkpoint_path = checkpoint;
		if (o.checkpoint_every && !checkpoint)
			usage_error("--checkpoint-every needs --checkpoint FILE");
	}
#ifdef DNN_SIMGRID
	/* No kernel runs in simulation: only the commands that measure time make sense. */
	if (!is_train && !is_bench)
		usage_error("this is the simulation build (docs/SIMULATION.md): only train and bench run here; "
			    "use the real build for %s", cmd);
	if (checkpoint)
		usage_error("--checkpoint: a simulated run computes no values, so it has no checkpoint to write");
	if (o.resume_path)
		usage_error("--resume: a simulated run computes no values, so it cannot resume one");
	if (trace_dir)
		usage_error("--trace: the simulation StarPU is built without FxT (docs/SIMULATION.md)");
#endif
	if (!is_bench && !is_predict && !is_export && strcmp(o.data_dir, "synthetic") != 0) {
		const char *dir = strcmp(o.data_dir, "fashion-mnist") == 0 ? DNN_FASHION_MNIST_DIR : o.data_dir;
		struct stat st;
		if (stat(dir, &st) != 0)
			usage_error("--data: '%s': %s%s", dir, strerror(errno),
				    dir == o.data_dir ? "" : " (install Debian's dataset-fashion-mnist)");
		if (!S_ISDIR(st.st_mode))
			usage_error("--data: '%s' is not a directory", dir);
	}

	/* Parse the net before starting StarPU: net-file errors come fast and alone. */
	int net_rc = dnn_cmd_check_net(&o, summary);
	if (net_rc != 0 || summary)
		return net_rc;
	if (trace_dir) { /* FxT settings go into the environment before StarPU starts */
		char terr[PATH_MAX + 256];
		if (dnn_trace_setup(trace_dir, terr, sizeof(terr)) != 0)
			usage_error("%s", terr);
	}

	/* Under mpirun (Open MPI, or any PMI launcher) StarPU-MPI starts; otherwise plain StarPU. */
	int use_mpi = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
#ifdef DNN_SIMGRID
	use_mpi = 1; /* starpu_smpirun (SMPI) runs every simulation, one rank or many */
#endif
	if (is_eval || is_predict || is_export)
		use_mpi = 0;
	if (dnn_runtime_init(&argc, &argv, use_mpi) != 0) {
		fprintf(stderr, "error: StarPU found no worker to run on (check STARPU_NCPU / STARPU_NCUDA)\n");
		return 1;
	}
	int rc = is_eval      ? dnn_cmd_eval(&o)
		 : is_predict ? dnn_cmd_predict(&o, images, nimages)
		 : is_export  ? dnn_cmd_export(&o, onnx_path)
			      : dnn_cmd_train(&o);
	dnn_runtime_shutdown();
	if (trace_dir && dnn_trace_finish() != 0 && rc == 0)
		rc = 1;
#ifdef DNN_SIMGRID
	/* SMPI drops main()'s return value (starpu_smpirun would exit 0 after a failed run); exit()
	 * carries it. */
	fflush(stdout);
	exit(rc);
#endif
	return rc;
}
