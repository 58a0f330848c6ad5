/* starpu_anp.h — the one public header for apps: StarPU start-up, the options, and the
 * train / bench / eval / predict commands, traces, and the net loader (for `nets` and --summary).
 * Library internals (codelets, plans, readers) stay private to their modules. */
#ifndef STARPU_ANP_H
#define STARPU_ANP_H
#include "anp.h"         /* dnn_cmd_predict, the ANP metrics */
#include "dnn_runtime.h" /* dnn_runtime_init / shutdown / rank */
#include "graph.h"       /* dnn_graph_load, summaries, built-in nets */
#include "opts.h"        /* dnn_train_opts, dnn_train_opts_default, DNN_FASHION_MNIST_DIR */
#include "schedule.h"    /* dnn_scheduled_lr */
#include "trace.h"       /* --trace, trace-summary, sweep */
#include "train.h"       /* dnn_cmd_train, dnn_cmd_eval */
#endif
