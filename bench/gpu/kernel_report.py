#!/usr/bin/env python3
"""The kernel report (accrue-compile --kernel-report) of the GPU check's GPTs
(bench/gpu/cases.py: 10M and 100M parameters, bf16, AdamW + clipping, b=8,
K=4, sm_90), summed up as one table. Static counts read from the compiled
code, no timings: the instrument the GPU kernel work is measured by.

usage: bench/gpu/kernel_report.py [--build build] [--gpts gpt10m,gpt100m]
                                  [--out DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "test", "e2e", "models")]

import numpy as np  # noqa: E402

import cases  # noqa: E402
import zoo  # noqa: E402


def report(compiler, name, out):
    model = os.path.join(out, name + ".onnx")
    if not os.path.exists(model):
        module = cases.gpt(name)
        zoo.export(module, module.data(2, np.random.default_rng(0)), model, 17)
    cmd = [compiler, model, "-o", os.path.join(out, name), "--micro-batch", str(cases.BENCH_B),
           "--accumulation-steps", str(cases.BENCH_K), "--precision", "bf16",
           "--optimizer", "adamw", "--clip-norm", "1", "--target", "cuda",
           "--cuda-arch", "sm_90", "--kernel-report=json"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stderr)
    return json.loads(proc.stdout)


def rows(r):
    t, p, ks = r["totals"], r["ptx_totals"], r["kernels"]
    large = [k for k in ks if k["footprint_bytes"] > 1 << 20]
    low = [k for k in large if k["sector_efficiency"] is not None
           and k["sector_efficiency"] < 0.8]
    one_block = [k for k in ks if k["grid"][0] == 1 and k["grid_stride"]
                 and k["trip_count"] > 1 and k["footprint_bytes"] > 1 << 20]
    return [
        ("kernels per micro-batch (per step)",
         "%d (%d)" % (t["kernels_per_micro_batch"], t["kernels_per_step"])),
        ("GEMM calls per micro-batch; with M or N = 1",
         "%d; %d" % (t["gemm_calls_per_micro_batch"], t["gemms_with_m_or_n_1"])),
        ("longest chain of memory operations in one thread",
         "%d" % t["max_memory_ops_per_thread"]),
        ("one-thread kernels with loops (PTX)", "%d" % p["single_thread_kernels_with_loops"]),
        ("grid-stride kernels of one block over > 1 MB", "%d" % len(one_block)),
        ("kernels dividing by parameters (PTX)", "%d of %d" % (
            p["kernels_dividing_by_parameters"], len(ks))),
        ("kernels > 1 MB under 80% sector efficiency (worst)", "%d of %d (%s)" % (
            len(low), len(large), t["worst_sector_efficiency_over_1mb"])),
        ("loop-invariant kernels per micro-batch",
         "%d" % t["loop_invariant_kernels_per_micro_batch"]),
        ("kernel footprint per micro-batch", "%.1f GB" % (
            t["footprint_bytes_per_micro_batch"] / 1e9)),
        ("max registers; kernels spilling; lowest occupancy", "%d; %d; %s" % (
            p["max_registers"], p["kernels_spilling"], p["lowest_occupancy"])),
    ]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    parser.add_argument("--gpts", default="gpt10m,gpt100m")
    parser.add_argument("--out")
    args = parser.parse_args()
    compiler = os.path.join(args.build, "bin", "accrue-compile")
    out = args.out or tempfile.mkdtemp(prefix="accrue-kernel-report-")
    os.makedirs(out, exist_ok=True)
    names = args.gpts.split(",")
    tables = {name: rows(report(compiler, name, out)) for name in names}
    print("| (static, from the compiled code) | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for i, (label, _) in enumerate(tables[names[0]]):
        print("| %s | %s |" % (label, " | ".join(tables[n][i][1] for n in names)))


if __name__ == "__main__":
    main()
