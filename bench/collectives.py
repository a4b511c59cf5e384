#!/usr/bin/env python3
"""Deferred vs per-micro-batch gradient all-reduce, 2 MPI ranks.

usage: bench/collectives.py [--build build] [--ks 1,4,16] [--steps 10] [--runs 5]

The model is one MatMul with a 2048 x 2048 weight (4.2M parameters, a
16.8 MB gradient arena) and a mean squared error at micro-batch 4, so the
gradient sum over ranks costs about as much as a micro-batch's compute.
For each number of micro-batches K, four runs of the same per-rank work:

- 1 process, not data-parallel (compute alone);
- 2 independent processes at once, not data-parallel (the baseline: the
  two cores and the memory bandwidth shared as by 2 ranks, no
  communication);
- `mpirun -np 2`, `--data-parallel` (the all-reduce deferred after the
  micro-batch loop: one per optimizer step);
- `mpirun -np 2`, `--data-parallel --collectives per-micro-batch` (one
  all-reduce per micro-batch, as a per-step data-parallel graph has it).

Time per step is the best of `--runs` interleaved runs. The all-reduce
counts come from metrics.jsonl.
"""
import argparse
import json
import os
import re
import shutil
import subprocess

from benchlib import build_linear_model, parse_args, seconds_per_step, write_linear_data

SIZE = 2048
MICRO_BATCH = 4
RANKS = 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ks", default="1,4,16")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5)
    args, out, compiler, trainer = parse_args(ap)
    ks = [int(k) for k in args.ks.split(",")]
    mpirun = shutil.which("mpirun")
    if not mpirun:
        raise SystemExit("bench/collectives.py: mpirun not found (apt install openmpi-bin)")
    # Open MPI refuses root unless told; containers often run as root.
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    os.environ.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    launch = [mpirun, "-np", str(RANKS), "--oversubscribe", "--quiet"]

    model = os.path.join(out, "linear.onnx")
    build_linear_model(model, SIZE, SIZE)
    data = os.path.join(out, "data.npz")
    write_linear_data(data, MICRO_BATCH * max(ks) * RANKS, SIZE, SIZE)

    # (name, compile flags, launcher, copies run at once)
    variants = [("1 process", [], [], 1),
                ("2 independent processes", [], [], 2),
                ("2 ranks, deferred", ["--data-parallel"], launch, 1),
                ("2 ranks, per micro-batch", ["--data-parallel", "--collectives",
                                              "per-micro-batch"], launch, 1)]
    rows = []
    for k in ks:
        for name, flags, prefix, copies in variants:
            tag = "k%d_%s" % (k, re.sub(r"\W+", "_", name))
            artifact = os.path.join(out, tag)
            subprocess.run([compiler, model, "-o", artifact, "--micro-batch", str(MICRO_BATCH),
                            "--accumulation-steps", str(k), "--optimizer", "sgd"] + flags,
                           check=True)
            rows.append({"k": k, "name": name, "command": prefix + [trainer, artifact, "--data",
                                                                     data], "step": float("inf"),
                         "tag": tag, "copies": copies})
    # Interleaved runs, best of each: the machine's noise hits all alike.
    for _ in range(args.runs):
        for row in rows:
            row["step"] = min(row["step"], seconds_per_step(row["command"], args.steps,
                                                            row["copies"]))
    for row in rows:
        log = os.path.join(out, row["tag"] + ".jsonl")
        subprocess.run(row["command"] + ["--steps", "2", "--no-progress", "--log", log],
                       capture_output=True, check=True)
        records = [json.loads(line) for line in open(log)]
        row["all_reduces"] = records[-1].get("all_reduces", 0)

    print("Gradient all-reduce placement: %.1fM parameters (%.1f MB arena), micro-batch %d, "
          "SGD, best of %d runs of %d steps" % (SIZE * SIZE / 1e6, SIZE * SIZE * 4 / 1e6,
                                                MICRO_BATCH, args.runs, args.steps))
    print("| K | run | all-reduces per step | step ms | x 2 independent | x deferred |")
    print("|---|---|---|---|---|---|")
    for k in ks:
        group = [row for row in rows if row["k"] == k]
        independent, deferred = group[1]["step"], group[2]["step"]
        for row in group:
            print("| %d | %s | %d | %.1f | %.2f | %.2f |" % (
                k, row["name"], row["all_reduces"], row["step"] * 1e3,
                row["step"] / independent, row["step"] / deferred))
        print("K=%d: communication per step %.1f ms deferred, %.1f ms per micro-batch "
              "(step time over the 2 independent processes)" % (
                  k, (deferred - independent) * 1e3, (group[3]["step"] - independent) * 1e3))


if __name__ == "__main__":
    main()
