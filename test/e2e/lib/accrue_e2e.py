"""Helpers for the end-to-end tests: run the tools, read their outputs."""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

TOOLS = os.environ.get("ACCRUE_TOOLS", "")


def tool(name):
    return os.path.join(TOOLS, name) if TOOLS else name


def run(cmd, expect_ok=True, timeout=600):
    """Runs a command; on unexpected failure or a hang (a collective that
    some rank never joins), prints its output and exits."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        text = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        sys.stderr.write("command timed out after %d s: %s\n%s%s" % (
            timeout, " ".join(cmd), text(e.stdout), text(e.stderr)))
        sys.exit(1)
    if expect_ok and proc.returncode != 0:
        sys.stderr.write("command failed: %s\n%s%s" % (" ".join(cmd), proc.stdout, proc.stderr))
        sys.exit(1)
    return proc


def compile_model(model, out, micro_batch, **flags):
    """accrue-compile MODEL -o OUT --micro-batch B --flag value ..."""
    cmd = [tool("accrue-compile"), model, "-o", out, "--micro-batch", str(micro_batch)]
    for key, value in flags.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            cmd.append(flag)
        elif value is not None and value is not False:
            cmd += [flag, str(value)]
    run(cmd)
    return out


def train(artifact, data, steps, export=None, log=None, extra=()):
    """accrue-train ARTIFACT --data DATA [--steps N] ...; steps=None: one pass."""
    cmd = [tool("accrue-train"), artifact, "--data", data, "--no-progress"]
    if steps is not None:
        cmd += ["--steps", str(steps)]
    if export:
        cmd += ["--export", export]
    if log:
        cmd += ["--log", log]
    cmd += list(extra)
    return run(cmd)


def initializers(path):
    """name -> numpy array of every initializer of an ONNX model."""
    model = onnx.load(path)
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def grad_scaler_scales(skipped, init=65536.0, growth=2.0, backoff=0.5, interval=2000):
    """The loss scale of each step by torch.cuda.amp.GradScaler's update rule
    (torch.amp's _amp_update_scale_), given which steps overflowed: an
    overflow multiplies the scale by `backoff` and resets the count of
    finite steps; `interval` finite steps in a row multiply it by `growth`."""
    scale, finite, scales = init, 0, []
    for overflow in skipped:
        scales.append(scale)
        if overflow:
            scale, finite = scale * backoff, 0
        else:
            finite += 1
            if finite == interval:
                scale, finite = scale * growth, 0
    return scales


def read_safetensors(path):
    """name -> numpy array of a safetensors file (checkpoints)."""
    dtypes = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32,
              "F16": np.float16, "U8": np.uint8}
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        body = f.read()
    arrays = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        arrays[name] = np.frombuffer(body[begin:end], dtypes[info["dtype"]]).reshape(
            info["shape"])
    return arrays


def read_jsonl(path, keep_time=False):
    """The records of a metrics log; without the wall-clock fields (time_ms)
    unless keep_time, so that runs compare by what they computed."""
    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    if not keep_time:
        for r in records:
            r.pop("time_ms", None)
    return records


def assert_close(name, actual, expected, rtol, atol):
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if actual.shape != expected.shape:
        raise AssertionError("%s: shape %s != %s" % (name, actual.shape, expected.shape))
    err = np.abs(actual - expected)
    bound = atol + rtol * np.abs(expected)
    if not np.all(err <= bound):
        i = np.unravel_index(np.argmax(err - bound), err.shape)
        raise AssertionError(
            "%s: mismatch at %s: got %.9g, expected %.9g (|diff| %.3g > %.3g); max |diff| %.3g"
            % (name, i, actual[i], expected[i], err[i], bound[i], err.max()))
    print("%s: ok (max |diff| %.3g)" % (name, err.max()))


def free_port():
    """A TCP port free on localhost now (for a rendezvous)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_NODELIST",
                    "SLURM_STEP_NODELIST", "SLURM_JOB_ID", "ACCRUE_LAUNCHER")


def clean_env():
    """This environment without a launcher's variables (torchrun's, srun's)."""
    return {k: v for k, v in os.environ.items() if k not in LAUNCH_VARIABLES}


def gloo_ranks(cmd, ranks, timeout=120, env=None):
    """Runs `cmd` as the `ranks` processes of a torchrun-style launch on
    this host (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT;
    Accrue's collectives then go through Gloo): [(exit code, stdout +
    stderr)] in rank order."""
    port = str(free_port())
    base = dict(env if env is not None else clean_env())
    procs = [subprocess.Popen(cmd, env=dict(base, RANK=str(r), WORLD_SIZE=str(ranks),
                                            LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                                            MASTER_PORT=port),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(ranks)]
    results = []
    for p in procs:
        o, e = p.communicate(timeout=timeout)
        results.append((p.returncode, o + e))
    return results
