# Data parallelism without MPI: accrue-train launched by torchrun (PyTorch
# 2's torch.distributed.run with --no-python, from the newest-releases venv;
# Debian's 1.13 fails on Python 3.11 before it starts a process) and with
# the environments torchrun and srun give each rank, its collectives by Gloo
# over TCP on localhost. 2 ranks at K=2 and 4 ranks at K=1 give one rank's
# parameters at K=4 (rtol 1e-5: the all-reduce sums in another order) after
# 5 AdamW steps with clipping, with one all-reduce per optimizer step. A
# half-set or wrong environment is one line naming the variable; what only
# looks like a launch (a batch script's Slurm variables, a stray
# MASTER_ADDR, a world of one) runs one process; two processes given the
# same rank are refused; a rank that never arrives ends the rendezvous after
# ACCRUE_RENDEZVOUS_TIMEOUT; a rank killed mid-run ends the others within
# seconds, with an error naming it (rank 0, which serves the store, too).
#
# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t %latest_python

import os
import socket
import subprocess
import sys
import time

import numpy as np

import accrue_e2e as e2e

out, TORCHRUN_PYTHON = sys.argv[1], sys.argv[2]
MODEL = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "spirals", "model.onnx")
DATA = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "spirals", "data.npz")
STEPS, B = 5, 4
FLAGS = dict(optimizer="adamw", lr=0.01, weight_decay=0.01, clip_norm=0.5)


def artifact(k, parallel):
    tag = "k%d%s" % (k, "_dp" if parallel else "")
    return e2e.compile_model(MODEL, os.path.join(out, tag), B, accumulation_steps=k,
                             data_parallel=parallel or None, **FLAGS)


def train_cmd(art, tag):
    return [e2e.tool("accrue-train"), art, "--data", DATA, "--steps", str(STEPS),
            "--no-progress", "--export", os.path.join(out, tag + ".onnx"),
            "--log", os.path.join(out, tag + ".jsonl")]


def run_ranks(cmd, envs, timeout=120):
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for env in envs]
    results = []
    for p in procs:
        o, e = p.communicate(timeout=timeout)
        results.append((p.returncode, o + e))
    return results


def check_same(tag, want):
    got = e2e.initializers(os.path.join(out, tag + ".onnx"))
    for name, value in want.items():
        e2e.assert_close("%s %s" % (tag, name), got[name], value, rtol=1e-5, atol=1e-7)
    log = e2e.read_jsonl(os.path.join(out, tag + ".jsonl"))
    assert [r["all_reduces"] for r in log] == [1] * STEPS, log
    print("%s: same parameters as one rank, one all-reduce per step" % tag)


# One rank, K=4.
e2e.run(train_cmd(artifact(4, False), "one"))
want = e2e.initializers(os.path.join(out, "one.onnx"))
two, four = artifact(2, True), artifact(1, True)

# torchrun itself.
port = e2e.free_port()
e2e.run([TORCHRUN_PYTHON, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--no-python",
         "--master-addr", "127.0.0.1", "--master-port", str(port), "--"] + train_cmd(two, "torchrun"))
check_same("torchrun", want)

# torchrun's environment, 4 ranks.
port = e2e.free_port()
envs = [dict(e2e.clean_env(), RANK=str(r), WORLD_SIZE="4", LOCAL_RANK=str(r),
             MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port)) for r in range(4)]
for code, text in run_ranks(train_cmd(four, "torchrun4"), envs):
    assert code == 0, text
check_same("torchrun4", want)

# srun's environment: the first host of the node list, the port from the
# job id.
def free_job_id():
    """A Slurm job id whose port (29500 + id % 10000) is free here."""
    for job in np.random.default_rng(int(time.time())).integers(0, 10000, 50):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", 29500 + int(job)))
                return str(int(job) + 40000)
            except OSError:
                continue
    raise RuntimeError("no free port in 29500-39499")


job = free_job_id()
envs = [dict(e2e.clean_env(), SLURM_PROCID=str(r), SLURM_NTASKS="2", SLURM_LOCALID=str(r),
             SLURM_STEP_ID="0", SLURM_JOB_NODELIST="localhost,node[2-3]", SLURM_JOB_ID=job)
        for r in range(2)]
for code, text in run_ranks(train_cmd(two, "srun"), envs):
    assert code == 0, text
check_same("srun", want)

# Wrong environments: one line naming the variable, a non-zero exit.
port = str(e2e.free_port())
cases = [
    (dict(RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1"),
     "torchrun's environment is incomplete: MASTER_PORT is not set"),
    (dict(RANK="2", WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=port),
     "RANK='2' is not an integer in [0, 1]"),
    (dict(SLURM_PROCID="0", SLURM_NTASKS="2", SLURM_LOCALID="0", SLURM_STEP_ID="0",
          SLURM_JOB_ID="5"),
     "neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set"),
    (dict(ACCRUE_LAUNCHER="pbs"), "unknown launcher 'pbs'"),
]
for extra, message in cases:
    proc = subprocess.run(train_cmd(two, "bad"), env=dict(e2e.clean_env(), **extra),
                          capture_output=True, text=True, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
    assert sum("error" in line for line in lines) == 1, proc.stderr
    print("refused: %s" % message)
proc = subprocess.run(train_cmd(two, "bad") + ["--launcher", "pbs"], env=e2e.clean_env(),
                      capture_output=True, text=True, timeout=60)
assert proc.returncode != 0 and "--launcher must be auto, mpi, torchrun or slurm" in proc.stderr

# Not launches: a batch script's one process (Slurm's job variables without
# a step's), a stray MASTER_ADDR, a world of one: one rank, no Gloo.
for extra in [dict(SLURM_PROCID="0", SLURM_NTASKS="4", SLURM_JOB_ID="5"),
              dict(MASTER_ADDR="10.0.0.1", MASTER_PORT="1234"),
              dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="10.0.0.1",
                   MASTER_PORT="1234")]:
    proc = subprocess.run(train_cmd(two, "single"), env=dict(e2e.clean_env(), **extra),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "x 2 ranks" not in proc.stdout + proc.stderr, \
        proc.stdout + proc.stderr
print("one process: batch-script Slurm variables, a stray MASTER_ADDR, WORLD_SIZE=1")

# Two processes given the same rank: refused at the rendezvous.
port = str(e2e.free_port())
envs = [dict(e2e.clean_env(), RANK="0" if r < 2 else "1", WORLD_SIZE="2", LOCAL_RANK="0",
             MASTER_ADDR="127.0.0.1", MASTER_PORT=port, ACCRUE_RENDEZVOUS_TIMEOUT="5")
        for r in range(2)]
envs[1]["ACCRUE_STORE_PORT"] = port
results = run_ranks(train_cmd(two, "twins"), envs)
assert any(code != 0 and ("two processes were given the same rank" in text or
                          "cannot serve the rendezvous store" in text)
           for code, text in results), results
print("two processes with RANK=0: refused")

# A rank that never arrives: the rendezvous ends after the timeout.
start = time.time()
proc = subprocess.run(train_cmd(two, "alone"), env=dict(
    e2e.clean_env(), RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
    MASTER_PORT=str(e2e.free_port()), ACCRUE_RENDEZVOUS_TIMEOUT="2"),
    capture_output=True, text=True, timeout=60)
assert proc.returncode != 0 and "timed out waiting for the other ranks" in proc.stderr, \
    proc.stderr
assert time.time() - start < 20
print("a missing rank ends the rendezvous in %.1f s" % (time.time() - start))

# A rank killed mid-run: the other exits within seconds, with an error
# naming it (the ranks' connections to the store tell rank 0 which one
# closed; when rank 0 itself is killed, the store goes with it).
long_run = [e2e.tool("accrue-train"), two, "--data", DATA, "--steps", "100000000",
            "--no-progress"]
for victim in (1, 0):
    port = str(e2e.free_port())
    procs = [subprocess.Popen(long_run, env=dict(e2e.clean_env(), RANK=str(r), WORLD_SIZE="2",
                                                 LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                                                 MASTER_PORT=port),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    time.sleep(3)
    assert procs[0].poll() is None and procs[1].poll() is None
    procs[victim].kill()
    killed = time.time()
    survivor = procs[1 - victim]
    _, err = survivor.communicate(timeout=60)
    assert survivor.returncode != 0 and "rank %d exited" % victim in err, err
    assert time.time() - killed < 10, time.time() - killed
    assert len(err.strip().splitlines()) == 1, err
    procs[victim].communicate()
    print("rank %d ended %.2f s after rank %d was killed: %s" % (
        1 - victim, time.time() - killed, victim, err.strip().splitlines()[-1]))
