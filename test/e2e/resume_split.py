# Resume on another split: a run checkpointed at (b, K, G) = (4, 2, 2) (two
# ranks over Gloo, in torchrun's environment) resumes at (2, 8, 1) and at
# (8, 1, 2), the same 16 samples per optimizer step, and after 5 more AdamW
# steps equals the uninterrupted run at (2, 8, 1) up to summation order
# (rtol 1e-5); at the same split it resumes bitwise. The GPT with Dropout
# and padded targets (SGD with momentum) shows the masks and the token
# counts follow the samples, not the split. Another effective batch is refused, naming both,
# unless --resume-new-batch asks for it, and then the step count and the
# data position carry over.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import os
import shutil
import subprocess
import sys

import numpy as np

import accrue_e2e as e2e

out = sys.argv[1]
SPIRALS = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "spirals")
FLAGS = dict(optimizer="adamw", lr=0.01, weight_decay=0.01, clip_norm=0.5)


def compile_split(model, b, k, ranks, extra):
    tag = "%s_%d_%d_%d" % (os.path.basename(model), b, k, ranks)
    return e2e.compile_model(model, os.path.join(out, tag), b, accumulation_steps=k,
                             data_parallel=ranks > 1 or None, **dict(FLAGS, **extra))


def train(art, data, steps, ranks, ckpt, tag, resume=False, extra=()):
    cmd = [e2e.tool("accrue-train"), art, "--data", data, "--steps", str(steps),
           "--no-progress", "--checkpoint-dir", ckpt, "--checkpoint-every", "1",
           "--export", os.path.join(out, tag + ".onnx")] + (["--resume"] if resume else []) \
        + list(extra)
    if ranks == 1:
        proc = e2e.run(cmd)
        return proc.stdout + proc.stderr
    results = e2e.gloo_ranks(cmd, ranks, timeout=300, env=os.environ)
    for code, text in results:
        assert code == 0, text
    return results[0][1]


def compare(tag, got_tag, want_tag, bitwise=False):
    got = e2e.initializers(os.path.join(out, got_tag + ".onnx"))
    want = e2e.initializers(os.path.join(out, want_tag + ".onnx"))
    for name, value in want.items():
        if bitwise:
            assert got[name].tobytes() == value.tobytes(), (tag, name)
        else:
            e2e.assert_close("%s %s" % (tag, name), got[name], value, rtol=1e-5, atol=1e-7)
    print("%s: %s" % (tag, "bitwise equal" if bitwise else "equal within rtol 1e-5"))


def case(name, model, data, extra):
    first = compile_split(model, 4, 2, 2, extra)
    # The uninterrupted run, 8 steps at (2, 8, 1).
    target = compile_split(model, 2, 8, 1, extra)
    train(target, data, 8, 1, os.path.join(out, name + "_ref_ck"), name + "_ref")
    for b, k, g in [(2, 8, 1), (8, 1, 2), (4, 2, 2)]:
        ckpt = os.path.join(out, "%s_ck_%d%d%d" % (name, b, k, g))
        train(first, data, 3, 2, ckpt, name + "_first")
        art = first if (b, k, g) == (4, 2, 2) else compile_split(model, b, k, g, extra)
        tag = "%s_resumed_%d%d%d" % (name, b, k, g)
        err = train(art, data, 8, g, ckpt, tag, resume=True)
        if (b, k, g) != (4, 2, 2):
            assert "resuming on another split of the same 16 samples per step" in err, err
    # Unchanged split: bitwise to the run that never stopped.
    train(first, data, 8, 2, os.path.join(out, name + "_same_ck"), name + "_same")
    compare(name + " (4,2,2) -> (4,2,2)", name + "_resumed_422", name + "_same", bitwise=True)
    compare(name + " (4,2,2) -> (2,8,1)", name + "_resumed_281", name + "_ref")
    compare(name + " (4,2,2) -> (8,1,2)", name + "_resumed_812", name + "_ref")


spirals_data = os.path.join(SPIRALS, "data.npz")
case("spirals", os.path.join(SPIRALS, "model.onnx"), spirals_data, {})

# A GPT with Dropout and padded targets (masked tokens: the count of each
# window is global).
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "models"))
import torch  # noqa: E402
import zoo  # noqa: E402

module = zoo.GPT(3, dropout=0.1)
data = module.data(16 * 8, np.random.default_rng(0))
gpt_model, gpt_data = os.path.join(out, "gpt.onnx"), os.path.join(out, "gpt.npz")
zoo.export(module, data, gpt_model, 17)
np.savez(gpt_data, **data)
# SGD with momentum: attention's key bias has a gradient that is zero but
# for rounding, which Adam would scale up to lr-sized steps that differ
# with the summation order.
case("gpt", gpt_model, gpt_data, dict(optimizer="sgd", momentum=0.9, lr=0.1))

# Another effective batch: refused, naming both; --resume-new-batch keeps
# the step count and the data position.
art = compile_split(os.path.join(SPIRALS, "model.onnx"), 4, 1, 1, {})
ckpt = os.path.join(out, "spirals_ck_812")
proc = subprocess.run([e2e.tool("accrue-train"), art, "--data", spirals_data, "--steps", "8",
                       "--checkpoint-dir", ckpt, "--resume", "--no-progress"],
                      capture_output=True, text=True)
assert proc.returncode != 0 and "written with 16 samples per optimizer step, this run has 4" \
    in proc.stderr and "--resume-new-batch" in proc.stderr, proc.stderr
log = os.path.join(out, "new_batch.jsonl")
proc = e2e.run([e2e.tool("accrue-train"), art, "--data", spirals_data, "--steps", "10",
                "--checkpoint-dir", ckpt, "--resume", "--resume-new-batch", "--no-progress",
                "--log", log])
assert "resuming with 4 samples per step where the checkpoint's run had 16" in \
    proc.stdout + proc.stderr, proc.stdout + proc.stderr
records = e2e.read_jsonl(log)
assert [r["step"] for r in records if r["step"] > 8] == [9, 10], records
assert all(r["samples"] == 4 for r in records if r["step"] > 8), records
print("another effective batch: refused, then resumed at step 9 with --resume-new-batch")
