# Long runs: 50,000 optimizer steps of a small model (logging every step,
# checkpointing every 100) keep resident memory flat, and the metrics log
# stays valid JSON lines when the run is killed near its end.
#
# REQUIRES: torch
# (Resident memory means nothing under AddressSanitizer, whose quarantine
# holds freed memory: the plain build runs this test.)
# UNSUPPORTED: sanitizer
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import os
import signal
import subprocess
import sys
import time

import numpy as np

import accrue_e2e as e2e

# Resident memory is measured: glibc's fill pattern would touch pages the
# step never does (lit.cfg.py sets it for the other tests).
os.environ.pop("MALLOC_PERTURB_", None)
import zoo

out = sys.argv[1]
STEPS = 50000
module = zoo.MSEMLP(5)
data = module.data(30, np.random.default_rng(5))
path = os.path.join(out, "mlp.onnx")
zoo.export(module, data, path, 17)
npz = os.path.join(out, "mlp.npz")
np.savez(npz, **data)
art = e2e.compile_model(path, os.path.join(out, "art"), 4, accumulation_steps=2, lr=0.01)
log = os.path.join(out, "run.jsonl")
cmd = [e2e.tool("accrue-train"), art, "--data", npz, "--steps", str(STEPS), "--no-progress",
       "--log", log, "--checkpoint-dir", os.path.join(out, "ckpt"),
       "--checkpoint-every", "100"]


def resident_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


def steps_logged():
    try:
        with open(log, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


# Resident memory by step, sampled while the run goes.
proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
samples = []
while proc.poll() is None:
    rss = resident_kib(proc.pid) if proc.poll() is None else None
    step = steps_logged()
    if rss is not None and step < STEPS:
        samples.append((step, rss))
    time.sleep(0.005)
_, err = proc.communicate()
assert proc.returncode == 0, err
records = e2e.read_jsonl(log)
assert [r["step"] for r in records] == list(range(1, STEPS + 1))
early = [rss for step, rss in samples if 2000 <= step < 10000]
late = [rss for step, rss in samples if step >= 40000]
assert len(early) >= 3 and len(late) >= 3, samples
growth = max(late) - max(early)
print("resident memory: %d KiB by step 10000, %d KiB after step 40000 (%+d KiB), %d samples"
      % (max(early), max(late), growth, len(samples)))
# Flat: a leak of 4 bytes per step would add 117 KiB here; allow page
# granularity and allocator noise, not a per-step leak.
assert growth <= 96, "resident memory grows with steps: %+d KiB" % growth

# Killed near the end: every line of the log is a complete record.
os.remove(log)
proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while proc.poll() is None and steps_logged() < STEPS * 9 // 10:
    time.sleep(0.001)
proc.send_signal(signal.SIGKILL)
proc.wait()
assert proc.returncode == -signal.SIGKILL, "the run finished before the kill"
with open(log, "rb") as f:
    blob = f.read()
assert blob.endswith(b"\n"), "the log ends with a partial line"
killed = e2e.read_jsonl(log)
assert [r["step"] for r in killed] == list(range(1, len(killed) + 1))
assert killed == records[: len(killed)]
print("killed at step %d: the log holds %d complete records" % (len(killed), len(killed)))
