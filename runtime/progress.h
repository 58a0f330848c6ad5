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
	/* Language models (dnn_progress_lm): the rate in tokens/s (samples x T), the last validation
	 * loss with its bits, and plain lines every plain_every steps off a terminal (an epoch of
	 * every window is far longer than a run, so the per-epoch lines would never come). */
	int lm, T, bytes;
	double val_loss;   // NAN until the first evaluation
} dnn_progress;

double dnn_now(void); // monotonic seconds
void dnn_progress_init(dnn_progress *pr, FILE *out, int quiet, long steps_per_epoch);
void dnn_progress_step(dnn_progress *pr, int epoch, int epochs, long step, long steps, double loss,
		       double acc, double img_per_s, double eta_s);
void dnn_progress_end_line(dnn_progress *pr);
/* A language model of context T (bytes: the byte tokenizer's, so its bits are bits per byte) over a
 * run of total_steps steps. */
void dnn_progress_lm(dnn_progress *pr, int T, int bytes, long total_steps);
/* "bits/byte" for the byte tokenizer, else "bits/token". */
const char *dnn_bits_unit(int bytes);
#endif
