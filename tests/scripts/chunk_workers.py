#!/usr/bin/env python3
"""chunk_workers.py TASKS.REC CHUNKS NWORKERS — where a run's chunks ran, from its --trace
tasks.rec (StarPU's per-task records: Name, WorkerId, SubmitOrder, Handles, Modes).

A chunk's tasks (its load, forward and backward) are the tasks linked through the chunk's own
data: two tasks belong together when they access a handle that one of the per-chunk tasks writes
(mode W or RW). Parameters are written only by optim_update, and gradients either in REDUX mode (X)
or, with the fixed-order sums (graph/chunksum.h), in the chunk's own partial, which only that
chunk's tasks and the sums' adds touch; optim_update, StarPU's reduction tasks, the fixed-order
sums' adds (grad_sum, bn_sums_sum) and the partials' one-time zeroing belong to no chunk and
are left out. Each group is one chunk of one window slot, over all steps (the plan reuses its handles).

Prints one line per group and a summary; exit 1 (one line per problem) unless
  - every group's tasks ran on one worker,
  - every per-chunk task is in a group with a load task (the linking saw it), and
  - the load tasks of chunk c ran on the same worker as those of chunk c' exactly when
    c * NWORKERS // CHUNKS = c' * NWORKERS // CHUNKS (--pin-chunks: K chunks on n workers in
    blocks, chunk c on worker c * n / K; each chunk its own when K < n), c being the load's place
    among the CHUNKS loads submitted for one step.
Exit 2 when the file holds no task records."""
import sys
from collections import Counter, defaultdict

NOT_PER_CHUNK = {"optim_update", "redux_task_between_replicates", "grad_sum", "bn_sums_sum"}


def records(path):
    rec = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if rec:
                    yield rec
                rec = {}
                continue
            k, _, v = line.partition(": ")
            rec[k] = v
    if rec:
        yield rec


def main():
    path, chunks, nworkers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    tasks = [r for r in records(path) if "Name" in r and "WorkerId" in r]
    if not tasks:
        print(f"no task records in {path}")
        return 2
    per = [t for t in tasks if t["Name"] not in NOT_PER_CHUNK]
    for t in per:
        t["h"] = t.get("Handles", "").split()
        t["m"] = t.get("Modes", "").split()
    written = {h for t in per for h, m in zip(t["h"], t["m"]) if "W" in m}
    parent = list(range(len(per)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first = {}
    for i, t in enumerate(per):
        for h in t["h"]:
            if h in written:
                if h in first:
                    parent[find(i)] = find(first[h])
                else:
                    first[h] = i
    groups = defaultdict(list)
    for i, t in enumerate(per):
        groups[find(i)].append(t)
    bad = []
    loads_of_group = {}
    for g, ts in sorted(groups.items(), key=lambda kv: min(int(t["SubmitOrder"]) for t in kv[1])):
        workers = Counter(t["WorkerId"] for t in ts)
        nload = sum(t["Name"] == "load_batch" for t in ts)
        print(f"group of {len(ts)} tasks ({nload} loads): workers {dict(workers)}")
        if len(workers) != 1:
            bad.append(f"a chunk's {len(ts)} tasks ran on {len(workers)} workers: {dict(workers)}")
        if nload == 0:
            bad.append(f"{len(ts)} per-chunk tasks ({sorted({t['Name'] for t in ts})}) are linked to no load task")
        loads_of_group[g] = nload
    # The loads in submission order: step s's chunk c is load number s * CHUNKS + c.
    loads = sorted((t for t in per if t["Name"] == "load_batch"), key=lambda t: int(t["SubmitOrder"]))
    if len(loads) % chunks:
        bad.append(f"{len(loads)} load tasks is not a multiple of {chunks} chunks")
    by_chunk = defaultdict(Counter)
    for n, t in enumerate(loads):
        by_chunk[n % chunks][t["WorkerId"]] += 1
    def block(c):
        return c * nworkers // chunks if chunks >= nworkers else c

    where = {}
    for c in range(chunks):
        w = by_chunk[c]
        print(f"chunk {c}: loads on workers {dict(w)}")
        if len(w) != 1:
            bad.append(f"chunk {c}'s loads ran on {len(w)} workers: {dict(w)}")
        else:
            where[c] = next(iter(w))
    for c in where:
        for d in where:
            if c < d and (where[c] == where[d]) != (block(c) == block(d)):
                bad.append(f"chunks {c} and {d} ran on workers {where[c]} and {where[d]}")
    total = Counter(t["WorkerId"] for t in per)
    print(f"per-chunk tasks: {len(per)} in {len(groups)} groups; per worker {dict(total)}")
    for b in bad:
        print("problem: " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
