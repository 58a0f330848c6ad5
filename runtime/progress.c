/* progress.c — see progress.h. */
#include "progress.h"

#include <math.h>
#include <starpu.h>
#include <time.h>
#include <unistd.h>

double dnn_now(void)
{
#ifdef DNN_SIMGRID
	return starpu_timing_now() * 1e-6; /* the simulated clock (StarPU's, in microseconds) */
#endif
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void dnn_progress_init(dnn_progress *pr, FILE *out, int quiet, long steps_per_epoch)
{
	pr->out = out;
	pr->tty = isatty(fileno(out));
	pr->quiet = quiet;
	pr->t_start = pr->t_last_print = dnn_now();
	pr->plain_every = steps_per_epoch >= 10 ? steps_per_epoch / 10 : 1;
	pr->lm = 0, pr->val_loss = NAN;
}

void dnn_progress_lm(dnn_progress *pr, int T, int bytes, long total_steps)
{
	pr->lm = 1, pr->T = T, pr->bytes = bytes;
	pr->plain_every = total_steps >= 10 ? total_steps / 10 : 1;
}

const char *dnn_bits_unit(int bytes)
{
	return bytes ? "bits/byte" : "bits/token";
}

static void fmt_eta(char *buf, size_t n, double s)
{
	if (s < 0 || s > 360000)
		snprintf(buf, n, "--:--");
	else if (s >= 3600)
		snprintf(buf, n, "%d:%02d:%02d", (int)s / 3600, ((int)s / 60) % 60, (int)s % 60);
	else
		snprintf(buf, n, "%d:%02d", (int)s / 60, (int)s % 60);
}

void dnn_progress_step(dnn_progress *pr, int epoch, int epochs, long step, long steps, double loss, double acc,
		       double img_per_s, double eta_s)
{
	if (pr->quiet)
		return;
	char eta[32];
	fmt_eta(eta, sizeof(eta), eta_s);
	if (pr->tty) {
		double t = dnn_now();
		if (t - pr->t_last_print < 0.1 && step != steps)
			return;
		pr->t_last_print = t;
		char bar[21];
		int filled = steps > 0 ? (int)(20.0 * step / steps) : 20;
		for (int i = 0; i < 20; i++)
			bar[i] = i < filled ? '#' : '.';
		bar[20] = '\0';
		if (pr->lm && isfinite(pr->val_loss))
			fprintf(pr->out, "\r[%s] step %ld/%ld  loss %.4f  val %.4f (%.3f %s)  %.0f tok/s  ETA %s\033[K", bar,
				step, steps, loss, pr->val_loss, pr->val_loss / M_LN2, dnn_bits_unit(pr->bytes),
				img_per_s * pr->T, eta);
		else if (pr->lm)
			fprintf(pr->out, "\r[%s] step %ld/%ld  loss %.4f  acc %.3f  %.0f tok/s  ETA %s\033[K", bar, step,
				steps, loss, acc, img_per_s * pr->T, eta);
		else
			fprintf(pr->out, "\repoch %d/%d [%s] step %ld/%ld  loss %.4f  acc %.3f  %.0f img/s  ETA %s\033[K",
				epoch, epochs, bar, step, steps, loss, acc, img_per_s, eta);
		fflush(pr->out);
	} else if (pr->lm && (step % pr->plain_every == 0 || step == steps)) {
		fprintf(pr->out, "step %ld/%ld: loss %.4f (%.3f %s) acc %.3f | %.0f tok/s | ETA %s\n", step, steps, loss,
			loss / M_LN2, dnn_bits_unit(pr->bytes), acc, img_per_s * pr->T, eta);
		fflush(pr->out);
	}
	/* Off a terminal the caller prints one plain line per epoch instead (language models: every
	 * tenth of the run, above). */
}

void dnn_progress_end_line(dnn_progress *pr)
{
	if (pr->tty && !pr->quiet) {
		fputc('\n', pr->out);
		fflush(pr->out);
	}
}
