"""The timing loop of bench/pytorch_nets.py and bench/tf_nets.py (one copy, so both frameworks are
timed the same way as starpu_anp bench: untimed warm-up steps, then timed steps).

time_steps(step, steps, warmup, max_seconds, wait, min_warmup=0) -> (wall_s, loss, done)
  step(i)      runs training step i (i counts warm-up and timed steps together) and returns its
               loss, a framework tensor, possibly not computed yet;
  wait(loss)   blocks until the device has finished that loss and returns it as a float;
  warmup       untimed steps first, max(warmup, min_warmup) of them, each waited for, so the timer
               starts on an idle device; with max_seconds > 0 the warm-up stops once it has taken
               max_seconds / 2, after min_warmup steps at least (TensorFlow: 1, the step that
               traces the graph);
  steps        timed steps (at least 1); with max_seconds > 0 the timing stops after max_seconds,
               3 steps at least (a slow configuration, e.g. 2 threads on a busy machine);
  returns the timed wall-clock seconds (up to the last timed step's loss being ready), that loss
  and the number of timed steps.

common_parser(doc, nets, threads_help, warmup_help) -> argparse.ArgumentParser with the options
  both scripts take: --net (one of nets), --batch, --threads, --steps, --warmup, --max-seconds.
"""
import argparse
import time


def common_parser(doc, nets, threads_help, warmup_help):
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--net", choices=sorted(nets))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1, help=threads_help)
    ap.add_argument("--steps", type=int, default=20, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3, help=warmup_help)
    ap.add_argument("--max-seconds", type=float, default=0.0,
                    help="stop timing after this many seconds (at least 3 steps); 0: run all --steps")
    return ap


def time_steps(step, steps, warmup, max_seconds, wait, min_warmup=0):
    if steps < 1:
        raise ValueError(f"steps must be at least 1 (got {steps})")
    nwarm = max(warmup, min_warmup)
    t0 = time.perf_counter()
    for i in range(nwarm):
        wait(step(i))
        if max_seconds > 0 and i >= min_warmup and time.perf_counter() - t0 > max_seconds / 2:
            break
    t0 = time.perf_counter()
    done = 0
    for i in range(steps):
        loss = step(nwarm + i)
        done += 1
        if max_seconds > 0 and done >= 3 and time.perf_counter() - t0 > max_seconds:
            break
    value = wait(loss)
    return time.perf_counter() - t0, value, done
