# ZeRO stage 1 (accrue-compile --shard-optimizer): each rank keeps and
# updates 1/G of the optimizer state; the accumulator is reduce-scattered
# once per optimizer step and the parameters all-gathered. Over Gloo
# (torchrun's environment) at 2, 3 and 4 ranks and over MPI at 2, five
# AdamW steps with clipping give the unsharded run's parameters at the same
# split (rtol 1e-5: the norm sums its squares in another order) and one
# rank's at K=4. Per step: one reduce-scatter and one all-gather; the floats
# handed to collectives are the unsharded run's plus the all-gathered arena
# and three scalars (an all-reduce moves what a reduce-scatter and an
# all-gather of the same buffer move). The memory plan at --ranks 4 holds a
# quarter of the optimizer state. A sharded checkpoint is a set (the
# checkpoint and one shard per rank) that resumes sharded at G=4, on one
# process, and in an unsharded 2-rank run, each equal to the uninterrupted
# run (rtol 1e-5); a missing or corrupt shard is one line naming its file.
# The CUDA pipeline's sharded step (emulated) gives the CPU's parameters,
# and its checkpoint set resumes on one process.
# What sharding cannot do is refused at compile time naming the flag.
#
# REQUIRES: mpi
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import json
import os
import shutil
import sys

import accrue_e2e as e2e

out = sys.argv[1]
MODEL = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "spirals", "model.onnx")
DATA = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "spirals", "data.npz")
STEPS, B = 5, 4
FLAGS = dict(optimizer="adamw", lr=0.01, weight_decay=0.01, clip_norm=0.5)
MPIRUN = [os.environ["ACCRUE_MPIRUN"], "--oversubscribe", "--quiet"]


sharded = e2e.compile_model(MODEL, os.path.join(out, "sharded"), B, data_parallel=True,
                            shard_optimizer=True, **FLAGS)
plain = e2e.compile_model(MODEL, os.path.join(out, "plain"), B, data_parallel=True, **FLAGS)
with open(os.path.join(sharded, "step.json")) as f:
    manifest = json.load(f)
ARENA = manifest["arena_size"]
assert manifest["shard_optimizer"] is True
assert [a["shape"] for a in manifest["args"] if a["role"] == "state"] == [[-1], [-1]], manifest


def train_cmd(art, tag, k, steps=STEPS, extra=()):
    return [e2e.tool("accrue-train"), art, "--data", DATA, "--steps", str(steps),
            "--accumulation-steps", str(k), "--no-progress",
            "--export", os.path.join(out, tag + ".onnx"),
            "--log", os.path.join(out, tag + ".jsonl")] + list(extra)


def gloo(art, tag, ranks, k, steps=STEPS, extra=(), expect_ok=True):
    """The ranks of a torchrun-style launch, their collectives by Gloo."""
    results = e2e.gloo_ranks(train_cmd(art, tag, k, steps, extra), ranks)
    if expect_ok:
        for code, text in results:
            assert code == 0, text
    return results


def mpi(art, tag, ranks, k, steps=STEPS, extra=()):
    e2e.run(MPIRUN + ["-np", str(ranks)] + train_cmd(art, tag, k, steps, extra))


def same(tag, want, what):
    got = e2e.initializers(os.path.join(out, tag + ".onnx"))
    for name, value in want.items():
        e2e.assert_close("%s %s" % (tag, name), got[name], value, rtol=1e-5, atol=1e-7)
    print("%s: the parameters of %s" % (tag, what))


def log(tag):
    return e2e.read_jsonl(os.path.join(out, tag + ".jsonl"))


# One rank at K=4: the reference of every 16-sample split.
e2e.run(train_cmd(plain, "one", 4))
one = e2e.initializers(os.path.join(out, "one.onnx"))

# Sharded vs unsharded at the same split, over Gloo and MPI.
for ranks, k in ((2, 2), (3, 2), (4, 1)):
    gloo(plain, "plain%d" % ranks, ranks, k)
    gloo(sharded, "sharded%d" % ranks, ranks, k)
    same("sharded%d" % ranks, e2e.initializers(os.path.join(out, "plain%d.onnx" % ranks)),
         "the unsharded run at %d ranks" % ranks)
    if ranks * k == 4:
        same("sharded%d" % ranks, one, "one rank at K=4")
    plain_log, sharded_log = log("plain%d" % ranks), log("sharded%d" % ranks)
    for p, s in zip(plain_log, sharded_log):
        assert s["reduce_scatters"] == 1 and s["all_gathers"] == 1, s
        assert s["collective_floats"] == p["collective_floats"] + ARENA + 3, (p, s)
        e2e.assert_close("sharded%d loss" % ranks, s["loss"], p["loss"], rtol=1e-6, atol=0)
    print("sharded%d: one reduce-scatter and one all-gather per step" % ranks)
# The CUDA pipeline's sharded step, emulated on the CPU: the same parameters
# and collectives as the CPU's.
emulated = e2e.compile_model(MODEL, os.path.join(out, "emulated"), B, data_parallel=True,
                             shard_optimizer=True, target="cuda-emulated", **FLAGS)
gloo(emulated, "emulated2", 2, 2)
same("emulated2", e2e.initializers(os.path.join(out, "sharded2.onnx")),
     "the CPU's sharded run (target cuda-emulated)")
assert all(s["reduce_scatters"] == 1 and s["all_gathers"] == 1 for s in log("emulated2")), \
    log("emulated2")
# Its checkpoint set (the state shards come from device buffers) resumes on
# one process.
emulated_ckpt = os.path.join(out, "emulated_ckpt")
gloo(emulated, "emulated_first", 2, 2, steps=3,
     extra=["--checkpoint-dir", emulated_ckpt, "--checkpoint-every", "3"])
os.remove(os.path.join(emulated_ckpt, "accrue.lock"))
e2e.run(train_cmd(emulated, "emulated_at1", 4, extra=["--checkpoint-dir", emulated_ckpt,
                                                      "--resume"]))
same("emulated_at1", e2e.initializers(os.path.join(out, "emulated2.onnx")),
     "the uninterrupted emulated run (resumed on one process)")
mpi(plain, "mpi_plain", 2, 2)
mpi(sharded, "mpi_sharded", 2, 2)
same("mpi_sharded", e2e.initializers(os.path.join(out, "mpi_plain.onnx")),
     "the unsharded MPI run")
same("mpi_sharded", one, "one rank at K=4")

# The memory plan: a quarter of the optimizer state at 4 ranks.
def plan(*flags):
    proc = e2e.run([e2e.tool("accrue-compile"), MODEL, "--micro-batch", str(B), "--data-parallel",
                    "--plan=json", "-o", os.path.join(out, "plan")] + list(flags))
    return json.loads(proc.stdout)["optimizer_state_bytes"]


full, quarter = plan(), plan("--shard-optimizer", "--ranks", "4")
assert full == 2 * 4 * ARENA, full
assert quarter == 2 * 4 * (-(-ARENA // 4 // 16) * 16) and 4 * quarter < full + 2 * 4 * 64, quarter
print("plan: optimizer state %d bytes per rank sharded over 4, %d unsharded" % (quarter, full))

# Checkpoints: a set written at 2 ranks, resumed elsewhere.
ckpt = os.path.join(out, "ckpt")
gloo(sharded, "first", 2, 2, steps=3, extra=["--checkpoint-dir", ckpt, "--checkpoint-every", "3"])
names = sorted(os.listdir(ckpt))
assert names == ["accrue.lock", "step-00000003.safetensors",
                 "step-00000003.shard-0-of-2.safetensors",
                 "step-00000003.shard-1-of-2.safetensors"], names
gloo(sharded, "uninterrupted", 2, 2)
want = e2e.initializers(os.path.join(out, "uninterrupted.onnx"))


def copy(tag):
    folder = os.path.join(out, "ckpt_" + tag)
    shutil.copytree(ckpt, folder)
    os.remove(os.path.join(folder, "accrue.lock"))
    return ["--checkpoint-dir", folder, "--resume"]


gloo(sharded, "at4", 4, 1, extra=copy("at4"))
same("at4", want, "the uninterrupted run (resumed sharded at 4 ranks)")
e2e.run(train_cmd(sharded, "at1", 4, extra=copy("at1")))
same("at1", want, "the uninterrupted run (resumed on one process)")
gloo(plain, "unsharded", 2, 2, extra=copy("unsharded"))
same("unsharded", want, "the uninterrupted run (resumed unsharded)")

# A set missing a shard, or with a corrupt one: one line naming the file.
broken = copy("missing")
os.remove(os.path.join(broken[1], "step-00000003.shard-1-of-2.safetensors"))
proc = e2e.run(train_cmd(sharded, "missing", 4, extra=broken), expect_ok=False)
assert proc.returncode != 0 and "step-00000003.shard-1-of-2.safetensors" in proc.stderr, proc.stderr
assert "Traceback" not in proc.stderr and "terminate" not in proc.stderr, proc.stderr
broken = copy("corrupt")
path = os.path.join(broken[1], "step-00000003.shard-0-of-2.safetensors")
with open(path, "r+b") as f:
    f.seek(-4, os.SEEK_END)
    f.write(b"\x7f\x7f\x7f\x7f")
proc = e2e.run(train_cmd(sharded, "corrupt", 4, extra=broken), expect_ok=False)
assert proc.returncode != 0 and "shard-0-of-2.safetensors' is corrupt" in proc.stderr, proc.stderr
print("checkpoint sets: resumed at 4 ranks, on one process and unsharded; broken sets refused")

# What sharding cannot do, refused at compile time.
for flags, message in ((["--shard-optimizer"], "--shard-optimizer needs --data-parallel"),
                       (["--shard-optimizer", "--data-parallel", "--no-fuse-optimizer"],
                        "--shard-optimizer needs --fuse-optimizer")):
    proc = e2e.run([e2e.tool("accrue-compile"), MODEL, "--micro-batch", "4", "-o",
                    os.path.join(out, "refused")] + flags, expect_ok=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
print("refused: sharding without data parallelism or a fused update")
