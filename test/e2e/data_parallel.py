# Data parallelism over MPI: `mpirun -np 2 accrue-train` with K=2 gives the
# parameters of one rank with K=4 (rtol 1e-5) over 5 AdamW steps with
# clipping, also for a masked-token GPT whose ranks hold different token
# counts, for a GPT with Dropout, and for a partial last window that leaves
# one rank idle, and for an effective batch that 2 ranks x micro-batch do
# not divide. The all-reduce runs exactly once per optimizer step (the
# runtime's counter in metrics.jsonl), never per micro-batch; the per-micro-batch placement
# (--collectives per-micro-batch) gives the same parameters with K
# all-reduces per step, padding ranks short of samples. fp16 with dynamic
# loss scaling skips the same steps on 2 ranks as one rank does at twice
# the scale (each rank scales its own window's mean). Losses that combine
# means with different counts sum each term's count over the ranks first.
# Only rank 0 writes; a checkpointed 2-rank run resumes bit-identically.
#
# REQUIRES: mpi, torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import os
import re
import sys

import numpy as np

import accrue_e2e as e2e
import mlp
import zoo

out = sys.argv[1]
MPIRUN = [os.environ["ACCRUE_MPIRUN"], "-np", "2", "--oversubscribe", "--quiet"]
STEPS = 5


def train(model, data, tag, b, k, ranks, steps=STEPS, **flags):
    art = e2e.compile_model(model, os.path.join(out, tag), b, accumulation_steps=k,
                            lr=0.01, clip_norm=0.5, data_parallel=ranks > 1 or None,
                            **flags)
    trained, log = os.path.join(out, tag + ".onnx"), os.path.join(out, tag + ".jsonl")
    cmd = [e2e.tool("accrue-train"), art, "--data", data, "--steps", str(steps),
           "--no-progress", "--export", trained, "--log", log]
    e2e.run(MPIRUN + cmd if ranks > 1 else cmd)
    return e2e.initializers(trained), e2e.read_jsonl(log)


def same(got, want, what):
    for name, value in want.items():
        e2e.assert_close("%s %s" % (what, name), zoo.comparable(name, got[name]),
                         zoo.comparable(name, value), rtol=1e-5, atol=1e-6)


# 1. The MLP: 2 ranks x K=2 against 1 rank x K=4, micro-batch 4.
model = os.path.join(out, "mlp.onnx")
mlp.export(mlp.MLP(seed=3), model)
# A third of the labels are ignored: ranks and micro-batches count unequal
# numbers of samples, and the mean is over the whole window's count.
x, y = mlp.dataset(STEPS * 16, seed=5, ignored=0.3)
mlp.assert_unequal_counts(y, 4, 16)
mlp.assert_unequal_counts(y, 8, 16)
data = os.path.join(out, "mlp.npz")
np.savez(data, x=x, y=y)
one, one_log = train(model, data, "mlp_1x4", 4, 4, 1)
two, two_log = train(model, data, "mlp_2x2", 4, 2, 2)
same(two, one, "2 ranks")
assert len(two_log) == STEPS, "rank 0 alone logs"
assert all(r["all_reduces"] == 1 for r in two_log), two_log
for a, b in zip(two_log, one_log):
    e2e.assert_close("step %d loss" % a["step"], a["loss"], b["loss"], rtol=1e-5, atol=1e-7)
naive, naive_log = train(model, data, "mlp_2x2_naive", 4, 2, 2, collectives="per-micro-batch")
same(naive, one, "per-micro-batch all-reduce")
assert all(r["all_reduces"] == 2 for r in naive_log), naive_log

# fp16 with dynamic loss scaling: the overflow check runs on the summed
# gradient, so every rank skips the same steps and backs off alike. Each
# rank seeds its backward as PyTorch's DDP + GradScaler does, with the
# scale times the gradient of its own window's mean (b*K = 8 samples
# here), so 2 ranks at scale s run the very micro-batch backwards of one
# rank (b*K = 16) at scale 2s: the same overflows, the scale and skip
# sequence of one rank started at twice the scale, and the same parameters
# (to fp16's rounding of parameters that differ in the last f32 bit).
half_one, half_one_log = train(model, data, "mlp_fp16_1x4", 4, 4, 1, precision="fp16",
                               loss_scale="dynamic:init=1.6e6,backoff=0.25,interval=2")
half_two, half_two_log = train(model, data, "mlp_fp16_2x2", 4, 2, 2, precision="fp16",
                               loss_scale="dynamic:init=8e5,backoff=0.25,interval=2")
trace = lambda log, f=1: [(r["loss_scale"] * f, r["skipped"]) for r in log]
assert trace(half_two_log, 2) == trace(half_one_log), (trace(half_two_log), trace(half_one_log))
assert any(skipped for _, skipped in trace(half_two_log)), "no overflow was exercised"
assert not all(skipped for _, skipped in trace(half_two_log)), "nothing trained"
for name, value in half_one.items():
    e2e.assert_close("fp16 2 ranks " + name, half_two[name], value, rtol=1e-3, atol=1e-5)

# Checkpoints: rank 0 writes them, every rank resumes from them; 3 + 2 steps
# end bit-identical to the 5 uninterrupted ones. The checkpoint records the
# number of ranks: one process with the same K would take half the samples
# per step, another effective batch, which is refused naming both
# (resume_split.py resumes on another split of the same one).
ckpt = os.path.join(out, "ckpt")
art = os.path.join(out, "mlp_2x2")
resumed = os.path.join(out, "resumed.onnx")
base = [e2e.tool("accrue-train"), art, "--data", data, "--no-progress", "--checkpoint-dir", ckpt]
e2e.run(MPIRUN + base + ["--steps", "3"])
e2e.run(MPIRUN + base + ["--steps", "5", "--resume", "--export", resumed])
for name, value in two.items():
    assert np.array_equal(e2e.initializers(resumed)[name], value), "resumed " + name
proc = e2e.run(base + ["--steps", "5", "--resume"], expect_ok=False)
assert proc.returncode != 0 and \
    "was written with 16 samples per optimizer step, this run has 8" in proc.stderr, proc.stderr

def gpt_two_ranks_as_one(module, seed, tag):
    """`module` (a zoo.GPT) trained at micro-batch 1: 2 ranks x K=2 against
    1 rank x K=4."""
    tokens = module.data(STEPS * 4, np.random.default_rng(seed))
    path = os.path.join(out, tag + ".onnx")
    zoo.export(module, tokens, path, 17)
    data = os.path.join(out, tag + ".npz")
    np.savez(data, **tokens)
    one, _ = train(path, data, tag + "_1x4", 1, 4, 1)
    two, _ = train(path, data, tag + "_2x2", 1, 2, 2)
    same(two, one, tag + " 2 ranks")


# 2. A GPT with a masked-token loss over padded sequences: each rank holds a
#    different number of real tokens, and the mean is over all of them.
gpt_two_ranks_as_one(zoo.GPT(8, loss="masked"), 4, "gpt")
# A GPT with training-mode Dropout: masks are keyed by the global sample
# index, so rank 1's samples get the masks they get on one process.
gpt_two_ranks_as_one(zoo.GPT(7, dropout=0.3), 8, "gpt_dropout")

# 3. 19 samples in windows of 8 (2 ranks x 2 x 2): the third window has 3
#    samples, all on rank 0; rank 1 runs an empty step and joins the sum.
x19, y19 = mlp.dataset(19, seed=6, ignored=0.3)
mlp.assert_unequal_counts(y19, 2, 8)
d19 = os.path.join(out, "mlp19.npz")
np.savez(d19, x=x19, y=y19)
one, one_log = train(model, d19, "p_1x4", 2, 4, 1, steps=3)
two, two_log = train(model, d19, "p_2x2", 2, 2, 2, steps=3)
assert [r["samples"] for r in two_log] == [8, 8, 3], two_log
same(two, one, "partial window over 2 ranks")
# With an all-reduce per micro-batch every rank must run as many micro-batches
# as the others: rank 1 runs two of masked padding.
naive, naive_log = train(model, d19, "p_2x2_naive", 2, 2, 2, steps=3,
                         collectives="per-micro-batch")
assert [r["all_reduces"] for r in naive_log] == [2, 2, 2], naive_log
same(naive, one, "partial window, per-micro-batch all-reduce")
# An effective batch of 7 over 2 ranks at micro-batch 2: each rank takes 4
# samples of a step (the second rank 3, the last step 5 = 4 + 1), K = 2,
# padded rows masked. Reference: one rank, micro-batches of 1 x K=7.
one, one_log = train(model, d19, "e7_1x7", 1, 7, 1, steps=3)
two, two_log = train(model, d19, "e7_2", 2, None, 2, steps=3, effective_batch=7)
assert [r["samples"] for r in two_log] == [7, 7, 5], two_log
assert [r["all_reduces"] for r in two_log] == [1, 1, 1], two_log
same(two, one, "effective batch 7 over 2 ranks")
# Losses combining means with different counts (token-level cross-entropy
# plus a sequence-level auxiliary mean; label smoothing over masked tokens):
# each term's count is summed over the ranks before the micro-batch loop,
# so 2 ranks x K=2 train like 1 rank x K=4 (which combined_loss.py checks
# against PyTorch's one big batch), with both placements of the gradient
# all-reduce.
for kind in ["aux", "smoothing"]:
    cl_model = os.path.join(out, "combined_%s.onnx" % kind)
    cl = zoo.CombinedLoss.data(np.random.default_rng(31), STEPS * 8)
    zoo.export(zoo.CombinedLoss(kind), cl, cl_model, 17)
    cl_data = os.path.join(out, "combined_%s.npz" % kind)
    np.savez(cl_data, **cl)
    cl_one, _ = train(cl_model, cl_data, "cl_%s_1x4" % kind, 2, 4, 1)
    cl_two, cl_log = train(cl_model, cl_data, "cl_%s_2x2" % kind, 2, 2, 2)
    assert [r["all_reduces"] for r in cl_log] == [2] * STEPS, cl_log
    same(cl_two, cl_one, "combined loss (%s), 2 ranks" % kind)
    cl_naive, _ = train(cl_model, cl_data, "cl_%s_2x2_naive" % kind, 2, 2, 2,
                        collectives="per-micro-batch")
    same(cl_naive, cl_one, "combined loss (%s), per-micro-batch all-reduce" % kind)
# Ranks given different runs are refused before the first collective
# (instead of waiting forever for a rank that stopped earlier), naming the
# rank; so is a rank that cannot read its data.
mpmd = [os.environ["ACCRUE_MPIRUN"], "--oversubscribe", "--quiet"]
one_rank = lambda n: ["-np", "1", e2e.tool("accrue-train"), art, "--data", data, "--steps", str(n),
                      "--no-progress"]
proc = e2e.run(mpmd + one_rank(3) + [":"] + one_rank(4), expect_ok=False, timeout=120)
# (The first rank to fail aborts the others, which may not get to print.)
assert proc.returncode != 0 and re.search(r"\(rank [01]\): the ranks disagree on the run",
                                          proc.stderr), proc.stderr
proc = e2e.run(MPIRUN + [e2e.tool("accrue-train"), art, "--data", os.path.join(out, "none.npz")],
               expect_ok=False, timeout=120)
assert proc.returncode != 0 and re.search(r"\(rank [01]\): cannot read", proc.stderr), proc.stderr
print("ok")
