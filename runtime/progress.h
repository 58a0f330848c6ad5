/* progress.h — training progress: a one-line bar on a terminal, plain lines otherwise. */
#ifndef DNN_PROGRESS_H
#define DNN_PROGRESS_H
#include <stdio.h>

typedef struct {
	FILE *out;
	int tty;           // redraw one line with \r
	int quiet;
	double t_start, t_last_print;
	long plain_every;  // steps between plain lines
} dnn_progress;

double dnn_now(void); // monotonic seconds
void dnn_progress_init(dnn_progress *pr, FILE *out, int quiet, long steps_per_epoch);
void dnn_progress_step(dnn_progress *pr, int epoch, int epochs, long step, long steps, double loss,
		       double acc, double img_per_s, double eta_s);
void dnn_progress_end_line(dnn_progress *pr);
#endif
