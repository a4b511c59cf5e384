#!/usr/bin/env python3
"""Sharded optimizer state and gradients (ZeRO stages 1 and 2) against the
unsharded step.

usage: bench/zero.py [--ranks 2,4] [--engines gloo,mpi] [--size 1024]
                     [--layers 4] [--steps 20] [--runs 3]

The model is a chain of --layers MatMuls with size x size weights and a
mean squared error, trained with AdamW and clipping (two state arenas, each
as large as the parameters) at micro-batch 4 and K=2 per rank. For each
engine (Gloo, with ranks launched with torchrun's environment; MPI, under
mpirun) and rank count G, three runs of the same work: `--data-parallel`
(every rank keeps the whole optimizer state and accumulator),
`--shard-optimizer` (stage 1: each keeps 1/G of the state) and
`--shard-gradients` (stage 2: 1/G of the accumulator too, each weight's
gradient reduce-scattered as the backward computes it). Reported per run:
the largest rank's peak resident memory (/usr/bin/time's maximum resident
set size), the difference the sharding makes against what the memory plan
(`accrue-compile --plan --ranks G`) says it should, the floats handed to the
collectives per step (metrics.jsonl), and rank 0's time per step after the
first (it waits for the others in each collective; best of --runs).
"""
import argparse
import json
import os
import socket
import subprocess
import time

from benchlib import build_linear_model, parse_args, write_linear_data

MICRO_BATCH, K = 4, 2
TIME = "/usr/bin/time"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure_mpi(trainer, art, data, ranks, steps, log):
    """As measure(), the ranks started by mpirun (MPI's collectives)."""
    report = log + ".rss"
    wrapped = ["sh", "-c", '%s -f %%M -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' % TIME, report,
               trainer, art, "--data", data, "--steps", str(steps), "--no-progress",
               "--accumulation-steps", str(K), "--threads", "1", "--log", log]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = subprocess.run(["mpirun", "--oversubscribe", "--quiet", "-np", str(ranks)] + wrapped,
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit("mpirun accrue-train failed:\n" + proc.stderr)
    peak = 0
    for r in range(ranks):
        with open("%s.%d" % (report, r)) as f:
            peak = max(peak, int(f.read().split()[-1]) * 1024)
    return peak, *steady_state(log)


def steady_state(log):
    """Seconds per step after the first (rank 0 waits for the others in each
    collective) and the floats the last step handed to collectives."""
    with open(log) as f:
        records = [json.loads(line) for line in f if line.strip()]
    seconds = sum(r["time_ms"] for r in records[1:]) / max(len(records) - 1, 1) / 1e3
    return seconds, records[-1]["collective_floats"]


def measure(trainer, art, data, ranks, steps, log):
    """Runs G ranks: (the largest peak RSS in bytes, rank 0's seconds per
    step after the first, the floats its last step handed to collectives)."""
    port = str(free_port())
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    procs = []
    for r in range(ranks):
        # /usr/bin/time reports the rank's own peak: a child forked from this
        # Python process would inherit its resident size as a high-water mark.
        report = "%s.rss%d" % (log, r)
        cmd = [TIME, "-f", "%M", "-o", report, trainer, art, "--data", data, "--steps",
               str(steps), "--no-progress", "--accumulation-steps", str(K), "--threads", "1"]
        if r == 0:
            cmd += ["--log", log]
        procs.append((report, subprocess.Popen(
            cmd, env=dict(env, RANK=str(r), WORLD_SIZE=str(ranks), LOCAL_RANK=str(r),
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=port),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
    peak = 0
    for report, p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            raise SystemExit("accrue-train failed:\n" + err)
        with open(report) as f:
            peak = max(peak, int(f.read().split()[-1]) * 1024)
    return peak, *steady_state(log)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--engines", default="gloo,mpi")
    args, out, compiler, trainer = parse_args(ap)
    if not os.path.exists(TIME):
        raise SystemExit("bench/zero.py: /usr/bin/time not found (apt install time)")
    rank_counts = [int(g) for g in args.ranks.split(",")]
    model = os.path.join(out, "linear.onnx")
    build_linear_model(model, args.size, args.size, args.layers)
    data = os.path.join(out, "data.npz")
    write_linear_data(data, MICRO_BATCH * K * max(rank_counts) * 4, args.size, args.size)
    flags = ["--micro-batch", str(MICRO_BATCH), "--data-parallel", "--optimizer", "adamw",
             "--clip-norm", "1", "--no-parallel"]
    runs = (("unsharded", []), ("stage 1", ["--shard-optimizer"]),
            ("stage 2", ["--shard-gradients"]))
    arts = {}
    for name, extra in runs:
        arts[name] = os.path.join(out, name.replace(" ", ""))
        subprocess.run([compiler, model, "-o", arts[name]] + flags + extra, check=True)
    with open(os.path.join(arts["unsharded"], "step.json")) as f:
        arena = json.load(f)["arena_size"]

    def planned_peak(extra, ranks):
        proc = subprocess.run([compiler, model, "-o", os.path.join(out, "plan"), "--plan=json",
                               "--accumulation-steps", str(K), "--ranks", str(ranks)]
                              + flags + extra, check=True, capture_output=True, text=True)
        return json.loads(proc.stdout)["peak_bytes"]

    print("model: %d x (%d x %d) weights, arena %.1f MB, AdamW state %.1f MB (2 arenas)"
          % (args.layers, args.size, args.size, arena * 4 / 1e6, 2 * arena * 4 / 1e6))
    print()
    print("| engine | G | run | peak RSS per rank | saved | plan says |"
          " floats to collectives / step | ms / step | vs unsharded |")
    print("|---|---|---|---|---|---|---|---|---|")
    for engine, ranks in [(e, g) for e in args.engines.split(",") for g in rank_counts]:
        run = measure_mpi if engine == "mpi" else measure
        results = {}
        plans = {name: planned_peak(extra, ranks) for name, extra in runs}
        for name, _ in runs:
            best = None
            for _ in range(args.runs):
                got = run(trainer, arts[name], data, ranks, args.steps,
                          os.path.join(out, "%s_%s%d.jsonl" % (engine, name, ranks)))
                best = got if best is None else (min(best[0], got[0]), min(best[1], got[1]), got[2])
                time.sleep(0.2)
            results[name] = best
        base = results["unsharded"]
        for name, _ in runs:
            peak, seconds, floats = results[name]
            saved = base[0] - peak
            planned = plans["unsharded"] - plans[name]
            print("| %s | %d | %s | %.1f MB | %.1f MB | %.1f MB | %d | %.2f | %.2fx |" % (
                engine, ranks, name, peak / 1e6, saved / 1e6, planned / 1e6, floats, seconds * 1e3,
                seconds / base[1]))


if __name__ == "__main__":
    main()
