# The counting emulator (accrue-compile --target cuda-emulated
# --count-accesses; accrue-train --kernel-profile) on every model of
# cuda_emulated.py, checked against what does not come from its code:
# - every model trains with its accesses counted: no two threads of a
#   launch write one element or read what another writes (unless a barrier
#   of their block lies between: the row groups), and no access leaves its
#   view (a run that breaks either fails naming the node); the
#   losses are the uncounted emulated step's (the counted one is the same
#   program; LLVM vectorizes it differently, so they agree to rounding);
# - on the test GPT, the profile's launches per kernel are the static
#   kernel report's launches per step times the steps run (the report
#   evaluates the step's loops, the counter counts calls); each one-thread
#   kernel's chain is the report's memory operations per thread; each
#   access's sector efficiency over all its requests is within 0.25 of the
#   report's for the first warp's;
# - the token embedding's gradient is d x 17 threads, one per feature and
#   table row (the test GPT's 17 rows are 17 ranges of one row), each
#   reading the b x T ids of the micro-batch and, for the tokens of its
#   row, the gradient's element and a read-modify-write of the table's:
#   its longest chain is b x T + 3 x the most frequent id's count in a
#   micro-batch, counted from the data;
# - the embedding's gradient by sorted rows writes no element twice, and
#   its longest chain is set by the shapes, the same for skewed ids;
# - the profile is the same for 1 and 2 CPU threads (test_accrue.py checks
#   Python's Session.save_kernel_profile); accrue-train refuses --kernel-profile for
#   an artifact compiled without counting, with one line naming the flag,
#   and accrue-compile refuses --count-accesses for --target cuda.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import json
import os
import subprocess
import sys

import numpy as np

import accrue_e2e as e2e
import zoo

out = sys.argv[1]
rng = np.random.default_rng(11)


def export(name, module, samples):
    return zoo.export_with_data(module, samples, rng, out, name)


def counted(tag, model, data, micro_batch, steps, **flags):
    """Trains the counted and the uncounted emulated artifact; returns the
    counted one's artifact, profile and log after checking the losses."""
    logs, art = [], None
    for count in (False, True):
        name = "%s_%s" % (tag, "counted" if count else "plain")
        art = e2e.compile_model(model, os.path.join(out, name), micro_batch,
                                target="cuda-emulated", count_accesses=count, **flags)
        log = os.path.join(out, name + ".jsonl")
        extra = ["--kernel-profile", os.path.join(out, name + ".profile.json")] if count else []
        e2e.train(art, data, steps, log=log, extra=extra)
        logs.append(e2e.read_jsonl(log))
    plain, counts = logs
    assert len(plain) == len(counts) == steps, (plain, counts)
    for a, b in zip(plain, counts):
        for key in ("loss", "grad_norm"):
            if key in a:
                assert abs(a[key] - b[key]) <= 1e-5 * abs(a[key]) + 1e-7, (tag, key, a, b)
    profile = json.load(open(os.path.join(out, tag + "_counted.profile.json")))
    assert profile["format"] == "accrue-kernel-profile" and profile["steps"] == steps, profile
    assert profile["totals"]["accesses"] > 0, profile["totals"]
    print("%s: %d launches, %d accesses counted, no race, nothing out of bounds"
          % (tag, profile["totals"]["launches"], profile["totals"]["accesses"]))
    return art, profile


common = dict(accumulation_steps=4, optimizer="adamw", lr=0.01, weight_decay=0.01,
              clip_norm=0.5)

mse, mse_data = export("mse", zoo.MSEMLP(1), 64)
counted("mse", mse, mse_data, 4, 2, **common)
counted("mse sgd", mse, mse_data, 4, 2, accumulation_steps=2, optimizer="sgd", lr=0.1,
        momentum=0.9, nesterov=True)
counted("mse fp16", mse, mse_data, 4, 3, precision="fp16", loss_scale="dynamic", **common)
cnn, cnn_data = export("cnn", zoo.CNN(2), 32)
counted("cnn", cnn, cnn_data, 2, 1, **common)
# Micro-batch 16: the convolutions' GEMMs take the samples as their batch,
# the weight gradients' inputs are copied with samples and pixels
# innermost; bf16: the padding and the columns move bf16.
counted("cnn micro-batch 16", cnn, cnn_data, 16, 1, accumulation_steps=2,
        optimizer="adamw", lr=0.01, weight_decay=0.01, clip_norm=0.5)
counted("cnn bf16", cnn, cnn_data, 16, 1, accumulation_steps=2, optimizer="none",
        precision="bf16")
for kind in ("gru", "lstm"):
    rnn, rnn_data = export(kind, zoo.RecurrentClassifier(6, kind), 16)
    counted(kind, rnn, rnn_data, 2, 1, **common)
wide, wide_data = export("wide", zoo.GPT(5, vocab=300, d=128, heads=2, layers=1), 8)
wide_art, wide_profile = counted("wide", wide, wide_data, 2, 1, accumulation_steps=2,
                                 optimizer="none", no_row_groups=True)
# Its row reductions over 128 features and 300 logits are warp reductions
# (lane 0 stores the row's value): run in phases at their shuffles, every
# lane's chain goes on across the phases, so lane 0's, the longest, is its
# loads and its store, as the report reads it.
wide_static = {k["name"]: k for k in
               json.load(open(os.path.join(wide_art, "step.json")))["kernel_report"]["kernels"]}
warp_kernels = 0
for kernel in wide_profile["kernels"]:
    s = wide_static[kernel["name"]]
    if s["threads"] > 32 and any(a["op"] == "store" and a["active_lanes"] == 1
                                 for a in s["accesses"]):
        assert kernel["longest_chain"] == s["memory_ops_per_thread"] > 2, (kernel, s)
        warp_kernels += 1
assert warp_kernels >= 6, warp_kernels
print("wide: %d warp reductions, their counted chains the report's" % warp_kernels)
# Row groups (the default; --no-row-groups above): the row reductions and
# row maps of a row share a kernel of a block per row, with block barriers
# between them and between a reduction's warps' values in workgroup memory
# and thread 0's fold of them; a thread reads what another thread of its
# block wrote only across a barrier (the counter fails a run that reads
# across none, naming the node).
_, rows_profile = counted("wide, row groups", wide, wide_data, 2, 1, accumulation_steps=2,
                          optimizer="none")
assert rows_profile["totals"]["launches"] < wide_profile["totals"]["launches"], \
    (rows_profile["totals"], wide_profile["totals"])

# The embedding's gradient by sorted rows (micro-batches of 16 x 8 = 128
# tokens): the keys written at their ranks and the segments' sums written
# into their rows, a thread each, never write one element twice. Every
# thread's chain is bounded by the shapes, whatever the ids: the longest
# (a segment's last token: its key and the next, the tails of the 11 tiles
# of 12 keys, ceil(sqrt(128)), then its own tile, two loads each, and the
# row's store) is the same for ids drawn uniformly and for ids of which
# 80% are one (a walk of every token would be 128 + 3 x its count).
N = 16 * 8
TILE = int(np.ceil(np.sqrt(N)))
TILES = -(-(N + 1) // TILE)
chains = []
for skew in (False, True):
    skew_rng = np.random.default_rng(4)
    data = zoo.GPT(5, vocab=300, d=128, heads=2, layers=1).data(32, skew_rng)
    if skew:
        data["idx"][skew_rng.random(data["idx"].shape) < 0.8] = 7
        data["idx"][:, 0] = -1
    path = os.path.join(out, "sorted_%d.npz" % skew)
    np.savez(path, **data)
    _, sorted_profile = counted("sorted embedding gradient%s" % (", skewed" if skew else ""),
                                wide, path, 16, 1, accumulation_steps=2, optimizer="none")
    chains.append(max(k["longest_chain"] for k in sorted_profile["kernels"]
                      if k["node"] == "/wte/Gather"))
assert chains == [2 + 2 * TILES + 2 * TILE + 1] * 2, (chains, TILE, TILES)
print("sorted embedding gradient: longest chain %d for uniform and skewed ids" % chains[0])

dropout, dropout_data = export("dropout", zoo.GPT(4, dropout=0.2, loss="masked"), 16)
counted("dropout", dropout, dropout_data, 2, 1, **common)
bn, bn_data = export("bn", zoo.BatchNormCNN(12), 20)
counted("bn", bn, bn_data, 2, 2, **common)

# Softmax's rows of 64 in workgroup memory (bf16): the members' accesses
# there are checked for races among the block's threads.
rows64, rows64_data = export("rows64", zoo.GPT(7, vocab=96, d=64, heads=2, layers=1,
                                               block=64), 8)
counted("gpt bf16 rows of 64", rows64, rows64_data, 2, 1, accumulation_steps=2,
        optimizer="none", precision="bf16")

# The test GPT (padded tokens, a partial last window), with its kernel
# report.
B, T, D = 2, 8, 16  # zoo.GPT's defaults: block 8, width 16
gpt, gpt_data = export("gpt", zoo.GPT(3), 19)
STEPS = 2  # full windows (the third, partial one runs 2 micro-batches of 4)
art, profile = counted("gpt", gpt, gpt_data, B, STEPS, **common)
report = json.load(open(os.path.join(art, "step.json")))["kernel_report"]
static = {k["name"]: k for k in report["kernels"]}
assert len(profile["kernels"]) == len(static), (len(profile["kernels"]), len(static))
checked = 0
for kernel in profile["kernels"]:
    s = static[kernel["name"]]
    assert kernel["node"] == s["node"], (kernel["name"], kernel["node"], s["node"])
    assert kernel["launches"] == s["launches_per_step"] * STEPS, (kernel["name"], kernel, s)
    assert kernel["threads"] == s["threads"] * kernel["launches"], (kernel["name"], kernel, s)
    if s["threads"] == 1:
        assert kernel["longest_chain"] == s["memory_ops_per_thread"], (kernel["name"], kernel, s)
    assert len(kernel["accesses_by_site"]) == len(s["accesses"]), kernel["name"]
    for dynamic, first in zip(kernel["accesses_by_site"], s["accesses"]):
        assert dynamic["buffer"] == first["buffer"] and dynamic["op"] == first["op"], (
            kernel["name"], dynamic, first)
        if dynamic["sector_efficiency"] is not None and first["sector_efficiency"] is not None:
            assert abs(dynamic["sector_efficiency"] - first["sector_efficiency"]) <= 0.25, (
                kernel["name"], dynamic, first)
            checked += 1
assert checked > 100, checked
print("gpt: %d kernels launched as the report says; %d accesses' sector efficiency "
      "as the report's first warp" % (len(profile["kernels"]), checked))

embedding = [k for k in profile["kernels"] if k["node"] == "/wte/Gather"
             and k["longest_chain"] > 4]
assert len(embedding) == 1, [k["name"] for k in profile["kernels"] if "wte" in k["node"]]
VOCAB = 17
assert embedding[0]["threads"] == D * VOCAB * embedding[0]["launches"], embedding[0]
ids = np.load(gpt_data)["idx"][:STEPS * 4 * B]  # the full windows' micro-batches
most = max(np.bincount(batch.ravel(), minlength=VOCAB).max()
           for batch in ids.reshape(-1, B * T))
assert embedding[0]["longest_chain"] == B * T + 3 * most, (embedding[0], most)
print("gpt: the token embedding's gradient is %d threads (d x rows) walking at most %d "
      "accesses (b T ids + 3 x %d tokens of one id)"
      % (D * VOCAB, embedding[0]["longest_chain"], most))

# The same profile for any CPU thread count.
profiles = []
for threads in (1, 2):
    path = os.path.join(out, "gpt_threads%d.json" % threads)
    e2e.train(art, gpt_data, STEPS, extra=["--threads", str(threads), "--kernel-profile", path])
    profiles.append(open(path).read())
assert profiles[0] == profiles[1], "the profile depends on the thread count"
assert json.loads(profiles[0]) == profile
print("gpt: the same profile for 1 and 2 threads")

# Bad flags: one line naming them.
plain = os.path.join(out, "gpt_plain")
proc = subprocess.run([e2e.tool("accrue-train"), plain, "--data", gpt_data, "--steps", "1",
                       "--kernel-profile", os.path.join(out, "none.json")],
                      capture_output=True, text=True)
assert proc.returncode != 0 and "--count-accesses" in proc.stderr, proc.stderr
assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
assert not os.path.exists(os.path.join(out, "none.json"))
proc = subprocess.run([e2e.tool("accrue-compile"), gpt, "-o", os.path.join(out, "refused"),
                       "--micro-batch", "2", "--target", "cuda", "--count-accesses"],
                      capture_output=True, text=True)
assert proc.returncode != 0 and "--count-accesses" in proc.stderr and "cuda-emulated" in proc.stderr, proc.stderr
print("ok")
