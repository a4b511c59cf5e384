# accrue.Session(..., process_group=pg) from Python scripts that already
# hold a torch.distributed process group (PyTorch 2.15's gloo backend,
# launched by its torchrun): the group's all-reduce is the step's
# collective and its rank and size the session's. 2 ranks at K=2 give one
# rank's parameters at K=4 (rtol 1e-5) after 5 AdamW steps with clipping,
# with one all-reduce per optimizer step; so does an artifact that shards
# its optimizer state (--shard-optimizer), whose reduce-scatter and
# all-gather are the group's reduces and broadcasts, one per shard, and one
# that shards its gradients too (--shard-gradients: a reduce-scatter per
# gradient and micro-batch, 6 gradients at K=2).
#
# REQUIRES: torch2, accrue-python
# RUN: rm -rf %t && mkdir -p %t
# RUN: env PYTHONPATH=%accrue_build/python_packages:$PYTHONPATH %latest_python %s %t

import os
import subprocess
import sys

import numpy as np

SPIRALS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                       "spirals")
FLAGS = dict(optimizer="adamw", lr=0.01, weight_decay=0.01, clip_norm=0.5)
STEPS = 5


def worker(out, name):
    import torch.distributed as dist

    import accrue
    dist.init_process_group("gloo")
    data = dict(np.load(os.path.join(SPIRALS, "data.npz")))
    session = accrue.Session(os.path.join(out, name), process_group=dist.group.WORLD)
    records = session.train(data, steps=STEPS)
    if dist.get_rank() == 0:
        np.savez(os.path.join(out, name + ".npz"), **session.parameters())
        print("all_reduces", [r["all_reduces"] for r in records])
        print("reduce_scatters", [r.get("reduce_scatters", 0) for r in records])
    dist.destroy_process_group()


if len(sys.argv) > 2 and sys.argv[2] == "worker":
    worker(sys.argv[1], sys.argv[3])
    sys.exit(0)

import accrue  # noqa: E402
import accrue_e2e as e2e  # noqa: E402

out = sys.argv[1]
model = os.path.join(SPIRALS, "model.onnx")
accrue.compile(model, os.path.join(out, "two"), micro_batch=4, accumulation_steps=2,
               data_parallel=True, **FLAGS)
accrue.compile(model, os.path.join(out, "sharded"), micro_batch=4, accumulation_steps=2,
               data_parallel=True, shard_optimizer=True, **FLAGS)
accrue.compile(model, os.path.join(out, "stage2"), micro_batch=4, accumulation_steps=2,
               data_parallel=True, shard_gradients=True, **FLAGS)
one = accrue.Session(accrue.compile(model, os.path.join(out, "one"), micro_batch=4,
                                    accumulation_steps=4, **FLAGS))
one.train(dict(np.load(os.path.join(SPIRALS, "data.npz"))), steps=STEPS)
want = one.parameters()


def launch(name):
    port = e2e.free_port()
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node",
                           "2", "--master-addr", "127.0.0.1", "--master-port", str(port),
                           os.path.abspath(__file__), out, "worker", name],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = dict(np.load(os.path.join(out, name + ".npz")))
    for param, value in want.items():
        e2e.assert_close("process group %s %s" % (name, param), got[param], value, rtol=1e-5,
                         atol=1e-7)
    return proc.stdout


stdout = launch("two")
assert "all_reduces [1, 1, 1, 1, 1]" in stdout, stdout
print("2 ranks over a torch.distributed gloo group: one rank's parameters")
stdout = launch("sharded")
assert "reduce_scatters [1, 1, 1, 1, 1]" in stdout, stdout
print("2 ranks sharding the optimizer state over the group: one rank's parameters")
stdout = launch("stage2")
assert "reduce_scatters [12, 12, 12, 12, 12]" in stdout, stdout
print("2 ranks sharding the gradients too over the group: one rank's parameters")
