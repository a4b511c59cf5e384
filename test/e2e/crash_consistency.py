# Crash consistency: accrue-train, checkpointing every step, is killed with
# SIGKILL at random moments 100 times (many of them inside a checkpoint
# write). After every kill the newest checkpoint must load and equal, byte
# for byte, the uninterrupted run's checkpoint of that step; the metrics log
# must still be valid JSON lines; what a killed write left behind is cleaned
# up by the next write; and each chain of killed-and-resumed runs ends with
# the uninterrupted run's parameters, bit for bit.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

import accrue_e2e as e2e
import zoo

out = sys.argv[1]
KILLS = 100
STEPS = 120
rng = random.Random(12)
module = zoo.MSEMLP(3)
data = module.data(30, np.random.default_rng(3))  # windows of 8: 3 full + 6
path = os.path.join(out, "mlp.onnx")
zoo.export(module, data, path, 17)
npz = os.path.join(out, "mlp.npz")
np.savez(npz, **data)
art = e2e.compile_model(path, os.path.join(out, "art"), 4, accumulation_steps=2, lr=0.05,
                        optimizer="adamw")


def train_cmd(ckpt, log, export, keep, resume=False):
    cmd = [e2e.tool("accrue-train"), art, "--data", npz, "--steps", str(STEPS),
           "--no-progress", "--log", log, "--export", export, "--lr-schedule", "cosine",
           "--warmup-steps", "5", "--checkpoint-dir", ckpt, "--checkpoint-every", "1",
           "--keep-checkpoints", str(keep)]
    return cmd + (["--resume"] if resume else [])


def checkpoints(directory):
    names = os.listdir(directory) if os.path.isdir(directory) else []
    done = sorted(n for n in names if n.endswith(".safetensors"))
    partial = [n for n in names if ".safetensors.tmp-" in n]
    return done, partial


# The reference keeps every checkpoint.
ref_dir, ref_log, ref_onnx = (os.path.join(out, n) for n in ("ref", "ref.jsonl", "ref.onnx"))
start = time.time()
e2e.run(train_cmd(ref_dir, ref_log, ref_onnx, STEPS + 1))
run_time = time.time() - start
ref = e2e.initializers(ref_onnx)
ref_records = e2e.read_jsonl(ref_log)
reference = {n: open(os.path.join(ref_dir, n), "rb").read() for n in checkpoints(ref_dir)[0]}
assert len(reference) == STEPS, len(reference)

kills = interrupted_writes = chains = resumed_at = 0
while kills < KILLS:
    # One chain: a fresh directory, killed and resumed until it completes.
    chains += 1
    ckpt, log, trained = (os.path.join(out, "chain%d%s" % (chains, s))
                          for s in ("", ".jsonl", ".onnx"))
    while True:
        resume = bool(checkpoints(ckpt)[0])
        proc = subprocess.Popen(train_cmd(ckpt, log, trained, 3, resume),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0, run_time))
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
        if proc.returncode == 0:
            break
        assert proc.returncode == -signal.SIGKILL, (proc.returncode, err)
        kills += 1
        done, partial = checkpoints(ckpt)
        # Only a run killed after its last step has exported (atomically).
        if os.path.exists(trained):
            assert done[-1] == "step-%08d.safetensors" % STEPS, done
            os.remove(trained)
        assert len(partial) <= 1, "interrupted writes were left behind: %s" % partial
        interrupted_writes += len(partial)
        # A kill between a rename and the rotation leaves one extra.
        assert len(done) <= 3 + 1, done
        if done:
            newest = done[-1]
            blob = open(os.path.join(ckpt, newest), "rb").read()
            assert blob == reference[newest], "%s differs from the uninterrupted run's" % newest
        # Every line of the log is complete JSON and a record of the
        # reference, but the last may be cut short (SIGKILL can end a write
        # part way; the resumed run drops it, and the finished log below is
        # whole).
        lines = open(log).read().split("\n") if os.path.exists(log) else []
        for line in lines[:-1]:
            record = json.loads(line)
            record.pop("time_ms", None)
            assert record == ref_records[record["step"] - 1], record
        if kills == KILLS and done:
            break
    # Resume to the end and compare with the uninterrupted run.
    if proc.returncode != 0:
        e2e.run(train_cmd(ckpt, log, trained, 3, bool(checkpoints(ckpt)[0])))
    got = e2e.initializers(trained)
    for name, value in ref.items():
        assert np.array_equal(got[name], value), "%s differs after chain %d" % (name, chains)
    assert not checkpoints(ckpt)[1], "interrupted writes were not cleaned up"
    records = {}
    for r in e2e.read_jsonl(log):
        records[r["step"]] = r
    assert [records[s] for s in range(1, STEPS + 1)] == ref_records
    shutil.rmtree(ckpt)

print("%d kills over %d chains, %d left an interrupted checkpoint write; every newest checkpoint "
      "equal to the uninterrupted run's, every chain bit-identical at the end"
      % (kills, chains, interrupted_writes))
assert interrupted_writes > 0, "no kill landed inside a checkpoint write"

# A record a kill cut short: the resumed run drops it before appending.
ckpt, log, trained = (os.path.join(out, "torn" + s) for s in ("", ".jsonl", ".onnx"))
e2e.run(train_cmd(ckpt, log, trained, 3))
with open(log, "a") as f:
    f.write('{"grad_norm":0.1,"loss"')
e2e.run(train_cmd(ckpt, log, trained, 3, True))
text = open(log).read()
assert text.endswith("\n") and '"loss"{' not in text, text[-200:]
assert [r["step"] for r in e2e.read_jsonl(log)] == list(range(1, STEPS + 1))
print("a torn last record is dropped on resume")
