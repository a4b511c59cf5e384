# ZeRO stage 2 (accrue-compile --shard-gradients): besides the optimizer
# state, each rank keeps only its 1/G shard of the gradient accumulator;
# every micro-batch's gradients are reduce-scattered into it as the backward
# computes them. Over Gloo at 2 and 3 ranks and MPI at 2, five AdamW steps
# with clipping give the unsharded run's parameters at the same split (rtol
# 1e-5: the sums run in another order) and one rank's at K=4; so do an
# effective batch that leaves the last rank with padding only (every rank
# runs the same micro-batches: the collectives are per micro-batch), fp16
# with dynamic loss scaling, and bf16. Per
# step: one reduce-scatter per gradient and micro-batch, one all-gather, and
# the floats handed over are K gradient sets plus the gathered arena and
# three scalars. The artifact's accumulator is a shard of dynamic size; the
# memory plan holds a quarter of the accumulator at 4 ranks; a checkpoint set
# written at 2 ranks resumes at 3 equal to the uninterrupted run; what stage
# 2 cannot do is refused naming the flag.
#
# REQUIRES: mpi
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import json
import os
import sys

import accrue_e2e as e2e

out = sys.argv[1]
MODEL = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "spirals", "model.onnx")
DATA = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "spirals", "data.npz")
STEPS, B = 5, 4
FLAGS = dict(optimizer="adamw", lr=0.01, weight_decay=0.01, clip_norm=0.5)
MPIRUN = [os.environ["ACCRUE_MPIRUN"], "--oversubscribe", "--quiet"]

stage2 = e2e.compile_model(MODEL, os.path.join(out, "stage2"), B, data_parallel=True,
                           shard_gradients=True, **FLAGS)
plain = e2e.compile_model(MODEL, os.path.join(out, "plain"), B, data_parallel=True, **FLAGS)
with open(os.path.join(stage2, "step.json")) as f:
    manifest = json.load(f)
ARENA = manifest["arena_size"]
PARAMS = len(manifest["params"])
GRADIENT_FLOATS = sum(p["numel"] for p in manifest["params"])
assert manifest["shard_optimizer"] is True and manifest["shard_gradients"] is True, manifest
shapes = {a["role"]: a["shape"] for a in manifest["args"]}
assert shapes["accumulator"] == [-1] and shapes["state"] == [-1], manifest["args"]


def train_cmd(art, tag, k, steps=STEPS, extra=()):
    """accrue-train's command; k None: K from an --effective-batch in `extra`."""
    return [e2e.tool("accrue-train"), art, "--data", DATA, "--steps", str(steps),
            "--no-progress", "--export", os.path.join(out, tag + ".onnx"),
            "--log", os.path.join(out, tag + ".jsonl")] + (
                ["--accumulation-steps", str(k)] if k else []) + list(extra)


def gloo(art, tag, ranks, k, steps=STEPS, extra=()):
    for code, text in e2e.gloo_ranks(train_cmd(art, tag, k, steps, extra), ranks):
        assert code == 0, text


def same(tag, want, what):
    got = e2e.initializers(os.path.join(out, tag + ".onnx"))
    for name, value in want.items():
        e2e.assert_close("%s %s" % (tag, name), got[name], value, rtol=1e-5, atol=1e-7)
    print("%s: the parameters of %s" % (tag, what))


def log(tag):
    return e2e.read_jsonl(os.path.join(out, tag + ".jsonl"))


def params(tag):
    return e2e.initializers(os.path.join(out, tag + ".onnx"))


# One rank at K=4: the reference of every 16-sample split.
e2e.run(train_cmd(plain, "one", 4))

for ranks, k in ((2, 2), (3, 2)):
    gloo(plain, "plain%d" % ranks, ranks, k)
    gloo(stage2, "stage2_%d" % ranks, ranks, k)
    same("stage2_%d" % ranks, params("plain%d" % ranks), "the unsharded run at %d ranks" % ranks)
    if ranks * k == 4:
        same("stage2_%d" % ranks, params("one"), "one rank at K=4")
    for p, s in zip(log("plain%d" % ranks), log("stage2_%d" % ranks)):
        assert s["reduce_scatters"] == k * PARAMS and s["all_gathers"] == 1, s
        # K gradient sets, the gathered parameters, the loss sum and count
        # and the norm's partial sum.
        assert s["collective_floats"] == k * GRADIENT_FLOATS + ARENA + 3, (s, k, GRADIENT_FLOATS)
        e2e.assert_close("stage2_%d loss" % ranks, s["loss"], p["loss"], rtol=1e-6, atol=0)
    print("stage2_%d: %d reduce-scatters (a gradient per micro-batch) and one all-gather "
          "per step" % (ranks, k * PARAMS))
e2e.run(MPIRUN + ["-np", "2"] + train_cmd(stage2, "mpi_stage2", 2))
same("mpi_stage2", params("plain2"), "the unsharded Gloo run at 2 ranks (over MPI)")

# An effective batch of 20 over 3 ranks at micro-batch 4: K = 2, and the
# last rank's second micro-batch is padding. Every rank still runs both.
gloo(plain, "e20_plain", 3, None, extra=["--effective-batch", "20"])
gloo(stage2, "e20_stage2", 3, None, extra=["--effective-batch", "20"])
same("e20_stage2", params("e20_plain"), "the unsharded run at an effective batch of 20")

# Mixed precision: fp16 with dynamic loss scaling (the skip decision reads
# the norm, all-reduced from the shards) and bf16, each as unsharded.
for precision, extra in (("fp16", dict(loss_scale="dynamic")), ("bf16", {})):
    for name, shard in (("plain", {}), ("stage2", dict(shard_gradients=True))):
        art = e2e.compile_model(MODEL, os.path.join(out, precision + name), B, data_parallel=True,
                                precision=precision, **extra, **shard, **FLAGS)
        gloo(art, precision + name, 2, 2)
    same(precision + "stage2", params(precision + "plain"), "the unsharded %s run" % precision)

# The memory plan: a quarter of the accumulator and of the state at 4 ranks.
def plan(*flags):
    proc = e2e.run([e2e.tool("accrue-compile"), MODEL, "--micro-batch", str(B), "--data-parallel",
                    "--plan=json", "-o", os.path.join(out, "plan")] + list(flags))
    return json.loads(proc.stdout)


full, stage1, quarter = (plan(), plan("--shard-optimizer", "--ranks", "4"),
                         plan("--shard-gradients", "--ranks", "4"))
shard_bytes = 4 * (-(-ARENA // 4 // 16) * 16)
assert full["gradient_bytes"] == stage1["gradient_bytes"] == 4 * ARENA, (full, stage1)
assert quarter["gradient_bytes"] == shard_bytes, quarter
assert quarter["optimizer_state_bytes"] == stage1["optimizer_state_bytes"] == 2 * shard_bytes
print("plan: the accumulator %d bytes per rank sharded over 4, %d unsharded"
      % (quarter["gradient_bytes"], full["gradient_bytes"]))

# A checkpoint set written at 2 ranks resumes at 3.
ckpt = os.path.join(out, "ckpt")
gloo(stage2, "first", 2, 2, steps=3, extra=["--checkpoint-dir", ckpt, "--checkpoint-every", "3"])
assert "step-00000003.shard-1-of-2.safetensors" in os.listdir(ckpt), os.listdir(ckpt)
os.remove(os.path.join(ckpt, "accrue.lock"))
gloo(stage2, "at3", 3, None, extra=["--checkpoint-dir", ckpt, "--resume",
                                     "--effective-batch", "16"])
gloo(stage2, "uninterrupted", 2, 2)
same("at3", params("uninterrupted"), "the uninterrupted run (resumed at 3 ranks)")

# What stage 2 cannot do, refused at compile time naming the flag.
for flags, message in ((["--shard-gradients"], "--shard-gradients needs --data-parallel"),
                       (["--shard-gradients", "--data-parallel", "--target", "cuda-emulated"],
                        "--shard-gradients is implemented for the cpu target only")):
    proc = e2e.run([e2e.tool("accrue-compile"), MODEL, "--micro-batch", "4", "-o",
                    os.path.join(out, "refused")] + flags, expect_ok=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
print("refused: stage 2 without data parallelism or off the CPU")
