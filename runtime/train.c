/* train.c — `starpu_anp train|bench`: the training loop (see train.h).
 * Options: opts.h; data: data.h; order and learning rate: schedule.h; checkpoints: model_ckpt.h;
 * evaluation: eval.h (and anp.h for image folders); --step-timeout: watchdog.h. */
#include "train.h"
#include "data_source.h"
#include "dist.h"

#include <errno.h>
#include <math.h>
#include <starpu.h>
#include <starpu_mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "anp.h"
#include "batchnorm_simd.h"
#include "bnstats.h"
#include "breakdown.h"
#include "checkpoint.h"
#include "chunksum.h"
#include "conv2d_impl.h"
#include "conv2d_winograd.h"
#include "cpu_kernels.h"
#include "maxpool.h"
#include "data.h"
#include "dnn_runtime.h"
#include "eval.h"
#include "gradclip.h"
#include "graph.h"
#include "imagefolder.h"
#include "gelu.h"
#include "optim.h"
#include "jobstop.h"
#include "knobs.h"
#include "gemm_bf16.h"
#include "model_ckpt.h"
#include "preflight.h"
#include "progress.h"
#include "schedule.h"
#include "watchdog.h"

#ifdef DNN_SIMGRID
#define DNN_SIMULATED 1 /* the simulation build (docs/SIMULATION.md) */
#else
#define DNN_SIMULATED 0
#endif

static const char *sched_name(void)
{
	const char *s = getenv("STARPU_SCHED");
	return s && *s ? s : "lws";
}

/* Load the net and size it for the run (--input, an image folder's classes). Returns 0, or -1
 * after printing one error line (g is then freed). */
static int open_graph(dnn_graph *g, const dnn_train_opts *o, const char *data_dir)
{
	char err[512];
	if (dnn_graph_load(g, o->net, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	if (dnn_data_prepare_graph(g, o->input, data_dir, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		dnn_graph_free(g);
		return -1;
	}
	return 0;
}

static int wait_all(int nranks)
{
	int rc = nranks > 1 ? starpu_mpi_wait_for_all(MPI_COMM_WORLD) : starpu_task_wait_for_all();
	if (rc != 0)
		fprintf(stderr, "error: %s: %s\n", nranks > 1 ? "starpu_mpi_wait_for_all" : "starpu_task_wait_for_all",
			strerror(rc < 0 ? -rc : rc));
	return rc != 0 ? -1 : 0;
}

/* The loss of a step is NaN or Inf: name the step and the first layer whose parameters went
 * non-finite (in the net's order), and leave the last checkpoint alone. */
static void report_non_finite(dnn_model *m, uint64_t step)
{
	int w = starpu_task_wait_for_all();
	if (w != 0)
		fprintf(stderr, "error: starpu_task_wait_for_all: %s\n", strerror(-w));
	char err[512];
	if (dnn_model_sync_to_host(m, err, sizeof(err)) != 0)
		fprintf(stderr, "error: %s\n", err);
	for (int i = 0; i < m->nparams; i++)
		for (long j = 0; j < m->params[i].n; j++)
			if (!isfinite(m->params[i].w[j])) {
				fprintf(stderr, "error: step %llu: the loss is not finite; parameter %s (layer %.*s) holds %g "
						"at [%ld]. Training stopped; the last checkpoint is untouched (try a lower --lr)\n",
					(unsigned long long)step, m->params[i].name,
					(int)(strrchr(m->params[i].name, '.') - m->params[i].name), m->params[i].name,
					(double)m->params[i].w[j], j);
				return;
			}
	fprintf(stderr, "error: step %llu: the loss is not finite (the parameters are still finite: the "
			"logits overflowed). Training stopped; the last checkpoint is untouched (try a lower --lr)\n",
		(unsigned long long)step);
}

/* ---------------------------------------------------------------- the training run */
/* Everything one `train` or `bench` run holds: set up by run_setup, released by run_free. */
typedef struct {
	dnn_train_opts o;          /* the options as this rank uses them */
	int rank, nranks, bench, eval, chunks;
	dnn_graph g;
	dnn_data_source train_src; /* the training set as graph's input interface (run_setup) */
	dnn_dataset train, test;
	dnn_model m;
	dnn_plan p;
	int have_graph, have_model, have_plan;
	int usage_rc;              /* 2: setup found a usage error only the rank count shows */
	FILE *metrics;
	int *perm;
	dnn_progress pr;
	dnn_anp_metrics anp;       /* image folders: of the last evaluation */
	uint64_t step0, step;      /* steps done at the start (resume) and submitted so far */
	uint32_t epoch0;
	long steps_per_epoch, total_steps;
	float lr_peak;             /* --lr, scaled by batch / --lr-ref-batch (the schedule's peak) */
	long warmup_steps;         /* --warmup-steps, or --warmup-epochs in steps */
	int epoch;                 /* epochs started (the result line's epochs=) */
	double t_begin, t_timed, train_loss, train_acc, test_loss, test_acc;
	double last_loss, last_acc; /* of the last step, over its global batch */
	double last_grad_norm;     /* --clip-grad-norm: the last step's global gradient norm before clipping */
	long timed_images;
	dnn_jobstop js;            /* --stop-after-steps, --time-limit, SIGTERM/SIGUSR1 */
	int have_js;
	int stopped;               /* the run ended before its last step (exit DNN_EXIT_STOPPED) */
	int evaluated;             /* test_loss/test_acc hold an evaluation of this job */
	int T;                     /* a language model's context (its input is tokens), else 0 */
} train_run;

/* One epoch's running sums. */
typedef struct {
	double loss, correct, t_start, t_warm;
	long images, done, warm_done;
} epoch_sums;

/* --resume under mpirun: each rank reads the checkpoint itself. Should the file change between
 * their reads (a job still writing it), they would start from different steps, and the job would
 * hang at its end: one rank waiting for the reduction of a step the others never run. Every rank
 * sends its step to rank 0 (exact in floats: two 24-bit halves), which compares them. Returns 0,
 * or -1 on rank 0 after one line (the caller stops the job). */
static int resume_agrees(train_run *r)
{
	const size_t n = 2 * (size_t)r->nranks;
	float *mine = calloc(n, sizeof(float)), *all = calloc(n, sizeof(float));
	char err[512] = "out of memory comparing the ranks' checkpoints";
	if (mine) {
		mine[2 * r->rank] = (float)(r->step0 & 0xffffff);
		mine[2 * r->rank + 1] = (float)(r->step0 >> 24);
	}
	/* Every rank takes part in the collective, even one short of memory (it then sends 0s). */
	int rc = mine && all ? dnn_dist_sum_to_root(&r->m, mine, all, n, err, sizeof(err)) : -1;
	if (rc != 0)
		fprintf(stderr, "error: %s\n", err);
	for (int j = 1; rc == 0 && r->rank == 0 && j < r->nranks; j++) {
		const uint64_t sj = (uint64_t)all[2 * j] | (uint64_t)all[2 * j + 1] << 24;
		if (sj != r->step0) {
			fprintf(stderr, "error: --resume %s: rank 0 read step %llu, rank %d step %llu: the file changed "
					"while the ranks read it (is another job still writing it?)\n",
				r->o.resume_path, (unsigned long long)r->step0, j, (unsigned long long)sj);
			rc = -1;
		}
	}
	free(mine), free(all);
	return rc;
}

/* Closes the metrics file: 0, or 1 after one line when a row could not be written (a full disk
 * shows only here, since fprintf buffers). */
static int close_metrics(train_run *r)
{
	if (!r->metrics)
		return 0;
	int bad = ferror(r->metrics);
	bad |= fclose(r->metrics) != 0;
	r->metrics = NULL;
	if (bad) {
		fprintf(stderr, "error: --metrics %s: writing failed: %s\n", r->o.metrics_path, strerror(errno));
		return 1;
	}
	return 0;
}

static void run_free(train_run *r)
{
	if (r->have_js)
		dnn_jobstop_free(&r->js);
	free(r->perm);
	if (r->metrics)
		fclose(r->metrics);
	if (r->have_plan)
		dnn_plan_destroy(&r->p);
	if (r->have_model)
		dnn_model_destroy(&r->m);
	dnn_dataset_free(&r->train);
	dnn_dataset_free(&r->test);
	if (r->have_graph)
		dnn_graph_free(&r->g);
}

/* --resume: the checkpoint's seed (its rng_state) decides the data order, the augmentation and
 * the synthetic data, so a resumed run repeats the uninterrupted one. An explicit --seed that
 * differs is refused. Read before any data is loaded. Returns 0 or -1 (message printed). */
static int resume_seed(dnn_train_opts *o)
{
	char err[512];
	dnn_ckpt_meta meta;
	if (dnn_checkpoint_read_classes(o->resume_path, &meta, err, sizeof(err)) != 0)
		return 0; /* unreadable: dnn_model_load's full check reports it precisely */
	dnn_ckpt_free_names(&meta);
	if (o->seed_set && o->seed != meta.rng_state) {
		fprintf(stderr, "error: --seed %llu: %s was trained with --seed %llu; a resumed run keeps its "
				"checkpoint's seed (drop --seed)\n",
			(unsigned long long)o->seed, o->resume_path, (unsigned long long)meta.rng_state);
		return -1;
	}
	o->seed = meta.rng_state;
	return 0;
}

/* The multi-rank set-up (ranks > 1), the plan (pinned with --pin-chunks) and the memory check.
 * Returns 0, or -1 after printing one error line. */
static int setup_plan(train_run *r)
{
	char err[512];
	const dnn_train_opts *o = &r->o;
	if (r->nranks > 1) {
		if (o->mode == DNN_MODE_ASYNC && o->optim.optimizer != DNN_OPT_SGD) {
			fprintf(stderr, "error: --optimizer %s: --mode async pushes SGD deltas to the parameter server; "
					"use --mode sync or --optimizer sgd\n", dnn_optimizer_name(o->optim.optimizer));
			return -1;
		}
		if (o->batch < r->nranks) {
			fprintf(stderr, "error: --batch %d is smaller than the number of ranks (%d)\n", o->batch, r->nranks);
			return -1;
		}
		const int one_node = dnn_runtime_ranks_on_one_node();
		r->o.allreduce = dnn_allreduce_resolve(o->allreduce, r->nranks, one_node);
		if (o->mode == DNN_MODE_SYNC && dnn_allreduce_check_ranks(o->allreduce, r->nranks, err, sizeof(err)) != 0) {
			fprintf(stderr, "error: %s\n", err);
			r->usage_rc = 2;
			return -1;
		}
		/* --bucket-mb auto resolved (async has no buckets): the result line names what ran */
		r->o.bucket_mb = o->mode == DNN_MODE_SYNC
					 ? dnn_dist_choose_bucket_mb(o->bucket_mb, dnn_model_grad_bytes(&r->m), r->nranks,
								     one_node)
					 : (o->bucket_mb < 0 ? 0 : o->bucket_mb);
		if (o->mode == DNN_MODE_SYNC && !dnn_allreduce_takes_buckets(o->allreduce)) {
			if (r->o.bucket_mb > 0 && o->bucket_mb > 0) {
				fprintf(stderr, "error: --allreduce %s takes no --bucket-mb (each tensor is its own "
						"exchange): use --bucket-mb 0 or auto\n", dnn_allreduce_name(o->allreduce));
				r->usage_rc = 2;
				return -1;
			}
			r->o.bucket_mb = 0;
		}
		const size_t bucket_elems = (size_t)(o->bucket_mb * 1024.0 * 1024.0 / sizeof(float));
		/* The flat tree (one node) adds the other ranks' contributions in arrival order: fixed for 2
		 * ranks only, so --deterministic on takes the binary tree (fixed order) from 3 ranks on. */
		const int flat_tree = one_node && (!o->deterministic || r->nranks <= 2);
		if (dnn_model_enable_dist(&r->m, o->mode, o->allreduce, o->grad_bf16, flat_tree, bucket_elems,
					  o->staleness, o->async_lookahead, o->window, err, sizeof(err)) != 0) {
			fprintf(stderr, "error: %s\n", err);
			return -1;
		}
	}
	if (dnn_plan_create_sharded(&r->p, &r->m, o->batch, r->chunks, o->window, dnn_knobs_get(), err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	r->have_plan = 1;
	if (dnn_plan_set_sum_redux(&r->p, !o->deterministic, err, sizeof(err)) != 0 ||
	    dnn_plan_set_batchnorm(&r->p, o->batchnorm_global, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	if (o->pin_chunks && dnn_plan_pin_chunks(&r->p, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	if (dnn_preflight_memory(&r->m, &r->p, r->eval ? o->batch : 0, r->chunks, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	char info[512];
	const int gpu_rc = dnn_preflight_gpu_memory(&r->m, &r->p, info, sizeof(info), err, sizeof(err));
	if (info[0] && r->rank == 0)
		fprintf(stderr, "%s\n", info);
	if (gpu_rc != 0) {
		if (r->rank == 0)
			fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	return 0;
}

/* The validation windows each evaluation of a language model reads: the first --val-batches
 * batches (all with 0). */
static int lm_val_windows(const train_run *r)
{
	const long cap = (long)r->o.val_batches * r->o.batch;
	return r->o.val_batches > 0 && cap < r->test.n ? (int)cap : r->test.n;
}

/* A language model's progress (tokens/s, bits) and its data's lines. */
static void setup_lm(train_run *r)
{
	const dnn_train_opts *o = &r->o;
	dnn_progress_lm(&r->pr, r->T, r->train.bytes, r->total_steps);
	if (o->quiet)
		return;
	fprintf(stderr, "%s: language model, context %d, vocabulary %d: %ld training tokens (%d windows)\n", o->cmd,
		r->T, r->g.classes, r->train.ntokens, r->train.n);
	if (r->eval)
		fprintf(stderr, "%s: %ld validation tokens (%d windows of %d); each evaluation reads %d of them "
				"(--val-batches %d x --batch %d)\n", o->cmd, r->test.ntokens, r->test.n, r->T,
			lm_val_windows(r), o->val_batches, o->batch);
}

/* Net, data, model (and its checkpoint), metrics file, multi-rank set-up, plan and memory check.
 * Returns 0, or -1 after printing one error line. */
static int run_setup(train_run *r, const dnn_train_opts *opts)
{
	char err[512];
	dnn_train_opts *o = &r->o;
	*o = *opts;
	/* Multi-rank runs: rank 0 reports, evaluates and checkpoints; the others only train. */
	r->rank = dnn_runtime_rank(), r->nranks = dnn_runtime_nranks();
	if (r->rank != 0) {
		o->quiet = 1;
		o->metrics_path = NULL;
		o->checkpoint_out = NULL;
		o->eval = 0;
	}
	r->bench = o->bench;
	r->eval = !r->bench && o->eval;
#ifdef DNN_SIMGRID
	/* Simulation: kernels are delays, so losses and weights are meaningless. Evaluation and the
	 * non-finite stop read them: both are skipped (checkpoints are refused at the command line). */
	if (r->eval && r->rank == 0 && !o->quiet)
		fprintf(stderr, "simulation: no kernel runs, so evaluation, accuracy and the non-finite stop are "
				"skipped\n");
	r->eval = 0;
#endif
	if (o->resume_path && resume_seed(o) != 0)
		return -1;
	if (open_graph(&r->g, o, r->bench ? NULL : o->data_dir) != 0)
		return -1;
	r->have_graph = 1;
	r->T = dnn_data_token_context(&r->g);
	if (dnn_data_load(o, &r->g, 1, &r->train) != 0)
		return -1;
	if (r->eval && dnn_data_load(o, &r->g, 0, &r->test) != 0)
		return -1;
	if (r->train.n < o->batch) {
		fprintf(stderr, "error: --batch %d is larger than the training set (%d samples)\n", o->batch, r->train.n);
		return -1;
	}
	r->chunks = dnn_opts_chunks(o, &r->g);
	if (dnn_model_create(&r->m, &r->g, o->seed, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	r->have_model = 1;
	if (dnn_model_set_optimizer(&r->m, o->optim.optimizer, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	dnn_dataset_source(&r->train_src, &r->train);
	if (!r->bench && r->train.folder) /* image folders: measured on a sample of decoded images */
		dnn_imagefolder_channel_stats(r->train.folder, r->m.in_mean, r->m.in_std);
	else if (!r->bench)
		dnn_dataset_channel_stats(&r->train, r->m.in_mean, r->m.in_std);
	r->m.class_names = r->train.class_names; /* image folders: written into the checkpoints */
	if (o->resume_path) {
		if (dnn_model_load(&r->m, o->resume_path, &r->step0, &r->epoch0, NULL, err, sizeof(err)) != 0) {
			fprintf(stderr, "error: %s\n", err);
			return -1;
		}
		if (!o->quiet)
			fprintf(stderr, "resumed from %s: epoch %u, step %llu\n", o->resume_path, r->epoch0,
				(unsigned long long)r->step0);
	}
	if (o->metrics_path) {
		r->metrics = fopen(o->metrics_path, o->resume_path ? "a" : "w");
		if (!r->metrics) {
			fprintf(stderr, "error: --metrics %s: %s\n", o->metrics_path, strerror(errno));
			return -1;
		}
		if (!o->resume_path) /* a language model's two columns come after the others (unchanged) */
			fprintf(r->metrics, "kind,epoch,step,loss,accuracy,images_per_s,wall_s,grad_norm%s\n",
				r->T <= 0 ? "" : r->train.bytes ? ",tokens_per_s,bits_per_byte" : ",tokens_per_s,bits_per_token");
	}
	if (setup_plan(r) != 0)
		return -1;
	if (!o->quiet)
		fprintf(stderr, "%s: net %s (%lld params), %d train samples, batch %d in %d chunks, %u workers "
				"(%u CPU, %u CUDA), scheduler %s, window %d\n",
			o->cmd, r->g.source, dnn_graph_params(&r->g), r->train.n, o->batch, r->chunks,
			starpu_worker_get_count(), starpu_cpu_worker_get_count(), starpu_cuda_worker_get_count(),
			sched_name(), o->window);
	if (!o->quiet && r->rank == 0 && !DNN_SIMULATED) { /* which CPU kernels run (cpu_kernels.h) */
		char kern[1024];
		dnn_cpu_kernels_describe(kern, sizeof(kern));
		kern[strcspn(kern, "\n")] = 0; /* the warning, if any, was printed at start-up */
		fprintf(stderr, "%s\n", kern);
	}
	r->perm = malloc(sizeof(int) * (size_t)r->train.n);
	if (!r->perm) {
		fprintf(stderr, "error: out of memory for the order of %d samples\n", r->train.n);
		return -1;
	}
	r->steps_per_epoch = r->train.n / o->batch;
	r->total_steps = (long)o->epochs * r->steps_per_epoch;
	if (o->max_steps > 0 && o->max_steps < r->total_steps)
		r->total_steps = o->max_steps;
	r->lr_peak = dnn_scaled_lr(o->optim.lr, o->batch, o->lr_ref_batch);
	r->warmup_steps = o->warmup_steps > 0 ? o->warmup_steps
					      : (long)llround(o->warmup_epochs * (double)r->steps_per_epoch);
	if (!o->quiet)
		fprintf(stderr, "%s: optimizer %s, peak lr %g (--lr %g%s%s), warm-up %ld steps, then %s\n", o->cmd,
			dnn_optimizer_name(o->optim.optimizer), (double)r->lr_peak, (double)o->optim.lr,
			o->lr_ref_batch > 0 ? " x batch/--lr-ref-batch" : "", o->lm_recipe ? ", the language-model recipe (no --optimizer)" : o->lr_set ? "" : ", the optimizer's default",
			r->warmup_steps, o->cosine ? "cosine decay" : "constant");
	dnn_progress_init(&r->pr, stderr, o->quiet, r->steps_per_epoch);
	if (r->T > 0)
		setup_lm(r);
	/* Checkpoints may be taken mid-epoch (--checkpoint-every): the epoch and the position in its
	 * (seeded, reproducible) permutation both follow from the step count. */
	r->epoch0 = (uint32_t)(r->step0 / (uint64_t)r->steps_per_epoch);
	r->step = r->step0;
	r->epoch = (int)r->epoch0;
	r->t_begin = dnn_now();
	r->train_loss = r->train_acc = r->test_loss = r->test_acc = NAN;
	r->last_loss = r->last_acc = r->last_grad_norm = NAN;
	return 0;
}

/* The test-set evaluation: the whole set, or for a language model its first --val-batches batches
 * of validation windows (an epoch of windows is far longer than a run: a bounded, fixed set of
 * windows keeps each evaluation short and comparable with the others). Returns 0 or -1. */
static int evaluate(train_run *r)
{
	dnn_dataset test = r->test; /* a shallow copy: only n changes */
	if (r->T > 0)
		test.n = lm_val_windows(r);
	if (dnn_evaluate_test(&r->m, &test, r->o.batch, r->chunks, &r->anp, &r->test_loss, &r->test_acc) != 0)
		return -1;
	r->evaluated = 1;
	r->pr.val_loss = r->test_loss;
	return 0;
}

/* The language model's extra metrics columns: tokens/s and the loss in bits (per byte for the
 * byte tokenizer, per token otherwise). */
static void metrics_lm_cols(train_run *r, double ips, double loss)
{
	if (r->T > 0)
		fprintf(r->metrics, ",%.1f,%.6f", ips * r->T, loss / M_LN2);
	fputc('\n', r->metrics);
}

/* --eval-every N: the evaluation of the parameters after step `gstep` (train_epoch drains the
 * steps in flight first and submits the next after it), one line and a test_step row. Its time is
 * left out of the epoch's images/s and tokens/s. */
static int eval_at_step(train_run *r, int epoch, uint64_t gstep, epoch_sums *e)
{
	const double t0 = dnn_now();
	if (evaluate(r) != 0)
		return -1;
	const double took = dnn_now() - t0;
	e->t_start += took, e->t_warm += took;
	dnn_watchdog_progress((uint64_t)-1);
	if (!r->o.quiet && !r->pr.tty) {
		if (r->T > 0)
			fprintf(stderr, "step %llu: val loss %.4f (%.3f %s) acc %.4f\n", (unsigned long long)gstep,
				r->test_loss, r->test_loss / M_LN2, dnn_bits_unit(r->test.bytes), r->test_acc);
		else
			fprintf(stderr, "step %llu: test loss %.4f acc %.4f\n", (unsigned long long)gstep, r->test_loss,
				r->test_acc);
	}
	if (r->metrics) {
		fprintf(r->metrics, "test_step,%d,%llu,%.6f,%.6f,,%.3f,", epoch + 1, (unsigned long long)gstep,
			r->test_loss, r->test_acc, dnn_now() - r->t_begin);
		if (r->T > 0)
			fprintf(r->metrics, ",,%.6f", r->test_loss / M_LN2);
		fputc('\n', r->metrics);
		fflush(r->metrics); /* a language model's run is often one long epoch: plots follow it */
	}
	return 0;
}

/* Step `collected` (1-based within the epoch) has been read back: progress, metrics row, the
 * non-finite check and the --checkpoint-every checkpoint. Returns 0 or -1 (message printed). */
static int collect_step(train_run *r, int epoch, long collected, long nsteps, epoch_sums *e)
{
	const dnn_train_opts *o = &r->o;
	char err[512];
	double l, c;
	if (dnn_wait_step(&r->p, (int)((collected - 1) % o->window), &l, &c, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	const int slot = (int)((collected - 1) % o->window);
	if (dnn_plan_grad_norm(&r->p, slot, &r->last_grad_norm, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	e->loss += l, e->correct += c, e->images += o->batch, e->done++;
	uint64_t gstep = (uint64_t)epoch * r->steps_per_epoch + collected;
	dnn_watchdog_progress(gstep);
	r->last_loss = l / o->batch, r->last_acc = c / o->batch;
	double el = dnn_now() - e->t_start;
	double ips = el > 0 ? e->images / el : 0;
	dnn_progress_step(&r->pr, epoch + 1, o->epochs, collected, nsteps, r->last_loss, r->last_acc, ips,
			  ips > 0 ? (nsteps - collected) * o->batch / ips : -1);
	if (r->metrics) { /* grad_norm: empty without --clip-grad-norm */
		fprintf(r->metrics, "train_step,%d,%llu,%.6f,%.6f,%.1f,%.3f,", epoch + 1, (unsigned long long)gstep,
			r->last_loss, r->last_acc, ips, dnn_now() - r->t_begin);
		if (o->optim.clip_norm > 0)
			fprintf(r->metrics, "%.6g", r->last_grad_norm);
		metrics_lm_cols(r, ips, r->last_loss);
	}
	if (!DNN_SIMULATED && !isfinite(l)) { /* simulated losses are not computed (run_setup) */
		report_non_finite(&r->m, gstep);
		return -1;
	}
	if (dnn_jobstop_after_step(&r->js, gstep, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	if (o->checkpoint_out && o->checkpoint_every > 0 && collected < nsteps &&
	    gstep % (uint64_t)o->checkpoint_every == 0) {
		/* Saves the state after every submitted step (it waits for their updates). */
		if (dnn_model_save(&r->m, o->checkpoint_out, r->step, (uint32_t)(r->step / r->steps_per_epoch), o->seed,
				   err, sizeof(err)) != 0) {
			fprintf(stderr, "error: %s\n", err);
			return -1;
		}
		dnn_watchdog_progress((uint64_t)-1);
	}
	return 0;
}

/* The steps of one epoch, `window` in flight: step s is collected (its loss read back) once step
 * s + window has been submitted, or in the drain at the end. A stop (jobstop.h) submits no more
 * steps and drains those in flight; *stopped_mid then says the epoch was left unfinished.
 * Returns 0 or -1 (message printed). */
static int train_epoch(train_run *r, int epoch, epoch_sums *e, int *stopped_mid)
{
	const dnn_train_opts *o = &r->o;
	const int window = o->window;
	char err[512];
	dnn_epoch_permutation(r->perm, r->train.n, o->seed, epoch);
	long first = (long)(r->step - (uint64_t)epoch * r->steps_per_epoch); /* resumed mid-epoch? */
	if (first < 0 || first > r->steps_per_epoch)
		first = 0;
	long nsteps = r->steps_per_epoch;
	if (o->max_steps > 0 && (long)(o->max_steps - (long)r->step) < nsteps - first)
		nsteps = first + (o->max_steps - (long)r->step);
	e->t_start = e->t_warm = dnn_now();
	/* The timed span starts once the warm-up steps (first epoch only) have wholly finished on
	 * every rank: drained, not merely read back. Their loss is read back before their backward
	 * and all-reduce end, and on the tree's root only once the next step has mostly run (its
	 * reduced statistics queue behind that step's traffic), so a clock started at the read-back
	 * counted part of a timed step as warm-up: 1.6x the steady images/s for 2 timed steps of
	 * 4 simulated nodes. The next epoch's first step starts from a drained pipeline too. */
	const long drain_at = (epoch == (int)r->epoch0 && o->warmup > 0) ? first + o->warmup : -1;
	int rc = 0;
	long collected = first;
	for (long s = first; s <= nsteps && rc == 0; s++) {
		if (s == drain_at) {
			while (rc == 0 && collected < s)
				rc = collect_step(r, epoch, ++collected, nsteps, e);
			if (rc == 0 && wait_all(r->nranks) != 0)
				rc = -1;
			if (rc != 0)
				break;
			dnn_breakdown_start();
			e->t_warm = dnn_now(), e->warm_done = e->done;
		}
		while (rc == 0 && collected < nsteps && (s - collected >= window || s == nsteps))
			rc = collect_step(r, epoch, ++collected, nsteps, e);
		if (rc != 0 || s == nsteps)
			break;
		if (r->eval && o->eval_every > 0 && s > first && r->step % (uint64_t)o->eval_every == 0) {
			/* --eval-every: the parameters after this step exactly; the window refills after it */
			while (rc == 0 && collected < s)
				rc = collect_step(r, epoch, ++collected, nsteps, e);
			if (rc != 0 || eval_at_step(r, epoch, r->step, e) != 0) {
				rc = -1;
				break;
			}
		}
		if (dnn_jobstop_before_submit(&r->js)) { /* every rank stops before the same step */
			while (rc == 0 && collected < s)
				rc = collect_step(r, epoch, ++collected, nsteps, e);
			*stopped_mid = 1;
			break;
		}
		dnn_optim_config optim = o->optim;
		optim.lr = dnn_warm_lr(r->lr_peak, o->cosine, (long)r->step, r->total_steps, r->warmup_steps);
		optim.t = (long)r->step + 1; /* AdamW's bias correction: the update count (a resume continues it) */
		/* Tag the step's tasks: traces (tasks.rec "Iteration:") can then tell steps apart. */
		starpu_iteration_push((unsigned long)r->step);
		const int src_rc = dnn_submit_step(&r->p, (int)(s % window), &r->train_src, r->perm + (size_t)s * o->batch,
						   (long)r->step, &optim, err, sizeof(err));
		if (src_rc != 0) {
			starpu_iteration_pop();
			fprintf(stderr, "error: %s\n", err);
			rc = -1;
			break;
		}
		starpu_iteration_pop();
		r->step++;
	}
	if (wait_all(r->nranks) != 0)
		rc = -1;
	return rc;
}

/* After an epoch: evaluation, the epoch's lines (stderr, metrics) and its checkpoint. */
static int end_epoch(train_run *r, int epoch, const epoch_sums *e)
{
	const dnn_train_opts *o = &r->o;
	char err[512];
	/* Async: evaluation and checkpoints use the server's parameters (a pull on every rank). */
	if (dnn_dist_pull_final(&r->m, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	double t_end = dnn_now();
	dnn_progress_end_line(&r->pr);
	r->t_timed += t_end - e->t_warm;
	r->timed_images += (e->images - e->warm_done * o->batch);
	r->train_loss = e->images ? e->loss / e->images : NAN;
	r->train_acc = e->images ? e->correct / e->images : NAN;
	double ips = (t_end - e->t_warm) > 0 ? (e->images - e->warm_done * o->batch) / (t_end - e->t_warm) : 0;
	if (r->eval) {
		if (evaluate(r) != 0)
			return -1;
		dnn_watchdog_progress((uint64_t)-1);
		if (!o->quiet && r->T > 0)
			fprintf(stderr, "step %llu: train loss %.4f acc %.4f | val loss %.4f (%.3f %s) acc %.4f | %.0f tok/s\n",
				(unsigned long long)r->step, r->train_loss, r->train_acc, r->test_loss,
				r->test_loss / M_LN2, dnn_bits_unit(r->test.bytes), r->test_acc, ips * r->T);
		else if (!o->quiet)
			fprintf(stderr, "epoch %d: train loss %.4f acc %.4f | test loss %.4f acc %.4f | %.0f img/s\n",
				epoch + 1, r->train_loss, r->train_acc, r->test_loss, r->test_acc, ips);
	} else if (!o->quiet && r->T > 0) {
		fprintf(stderr, "step %llu: train loss %.4f acc %.4f | %.0f tok/s\n", (unsigned long long)r->step,
			r->train_loss, r->train_acc, ips * r->T);
	} else if (!o->quiet) {
		fprintf(stderr, "epoch %d: train loss %.4f acc %.4f | %.0f img/s\n", epoch + 1, r->train_loss,
			r->train_acc, ips);
	}
	if (r->metrics) {
		fprintf(r->metrics, "train_epoch,%d,%llu,%.6f,%.6f,%.1f,%.3f,", epoch + 1, (unsigned long long)r->step,
			r->train_loss, r->train_acc, ips, dnn_now() - r->t_begin);
		metrics_lm_cols(r, ips, r->train_loss);
		if (r->eval) {
			fprintf(r->metrics, "test_epoch,%d,%llu,%.6f,%.6f,,%.3f,", epoch + 1, (unsigned long long)r->step,
				r->test_loss, r->test_acc, dnn_now() - r->t_begin);
			if (r->T > 0)
				fprintf(r->metrics, ",,%.6f", r->test_loss / M_LN2);
			fputc('\n', r->metrics);
		}
		fflush(r->metrics);
	}
	if (o->checkpoint_out &&
	    dnn_model_save(&r->m, o->checkpoint_out, r->step, (uint32_t)(epoch + 1), o->seed, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	dnn_watchdog_progress((uint64_t)-1);
	return 0;
}

/* A stop in the middle of an epoch (jobstop.h): the epoch's lines so far and the checkpoint at
 * this step, from which --resume continues the epoch as the uninterrupted run would. */
static int stop_mid_epoch(train_run *r, const epoch_sums *e)
{
	const dnn_train_opts *o = &r->o;
	char err[512];
	if (dnn_dist_pull_final(&r->m, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	dnn_progress_end_line(&r->pr);
	/* The steps run before the stop count in the result line's rates, as a whole epoch's do. */
	r->t_timed += dnn_now() - e->t_warm;
	r->timed_images += (e->images - e->warm_done * o->batch);
	r->train_loss = e->images ? e->loss / e->images : NAN;
	r->train_acc = e->images ? e->correct / e->images : NAN;
	if (r->metrics)
		fflush(r->metrics);
	if (o->checkpoint_out && dnn_model_save(&r->m, o->checkpoint_out, r->step, (uint32_t)(r->step / r->steps_per_epoch),
						o->seed, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		return -1;
	}
	return 0;
}

/* The epochs from the checkpoint's (or the first) to --epochs / --max-steps, or to a stop. */
static int train_loop(train_run *r)
{
	const dnn_train_opts *o = &r->o;
	for (; r->epoch < o->epochs; r->epoch++) {
		epoch_sums e = {0};
		int stopped_mid = 0;
		if (train_epoch(r, r->epoch, &e, &stopped_mid) != 0)
			return -1;
		if (stopped_mid) {
			r->epoch++;
			return stop_mid_epoch(r, &e);
		}
		if (end_epoch(r, r->epoch, &e) != 0)
			return -1;
		if ((o->max_steps > 0 && (long)r->step >= o->max_steps) || r->js.reason != DNN_STOP_NONE) {
			r->epoch++;
			break;
		}
	}
	return 0;
}

/* Each rank decoded only its shards of an image folder: rank 0 reports the unreadable files of all. */
static int merge_bad_files(train_run *r)
{
	const int n = r->train.n;
	float *mine = malloc(sizeof(float) * (size_t)n), *all = calloc((size_t)n, sizeof(float));
	/* Every rank takes part in the collective, even one short of memory (it then contributes 0s). */
	for (int i = 0; mine && i < n; i++)
		mine[i] = (float)dnn_imagefolder_is_bad(r->train.folder, i);
	char err[512] = "out of memory merging the ranks' unreadable files";
	int rc = mine && all ? dnn_dist_sum_to_root(&r->m, mine, all, (size_t)n, err, sizeof(err)) : -1;
	if (rc != 0)
		fprintf(stderr, "error: %s\n", err);
	else if (r->rank == 0)
		dnn_imagefolder_merge_bad(r->train.folder, all, n);
	free(mine), free(all);
	return rc;
}

#ifdef DNN_SIMGRID
/* A simulated run's result line says so, names the platform and where each worker kind's perf
 * models came from (scripts/simulate.sh sets ANP_SIM_PLATFORM and ANP_SIM_MODELS, e.g.
 * "cpu=calibrated,cuda=estimated"); its images_per_s and wall_s are simulated time. */
static void print_sim_fields(FILE *f)
{
	const char *plat = dnn_knobs_get()->sim.platform, *models = dnn_knobs_get()->sim.models;
	if (!plat || !*plat)
		plat = getenv("STARPU_HOSTNAME");
	fprintf(f, " simulated=1 platform=");
	for (const char *c = plat && *plat ? plat : "unnamed"; *c; c++) /* a value has no blanks */
		fputc(*c == ' ' || *c == '=' ? '_' : *c, f);
	if (models && *models) {
		char buf[256];
		snprintf(buf, sizeof(buf), "%s", models);
		for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
			char *eq = strchr(kv, '=');
			if (eq && eq > kv && eq[1] && !strpbrk(kv, " \t"))
				fprintf(f, " models_%.*s=%s", (int)(eq - kv), kv, eq + 1);
		}
	}
}
#endif

/* The machine-readable last line (README "Usage", the result line): key=value fields, unique keys, no
 * blanks in values. */
static void print_result(train_run *r)
{
	const dnn_train_opts *o = &r->o;
	double wall = dnn_now() - r->t_begin;
	double ips = r->t_timed > 0 ? r->timed_images / r->t_timed : 0;
	printf("result: cmd=%s net=%s batch=%d chunks=%d workers=%u ncpu=%u ncuda=%u sched=%s epochs=%d steps=%llu",
	       o->cmd, o->net, o->batch, r->chunks, starpu_worker_get_count(), starpu_cpu_worker_get_count(),
	       starpu_cuda_worker_get_count(), sched_name(), r->epoch, (unsigned long long)r->step);
	if (!DNN_SIMULATED && r->step > r->step0) /* a simulation computes no loss; a finished resume trains none */
		printf(" train_loss=%.6f train_accuracy=%.4f epoch_train_loss=%.6f epoch_train_accuracy=%.4f", r->last_loss,
		       r->last_acc, r->train_loss, r->train_acc);
	if (r->eval && r->evaluated) /* a job stopped mid-epoch evaluated nothing */
		printf(" test_accuracy=%.4f test_loss=%.6f", r->test_acc, r->test_loss);
	if (r->T > 0) { /* a language model: its loss is per token; bits per byte only for the byte tokenizer */
		const char *bits = r->train.bytes ? "bits_per_byte" : "bits_per_token";
		printf(" context=%d vocab=%d train_tokens=%ld", r->T, r->g.classes, r->train.ntokens);
		if (!DNN_SIMULATED && r->step > r->step0)
			printf(" train_%s=%.4f", bits, r->last_loss / M_LN2);
		if (r->eval && r->evaluated)
			printf(" test_%s=%.4f test_windows=%d", bits, r->test_loss / M_LN2, lm_val_windows(r));
		printf(" tokens_per_s=%.1f", (r->t_timed > 0 ? r->timed_images / r->t_timed : 0) * r->T);
	}
	if (r->stopped)
		printf(" stopped=%s", dnn_jobstop_reason(&r->js));
	if (r->train.folder)
		dnn_anp_print_fields(stdout, &r->train, r->eval ? &r->test : NULL, r->eval ? &r->anp : NULL);
	dnn_dist_info di;
	dnn_dist_get_info(r->m.dist, &di);
	if (r->nranks > 1) {
		printf(" ranks=%d mode=%s", r->nranks, o->mode == DNN_MODE_ASYNC ? "async" : "sync");
		if (r->m.dist && o->mode == DNN_MODE_SYNC)
			printf(" allreduce=%s bucket_mb=%g allreduces=%d", dnn_allreduce_name(o->allreduce),
			       o->bucket_mb, di.allreduces);
	} else {
		/* One process trains synchronously whatever --mode says. */
		printf(" ranks=1 mode=sync%s", o->mode == DNN_MODE_ASYNC ? " requested_mode=async" : "");
	}
	if (r->m.dist && o->mode == DNN_MODE_ASYNC)
		printf(" staleness=%d lookahead=%d staleness_mean=%.2f staleness_max=%ld", o->staleness, di.lookahead,
		       di.staleness_mean, di.staleness_max);
	printf(" optimizer=%s lr_peak=%g warmup_steps=%ld", dnn_optimizer_name(o->optim.optimizer), (double)r->lr_peak,
	       r->warmup_steps);
	if (o->optim.clip_norm > 0) /* the last step's norm before clipping (a simulation computes none) */
		printf(" clip_grad_norm=%g grad_norm=%.6g", (double)o->optim.clip_norm, DNN_SIMULATED ? NAN : r->last_grad_norm);
	printf(" fuse=%d pin_chunks=%d batchnorm=%s deterministic=%s tasks_per_step=%ld", r->p.fuse,
	       r->p.chunk_worker != NULL, o->batchnorm_global ? "global" : "local", r->p.sum_redux ? "off" : "on",
	       r->p.tasks_per_step);
	printf(" precision=%s grad_precision=%s", o->bf16 ? "bf16" : "fp32", o->grad_bf16 ? "bf16" : "fp32");
	if (o->bf16 && !DNN_SIMULATED) /* which bf16 GEMM ran: oneDNN's version and kernel, or round+sgemm */
		printf(" bf16_gemm=%s", dnn_gemm_bf16_impl());
	if (o->bf16) { /* activations stored in bf16 (DNN_BF16_ACTIVATIONS; model.h y_bf16), of the nodes with one */
		int act = 0, nact = 0;
		for (int i = 1; i < r->m.g->nnodes - 1; i++)
			act += r->p.y_bf16 && r->p.y_bf16[i], nact += r->p.y[(size_t)i * r->p.nchunks] != NULL;
		printf(" bf16_activations=%d/%d", act, nact);
	}
	/* own_simd: our own kernels' set and ISA (the Winograd tiles, F(2x2) and F(4x4) since
	 * 2026-12-05: "wino-f4"; their GEMMs' ISA; batch norm's loops; since 2026-12-06 the 2x2
	 * max-pool loops and the direct conv's ISA; since 2026-12-06 "+tails": row tails stored with
	 * plain stores, not AVX2 masked ones, codelets/simd_tail.h: ~7% faster ResNets on AMD Zen;
	 * since 2026-12-07 "+gelu-": gelu's sigmoid form in AVX2, on 16 lanes where the CPU has AVX-512F: "avx512",
	 * codelets/gelu.c; since 2026-12-07 "+adamw-": AdamW's CPU loop on 16 lanes, "avx512", or "portable",
	 * codelets/optim.c).
	 * simulate.sh keys its CPU calibration on it, so a calibration of other kernels is not reused. */
	if (!DNN_SIMULATED)
		printf(" blas=%s blas_isa=%s cpu_isa=%s own_simd=wino-f4-%s+bn-%s+pool-%s+direct-%s+tails+gelu-%s+adamw-%s",
		       dnn_blas_field(), dnn_isa_name(dnn_blas_isa()), dnn_isa_name(dnn_cpu_isa()),
		       dnn_wino_avx512() ? "avx512" : dnn_wino_supported() ? "avx2" : "none",
		       dnn_batchnorm_simd() ? "avx2" : "portable", dnn_maxpool_simd() ? "avx2" : "portable",
		       dnn_conv_direct_avx512() ? "avx512" : dnn_wino_supported() ? "avx2" : "none",
		       dnn_gelu_isa(), dnn_optim_isa());
#ifdef DNN_SIMGRID
	print_sim_fields(stdout);
#endif
	dnn_breakdown_print(stdout);
	printf(" images_per_s=%.1f gflops=%.2f wall_s=%.2f\n", ips, ips * dnn_graph_flops_train(&r->g) / 1e9, wall);
	fflush(stdout);
}

/* A rank stops a multi-rank job: the others would wait forever for its part of the next
 * reduction. The metrics rows since the last epoch are the diverging steps: flush them first. */
static void abort_job(train_run *r)
{
	if (r->metrics && (fflush(r->metrics) != 0 || fsync(fileno(r->metrics)) != 0))
		fprintf(stderr, "warning: --metrics %s: flushing failed: %s\n", r->o.metrics_path, strerror(errno));
	fprintf(stderr, "error: rank %d stops the job\n", r->rank);
	fflush(stderr);
	int arc = MPI_Abort(MPI_COMM_WORLD, 1);
	/* MPI_Abort does not return; if it ever does, this rank still must not carry on. */
	fprintf(stderr, "error: MPI_Abort returned %d; exiting\n", arc);
	exit(1);
}

int dnn_cmd_train(const dnn_train_opts *opts)
{
	char err[512];
	train_run r = {0};
	int rc = 1;
	const double t_job = dnn_now(); /* --time-limit counts from here */
	dnn_knobs_set_bf16(opts->bf16);
	if (run_setup(&r, opts) != 0) {
		rc = r.usage_rc ? r.usage_rc : 1;
		goto out;
	}
	const dnn_train_opts *o = &r.o;
	if (r.nranks > 1 && o->resume_path && resume_agrees(&r) != 0)
		abort_job(&r);
	if (o->resume_path && r.step0 >= (uint64_t)r.total_steps) {
		/* The checkpoint already holds the whole run (a chain's last job, a kill after the last
		 * save): nothing to train; it is still evaluated, and the result line has no train loss. */
		if (r.rank == 0) /* even with --quiet: it explains the missing train loss */
			fprintf(stderr, "%s: nothing to do: the checkpoint is at the end of the run (step %llu of %ld; "
					"raise --epochs or --max-steps to train on)\n",
				o->resume_path, (unsigned long long)r.step0, r.total_steps);
		if (r.eval && evaluate(&r) != 0)
			goto out;
		r.epoch = (int)r.epoch0;
		if (r.rank == 0)
			print_result(&r);
		rc = close_metrics(&r);
		goto out;
	}
	if (dnn_jobstop_init(&r.js, o->stop_after_steps, o->time_limit, t_job, r.rank, r.nranks, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		goto out;
	}
	r.have_js = 1;
	const dnn_watchdog_cfg wcfg = {.timeout = r.o.step_timeout, .done = r.step0, .metrics = r.metrics,
				       .metrics_path = r.o.metrics_path, .rank = r.rank, .nranks = r.nranks};
	dnn_watchdog_start(&wcfg); /* multi-rank runs with --step-timeout only */
	if (dnn_knobs_get()->breakdown) {
		dnn_breakdown_setup();
		dnn_breakdown_start();
	}
	const int loop_rc = train_loop(&r);
	dnn_watchdog_stop();
	if (loop_rc != 0) {
		if (r.nranks > 1)
			abort_job(&r);
		goto out;
	}
	r.stopped = r.js.reason != DNN_STOP_NONE && (long)r.step < r.total_steps;
	if (r.stopped && r.rank == 0) { /* even with --quiet: the job chain's log needs it */
		if (o->checkpoint_out)
			fprintf(stderr, "stopped (%s) after step %llu of %ld; %s holds it: continue with --resume %s\n",
				dnn_jobstop_reason(&r.js), (unsigned long long)r.step, r.total_steps, o->checkpoint_out,
				o->checkpoint_out);
		else
			fprintf(stderr, "stopped (%s) after step %llu of %ld; without --checkpoint nothing was saved\n",
				dnn_jobstop_reason(&r.js), (unsigned long long)r.step, r.total_steps);
	}
	if (r.nranks > 1 && r.train.folder && r.train.n > 0 && merge_bad_files(&r) != 0)
		goto out;
	if (dnn_breakdown_finish(r.rank, r.nranks, err, sizeof(err)) != 0) {
		fprintf(stderr, "error: %s\n", err);
		goto out;
	}
	rc = r.stopped ? DNN_EXIT_STOPPED : 0;
	if (close_metrics(&r) != 0)
		rc = 1;
	if (r.rank == 0) {
		print_result(&r);
		double wall = dnn_now() - r.t_begin, ips = r.t_timed > 0 ? r.timed_images / r.t_timed : 0;
		if (o->report_path &&
		    dnn_anp_write_report(o->report_path, o, &r.g, &r.train, r.eval ? &r.test : NULL,
					 r.test.folder ? &r.anp : NULL, ips, wall, err, sizeof(err)) != 0) {
			fprintf(stderr, "error: %s\n", err);
			rc = 1;
		}
	}
out:
	run_free(&r);
	return rc;
}
