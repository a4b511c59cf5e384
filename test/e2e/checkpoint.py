# Checkpoints: a run killed with SIGKILL and resumed with --resume ends with
# bit-identical parameters, optimizer state and metrics to an uninterrupted
# run; so does one stopped by SIGTERM or SIGINT, which checkpoints first (a GPT with dropout, AdamW, a warmup+cosine schedule and partial last
# windows, so the data position, step count and LR position all matter).
# Only --keep-checkpoints files remain; corrupt, truncated and mismatched
# checkpoints are refused with a clear error.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import os
import signal
import subprocess
import sys
import time

import numpy as np

import accrue_e2e as e2e
import zoo

out = sys.argv[1]
STEPS = 150
module = zoo.GPT(0, vocab=128, d=64, heads=4, layers=2, block=32, dropout=0.1)
data = module.data(30, np.random.default_rng(0))  # 30 = 3 windows of 8 + 6
path = os.path.join(out, "gpt.onnx")
zoo.export(module, data, path, 17)
npz = os.path.join(out, "gpt.npz")
np.savez(npz, **data)
art = e2e.compile_model(path, os.path.join(out, "art"), 4, accumulation_steps=2, lr=0.01)
schedule = ["--lr-schedule", "cosine", "--warmup-steps", "10", "--total-steps", str(STEPS)]


def train_cmd(steps, ckpt, log, export, extra=()):
    cmd = [e2e.tool("accrue-train"), art, "--data", npz, "--steps", str(steps),
           "--no-progress", "--log", log, "--export", export] + schedule
    if ckpt:
        cmd += ["--checkpoint-dir", ckpt, "--checkpoint-every", "1"]
    return cmd + list(extra)


# The reference: one uninterrupted run.
ref_log, ref_onnx = os.path.join(out, "ref.jsonl"), os.path.join(out, "ref.onnx")
e2e.run(train_cmd(STEPS, os.path.join(out, "ref_ckpt"), ref_log, ref_onnx))
ref = e2e.initializers(ref_onnx)

# 1. A real kill: SIGKILL once a few checkpoints exist, then resume.
ckpt = os.path.join(out, "ckpt")
log, trained = os.path.join(out, "run.jsonl"), os.path.join(out, "run.onnx")
proc = subprocess.Popen(train_cmd(STEPS, ckpt, log, trained), stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE)
deadline = time.time() + 120
while time.time() < deadline:
    names = os.listdir(ckpt) if os.path.isdir(ckpt) else []
    steps = [int(n[5:13]) for n in names if n.startswith("step-") and n.endswith(".safetensors")]
    if steps and max(steps) >= 20:
        break
    time.sleep(0.002)
proc.send_signal(signal.SIGKILL)
proc.wait()
assert proc.returncode == -signal.SIGKILL, "the run finished before the kill"
assert not os.path.exists(trained), "a killed run exports nothing"
resumed = e2e.run(train_cmd(STEPS, ckpt, log, trained, ["--resume"]))
at = int(resumed.stdout.split(" at step ")[1].split()[0])
print("killed and resumed at step", at)
assert 20 <= at < STEPS, at
got = e2e.initializers(trained)
for name, value in ref.items():
    assert np.array_equal(got[name], value), "%s differs after resuming" % name
# The log continues: every step once, with the reference's metrics (steps
# after the last checkpoint of the killed run appear twice, both identical).
records = {}
for r in e2e.read_jsonl(log):
    assert records.get(r["step"], r) == r, r
    records[r["step"]] = r
assert [records[s] for s in range(1, STEPS + 1)] == e2e.read_jsonl(ref_log)
# The optimizer state too: the final checkpoints are equal tensor for tensor.
final = "step-%08d.safetensors" % STEPS
a = open(os.path.join(ckpt, final), "rb").read()
b = open(os.path.join(out, "ref_ckpt", final), "rb").read()
assert a == b, "final checkpoints differ"
kept = sorted(n for n in os.listdir(ckpt) if n.endswith(".safetensors"))
assert len(kept) == 2 and kept[-1] == final, kept

# 2. A graceful stop: SIGTERM (or SIGINT) finishes the current step, writes
# a checkpoint even between scheduled ones, and exits non-zero (128 + the
# signal); resuming from it ends where the uninterrupted run does.
for signum in (signal.SIGTERM, signal.SIGINT):
    stopped = os.path.join(out, "stopped_%d" % signum)
    stop_log = os.path.join(out, "stop_%d.jsonl" % signum)
    stop_onnx = os.path.join(out, "stop_%d.onnx" % signum)
    cmd = train_cmd(STEPS, None, stop_log, stop_onnx,
                    ["--checkpoint-dir", stopped, "--checkpoint-every", "1000"])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if os.path.exists(stop_log) and sum(1 for _ in open(stop_log)) >= 10:
            break
        time.sleep(0.002)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signum, (proc.returncode, err)
    assert not os.path.exists(stop_onnx), "a stopped run exports nothing"
    name = signal.Signals(signum).name
    assert "accrue-train: stopped by %s after step " % name in err, err
    at = int(err.split(" after step ")[1].split(";")[0])
    assert 10 <= at < STEPS and "step-%08d.safetensors" % at in err, err
    assert len(e2e.read_jsonl(stop_log)) == at
    e2e.run(train_cmd(STEPS, None, stop_log, stop_onnx,
                      ["--checkpoint-dir", stopped, "--checkpoint-every", "1000", "--resume"]))
    got = e2e.initializers(stop_onnx)
    for key, value in ref.items():
        assert np.array_equal(got[key], value), "%s differs after a %s stop" % (key, name)
    print("stopped by %s at step %d and resumed: bit-identical" % (name, at))

# 3. Refusals, each with one line naming the problem.
latest = os.path.join(ckpt, final)
def refuse(expect, extra=(), steps=STEPS + 5, directory=ckpt):
    proc = e2e.run(train_cmd(steps, directory, log, trained, ["--resume"] + list(extra)),
                   expect_ok=False)
    assert proc.returncode == 1, proc
    assert expect in proc.stderr, (expect, proc.stderr)
    assert proc.stderr.count("\n") == 1, proc.stderr


refuse("was written with --lr = 0.01, this run has 0.02", ["--lr", "0.02"])
# A longer --steps moves the cosine horizon (--total-steps defaults to it).
refuse("was written with --total-steps (default: --steps) = %d, this run has %d"
       % (STEPS, STEPS + 5), ["--total-steps", str(STEPS + 5)])
blob = bytearray(a)
blob[-100] ^= 0x40
open(latest, "wb").write(blob)
refuse("is corrupt (checksum mismatch)")
open(latest, "wb").write(a[: len(a) // 2])
refuse("truncated")
open(latest, "wb").write(a)
# Another model's artifact cannot take these tensors.
other = zoo.GPT(1, vocab=128, d=32, heads=4, layers=1, block=32)
other_path = os.path.join(out, "other.onnx")
zoo.export(other, data, other_path, 17)
other_art = e2e.compile_model(other_path, os.path.join(out, "other"), 4, accumulation_steps=2,
                              lr=0.01)
proc = e2e.run([e2e.tool("accrue-train"), other_art, "--data", npz, "--steps", "200",
                "--checkpoint-dir", ckpt, "--resume", "--no-progress", "--lr", "0.01"] + schedule,
               expect_ok=False)
assert proc.returncode == 1, proc.stderr
assert "written for another model" in proc.stderr or \
    "does not match the artifact's shape" in proc.stderr, proc.stderr
empty = os.path.join(out, "empty")
os.makedirs(empty)
refuse("--resume: no checkpoint in", directory=empty)
print("ok")
