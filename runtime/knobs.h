/* knobs.h — the project's environment variables (DNN_*, ANP_*), read once at start-up into one
 * execution config (graph/exec_config.h; README "Environment variables"). One policy: a bad value
 * of a DNN_* knob is a usage error (the app prints `error: <line>`, exit 2), the line naming the
 * variable and the values it accepts. This is the only file that reads a project variable:
 * the layers below runtime/ never read the environment; runtime/ hands them the config (the plan
 * carries it to the tasks; the start-up calls take their part as arguments). */
#ifndef DNN_KNOBS_H
#define DNN_KNOBS_H
#include <stddef.h>

#include "exec_config.h"
#include "starpu_anp.h" /* dnn_knobs_load */

/* Reads the variables into *k (the defaults where unset or empty); no side effect. 0, or -1 with
 * one line in err. */
int dnn_knobs_parse(dnn_exec_config *k, char *err, size_t errlen);
/* The config in effect: the one dnn_knobs_load (starpu_anp.h) parsed, DNN_EXEC_CONFIG_DEFAULTS before. */
const dnn_exec_config *dnn_knobs_get(void);
/* The command's --precision (1 = bf16), set by dnn_cmd_train and dnn_cmd_eval before they create
 * any plan: not an environment variable, but it travels with the config every plan copies. */
void dnn_knobs_set_bf16(int bf16);
/* dnn_knobs_load succeeded once. */
int dnn_knobs_loaded(void);
#endif
