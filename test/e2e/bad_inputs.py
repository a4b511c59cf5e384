# Bad input, case by case: malformed and hostile models, data, checkpoints,
# artifacts, flags and environments. Every case must end with a non-zero
# exit status (not a signal), exactly one line on stderr that says what is
# wrong and names it (the node, tensor, array, file or flag), no crash
# signature, and nothing half-written (no artifact directory, no temporary
# leftovers, no partial checkpoint or export).
#
# REQUIRES: mpi
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import accrue_e2e as e2e

out = os.path.abspath(sys.argv[1])
CRASH = ("Stack dump", "Segmentation", "Aborted", "terminate called", "Sanitizer",
         "PLEASE submit", "core dumped", "Traceback")
cases = 0


def check(name, cmd, expect, absent=(), env=None, timeout=120, stdin=None, ranks=1):
    """Runs `cmd` and checks the rules above; `absent`: paths that must not
    exist afterwards; under mpirun each of `ranks` ranks may say it once."""
    global cases
    cases += 1
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **(env or {})),
                          stdin=stdin)
    err = proc.stderr
    lines = [line for line in err.splitlines() if line.strip()]
    if ranks > 1:  # mpirun's own report of the failed ranks
        lines = [line for line in lines if line.startswith("accrue-")]
    problems = []
    if not 1 <= proc.returncode <= 125:
        problems.append("exit status %d" % proc.returncode)
    errors = [line for line in lines if "error" in line]
    if not 1 <= len(lines) <= ranks or len(errors) != len(lines) or len(set(errors)) != 1:
        problems.append("stderr is not one error line")
    if any(sig in err for sig in CRASH):
        problems.append("crash signature")
    if expect not in err:
        problems.append("expected %r" % expect)
    for path in absent:
        if os.path.exists(path):
            problems.append("%s was written" % path)
    parent = os.path.dirname(str(absent[0])) if absent else None
    if parent and os.path.isdir(parent):
        leftovers = [n for n in os.listdir(parent) if ".tmp-" in n or n.endswith(".tmp")]
        if leftovers:
            problems.append("leftovers %s" % leftovers)
    if problems:
        sys.exit("case %d (%s): %s\n$ %s\n%s%s" % (cases, name, "; ".join(problems),
                                                    " ".join(map(str, cmd)), proc.stdout, err))
    print("ok %2d %-44s %s" % (cases, name, lines[0][:110]))


def compile_cmd(model, output, *flags):
    return [e2e.tool("accrue-compile"), model, "--micro-batch", "2", "-o", output] + list(flags)


def graph(nodes, inputs, outputs, initializers=(), opset=13, names=None):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def save(model, name):
    path = os.path.join(out, name)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


X = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
LOSS = helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])
W = numpy_helper.from_array(np.ones((3, 3), np.float32), "w")


def mlp(w=W, extra_nodes=(), extra_inits=()):
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="matmul"),
             helper.make_node("ReduceMean", ["h"], ["loss"], keepdims=0, name="mean")]
    return graph(list(extra_nodes) + nodes, [X], [LOSS], [w] + list(extra_inits))


good = save(mlp(), "good.onnx")
art = os.path.join(out, "art")
e2e.run(compile_cmd(good, art))
data = os.path.join(out, "good.npz")
np.savez(data, x=np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32))
train = [e2e.tool("accrue-train"), art, "--no-progress"]
no_out = os.path.join(out, "o")

# --- Models -----------------------------------------------------------------
blob = open(good, "rb").read()
for name, content, expect in [
        ("truncated protobuf", blob[: len(blob) // 2], "ONNX model"),
        ("random bytes", bytes(range(256)) * 4, "ONNX model"),
        ("empty file", b"", "ONNX model"),
        ("text file", b"this is not a model\n", "ONNX model")]:
    path = os.path.join(out, name.replace(" ", "_") + ".onnx")
    open(path, "wb").write(content)
    check("model: " + name, compile_cmd(path, no_out), expect, [no_out])
check("model: missing file", compile_cmd(os.path.join(out, "nothing.onnx"), no_out),
      "No such file", [no_out])

cycle = graph([helper.make_node("Relu", ["b"], ["a"], name="first"),
               helper.make_node("Relu", ["a"], ["b"], name="second"),
               helper.make_node("ReduceMean", ["b"], ["loss"], keepdims=0, name="mean")],
              [X], [LOSS])
check("graph: cycle", compile_cmd(save(cycle, "cycle.onnx"), no_out), "'first'", [no_out])
dangling = graph([helper.make_node("Relu", ["nowhere"], ["a"], name="dangling"),
                  helper.make_node("ReduceMean", ["a"], ["loss"], keepdims=0, name="mean")],
                 [X], [LOSS])
check("graph: dangling input name", compile_cmd(save(dangling, "dangling.onnx"), no_out),
      "nowhere", [no_out])
twice = graph([helper.make_node("Relu", ["x"], ["a"], name="one"),
               helper.make_node("Sigmoid", ["x"], ["a"], name="two"),
               helper.make_node("ReduceMean", ["a"], ["loss"], keepdims=0, name="mean")],
              [X], [LOSS])
check("graph: one name produced twice", compile_cmd(save(twice, "twice.onnx"), no_out),
      "'a'", [no_out])
dup_init = mlp(extra_inits=[numpy_helper.from_array(np.zeros((3, 3), np.float32), "w")])
check("graph: duplicate initializer", compile_cmd(save(dup_init, "dup_init.onnx"), no_out),
      "'w'", [no_out])
no_loss = graph([helper.make_node("Relu", ["x"], ["a"], name="relu")], [X],
                [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 3])])
check("graph: no scalar output", compile_cmd(save(no_loss, "no_loss.onnx"), no_out),
      "loss", [no_out])

# Absurd dimensions: a declared initializer of 2^40 elements (its data is
# not there), a negative and a zero dimension, an input 2^62 wide.
huge = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 20, 1 << 20])
check("dims: 2^40-element initializer", compile_cmd(save(mlp(w=huge), "huge.onnx"), no_out),
      "'w'", [no_out])
negative = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[3, -3])
check("dims: negative", compile_cmd(save(mlp(w=negative), "negative.onnx"), no_out),
      "'w'", [no_out])
zero = numpy_helper.from_array(np.ones((3, 0), np.float32), "w")
check("dims: zero", compile_cmd(save(mlp(w=zero), "zero.onnx"), no_out), "'w'", [no_out])
scale = numpy_helper.from_array(np.ones((1,), np.float32), "s")
wide = graph([helper.make_node("Mul", ["x", "s"], ["m"], name="scale"),
              helper.make_node("ReduceMean", ["m"], ["loss"], keepdims=0, name="mean")],
             [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1 << 62])], [LOSS],
             [scale])
check("dims: 2^62-wide input", compile_cmd(save(wide, "wide.onnx"), no_out), "'x'", [no_out])
shape = numpy_helper.from_array(np.array([1 << 40, 1 << 40], np.int64), "shape")
overflow = graph([helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
                  helper.make_node("ReduceMean", ["r"], ["loss"], keepdims=0, name="mean")],
                 [X], [LOSS], [shape])
check("dims: reshape beyond int64", compile_cmd(save(overflow, "overflow.onnx"), no_out),
      "'reshape'", [no_out])
expand = numpy_helper.from_array(np.array([1 << 32, 1 << 32, 3], np.int64), "shape")
big = graph([helper.make_node("Expand", ["x", "shape"], ["r"], name="expand"),
             helper.make_node("ReduceMean", ["r"], ["loss"], keepdims=0, name="mean")],
            [X], [LOSS], [expand])
check("dims: expand to 2^64 elements", compile_cmd(save(big, "expand.onnx"), no_out),
      "'expand'", [no_out])

# (An opset newer than Accrue knows is a warning, by design: its operators
# import with the newest semantics Accrue has.)
gelu13 = graph([helper.make_node("Gelu", ["x"], ["a"], name="gelu"),
                helper.make_node("ReduceMean", ["a"], ["loss"], keepdims=0, name="mean")],
               [X], [LOSS], opset=13)
check("opset: operator newer than the model's opset",
      compile_cmd(save(gelu13, "gelu13.onnx"), no_out), "'gelu'", [no_out])
custom = graph([helper.make_node("FusedGemm", ["x", "w"], ["a"], name="fused",
                                 domain="com.microsoft"),
                helper.make_node("ReduceMean", ["a"], ["loss"], keepdims=0, name="mean")],
               [X], [LOSS], [W])
custom.opset_import.append(helper.make_opsetid("com.microsoft", 1))
check("opset: another domain's operator", compile_cmd(save(custom, "custom.onnx"), no_out),
      "'fused'", [no_out])
det = graph([helper.make_node("Det", ["x"], ["a"], name="det"),
             helper.make_node("ReduceMean", ["a"], ["loss"], keepdims=0, name="mean")],
            [X], [LOSS])
check("op: unsupported", compile_cmd(save(det, "det.onnx"), no_out), "'det'",
      [no_out])
for value, label in [(np.nan, "NaN"), (np.inf, "infinity")]:
    w = np.ones((3, 3), np.float32)
    w[1, 2] = value
    check("initializer: " + label,
          compile_cmd(save(mlp(w=numpy_helper.from_array(w, "w")), label + ".onnx"), no_out),
          "'w'", [no_out])

# External data outside the model's folder, and broken.
secret = os.path.join(out, "secret.bin")
open(secret, "wb").write(struct.pack("<9f", *range(9)))
folder = os.path.join(out, "ext")
os.makedirs(folder)
os.symlink(secret, os.path.join(folder, "link.bin"))
open(os.path.join(folder, "short.bin"), "wb").write(b"\0" * 8)
for name, location, extra in [("absolute path", secret, {}), ("'..' component", "../secret.bin", {}),
                              ("symlink leaving the folder", "link.bin", {}),
                              ("offset past the end", "short.bin", {"offset": "4096"}),
                              ("missing file", "gone.bin", {})]:
    tensor = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[3, 3],
                         data_location=TensorProto.EXTERNAL)
    for key, value in dict({"location": location}, **extra).items():
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    path = os.path.join(folder, "m_%d.onnx" % cases)
    open(path, "wb").write(mlp(w=tensor).SerializeToString())
    check("external data: " + name, compile_cmd(path, no_out), "'w'", [no_out])

# Flags.
check("flag: micro-batch 0", compile_cmd(good, no_out)[:-2] + ["-o", no_out, "--micro-batch", "0"],
      "--micro-batch", [no_out])
check("flag: unknown optimizer", compile_cmd(good, no_out, "--optimizer", "adamz"),
      "--optimizer", [no_out])
check("flag: lr not a number", compile_cmd(good, no_out, "--lr", "fast"), "--lr", [no_out])
check("flag: bad loss scale", compile_cmd(good, no_out, "--loss-scale", "dynamic:init=x"),
      "--loss-scale", [no_out])
ro = os.path.join(out, "readonly")
os.makedirs(ro)
os.chmod(ro, 0o555)
if os.geteuid() != 0:  # root writes anyway
    check("output: read-only folder", compile_cmd(good, os.path.join(ro, "art")),
          "readonly", [os.path.join(ro, "art")])
check("output: a file where the folder goes",
      compile_cmd(good, os.path.join(good, "art")), "good.onnx", [])

# --- Data ---------------------------------------------------------------------
def npz(name, members):
    """A .npz from raw members {name: bytes}."""
    path = os.path.join(out, name)
    with zipfile.ZipFile(path, "w") as z:
        for member, content in members.items():
            z.writestr(member, content)
    return path


def npy(array, fortran=False, header_extra=None):
    import io
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.asfortranarray(array) if fortran else array,
                              allow_pickle=True)
    return buffer.getvalue()


x = np.random.default_rng(1).standard_normal((8, 3)).astype(np.float32)
pickled = npz("pickled.npz", {"x.npy": npy(np.array([{"a": 1}] * 8, dtype=object))})
check("data: pickled object array", train + ["--data", pickled], "x", [])
fortran = npz("fortran.npz", {"x.npy": npy(np.ascontiguousarray(x.T).T.copy(order="F"),
                                           fortran=True)})
proc = subprocess.run(train + ["--data", fortran, "--steps", "1"], capture_output=True, text=True)
if proc.returncode != 0:  # refused is fine too, if said properly
    check("data: Fortran order", train + ["--data", fortran], "x", [])
else:
    cases += 1
    print("ok %2d %-44s %s" % (cases, "data: Fortran order (read transposed right)", "trained"))
strings = npz("strings.npz", {"x.npy": npy(np.array(["a"] * 24).reshape(8, 3))})
check("data: string dtype", train + ["--data", strings], "'x.npy'", [])
check("data: wrong shape", train + ["--data", npz("shape.npz", {"x.npy": npy(x[:, :2])})],
      "'x'", [])
check("data: missing array", train + ["--data", npz("empty.npz", {"y.npy": npy(x)})], "'x'", [])
member = npy(x)
check("data: truncated member", train + ["--data", npz("trunc.npz", {"x.npy": member[:100]})],
      "x", [])
# A zip bomb: a member that inflates to far more than the file holds.
bomb = os.path.join(out, "bomb.npz")
with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as z:
    header = npy(np.zeros((1 << 28, 3), np.float32)[:0])  # a valid header...
    z.writestr("x.npy", b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, "
               b"'shape': (1099511627776, 3), }" + b" " * 54 + b"\n" + b"\0" * (64 << 20))
check("data: zip bomb", train + ["--data", bomb], "x", [])
check("data: not a zip", train + ["--data", good], "good.onnx", [])
nan = x.copy()
nan[4, 1] = np.nan
check("data: NaN", train + ["--data", npz("nan.npz", {"x.npy": npy(nan)})], "NaN", [])

# --- Checkpoints ----------------------------------------------------------------
ck = os.path.join(out, "ck")
e2e.run(train + ["--data", data, "--steps", "2", "--checkpoint-dir", ck])
latest = os.path.join(ck, sorted(os.listdir(ck))[-1])
content = open(latest, "rb").read()
resume = train + ["--data", data, "--steps", "4", "--checkpoint-dir", ck, "--resume"]
open(latest, "wb").write(content[: len(content) // 3])
check("checkpoint: truncated", resume, "checkpoint", [])
flipped = bytearray(content)
flipped[-5] ^= 1
open(latest, "wb").write(bytes(flipped))
check("checkpoint: a flipped bit", resume, "corrupt", [])
open(latest, "wb").write(content)
check("checkpoint: other settings", resume + ["--lr", "0.5"], "--lr", [])
sgd = os.path.join(out, "sgd")
e2e.run(compile_cmd(good, sgd, "--optimizer", "sgd"))
check("checkpoint: another optimizer", [e2e.tool("accrue-train"), sgd, "--data", data,
      "--steps", "4", "--checkpoint-dir", ck, "--resume", "--no-progress"], "optimizer", [])
other_w = numpy_helper.from_array(np.ones((3, 5), np.float32), "w")
other = os.path.join(out, "other")
e2e.run(compile_cmd(save(mlp(w=other_w), "other.onnx"), other))
check("checkpoint: another model", [e2e.tool("accrue-train"), other, "--data", data,
      "--steps", "4", "--checkpoint-dir", ck, "--resume", "--no-progress"], "'w'", [])

# --- Artifacts ----------------------------------------------------------------
mixed = os.path.join(out, "mixed")
shutil.copytree(art, mixed)
shutil.copy(os.path.join(other, "step.so"), os.path.join(mixed, "step.so"))
check("artifact: step.so of another compile", [e2e.tool("accrue-train"), mixed, "--data", data],
      "mixed up or edited", [])
tampered = os.path.join(out, "tampered")
shutil.copytree(art, tampered)
manifest = json.load(open(os.path.join(tampered, "step.json")))
manifest["micro_batch"] = 4
json.dump(manifest, open(os.path.join(tampered, "step.json"), "w"))
check("artifact: edited manifest", [e2e.tool("accrue-train"), tampered, "--data", data],
      "mixed up or edited", [])
broken = os.path.join(out, "broken")
shutil.copytree(art, broken)
open(os.path.join(broken, "step.json"), "w").write("{\"format\": ")
check("artifact: manifest not JSON", [e2e.tool("accrue-train"), broken, "--data", data],
      "step.json", [])
nolib = os.path.join(out, "nolib")
shutil.copytree(art, nolib)
os.remove(os.path.join(nolib, "step.so"))
check("artifact: no step.so", [e2e.tool("accrue-train"), nolib, "--data", data], "step.so", [])

# A damaged file beside an intact step.json: a truncated step.so used to
# kill accrue-train with SIGBUS inside dlopen, before any check.
def damaged(name, file, mutate):
    folder = os.path.join(out, name)
    shutil.copytree(art, folder)
    path = os.path.join(folder, file)
    content = open(path, "rb").read()
    open(path, "wb").write(mutate(content))
    return folder


def flip(content):
    flipped = bytearray(content)
    flipped[len(flipped) // 2] ^= 0x10
    return bytes(flipped)


for file in ["step.so", "init.safetensors"]:
    for how, mutate, expect in [("truncated", lambda b: b[: len(b) // 2], "bytes"),
                                ("a flipped bit in", flip, "CRC-32")]:
        folder = damaged("%s_%s" % (how.split()[0], file.split(".")[0]), file, mutate)
        check("artifact: %s %s" % (how, file),
              [e2e.tool("accrue-train"), folder, "--data", data, "--no-progress"],
              "%s' is not the file accrue-compile wrote (" % file, [])
        lines = subprocess.run([e2e.tool("accrue-train"), folder, "--data", data],
                               capture_output=True, text=True).stderr
        assert expect in lines, lines
# The model an export reads after the run: refused before the run.
folder = damaged("truncated_model", "model.onnx", lambda b: b[:-7])
exported = os.path.join(out, "never.onnx")
check("artifact: truncated model.onnx (export)",
      train[:1] + [folder] + train[2:] + ["--data", data, "--export", exported],
      "model.onnx' is not the file", [exported])

# --- Data that the step cannot check itself -----------------------------------
# Token ids outside an embedding's table used to read and train row 0 (the
# gather clamps); labels outside a cross-entropy's classes stopped later on
# a NaN loss without naming the array.
table = numpy_helper.from_array(np.ones((5, 3), np.float32), "table")
ids_model = graph(
    [helper.make_node("Gather", ["table", "ids"], ["e"], name="embed"),
     helper.make_node("ReduceMean", ["e"], ["m"], keepdims=0, name="mean"),
     helper.make_node("Transpose", ["e"], ["s"], perm=[0, 2, 1], name="scores"),
     helper.make_node("SoftmaxCrossEntropyLoss", ["s", "y"], ["c"], ignore_index=-100,
                      name="xent"),
     helper.make_node("Add", ["m", "c"], ["loss"], name="total")],
    [helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", 4]),
     helper.make_tensor_value_info("y", TensorProto.INT64, ["N", 4])], [LOSS], [table])
ids_art = os.path.join(out, "ids_art")
e2e.run(compile_cmd(save(ids_model, "ids.onnx"), ids_art))
rng = np.random.default_rng(2)
ids = rng.integers(-5, 5, (8, 4))
labels = rng.integers(0, 3, (8, 4))
labels[1, 2] = -100  # ignored: accepted
ok_data = os.path.join(out, "ids_ok.npz")
np.savez(ok_data, ids=ids, y=labels)
e2e.run([e2e.tool("accrue-train"), ids_art, "--data", ok_data, "--steps", "2", "--no-progress"])
bad_ids = ids.copy()
bad_ids[6, 1] = 5
bad_ids_data = os.path.join(out, "bad_ids.npz")
np.savez(bad_ids_data, ids=bad_ids, y=labels)
check("data: token id past the vocabulary",
      [e2e.tool("accrue-train"), ids_art, "--data", bad_ids_data, "--no-progress"],
      "array 'ids' holds 5 at sample 6, outside [-5, 5): the values index the 5 rows of "
      "Gather node 'embed'", [])
bad_ids[6, 1] = -6
np.savez(bad_ids_data, ids=bad_ids, y=labels)
check("data: negative token id past the table",
      [e2e.tool("accrue-train"), ids_art, "--data", bad_ids_data, "--no-progress"],
      "array 'ids' holds -6 at sample 6", [])
for value in [3, -1]:
    bad_labels = labels.copy()
    bad_labels[7, 0] = value
    path = os.path.join(out, "bad_labels_%d.npz" % value)
    np.savez(path, ids=ids, y=bad_labels)
    check("data: label %d of 3 classes" % value,
          [e2e.tool("accrue-train"), ids_art, "--data", path, "--no-progress"],
          "array 'y' holds %d at sample 7, outside [0, 3): the values index the 3 classes of "
          "SoftmaxCrossEntropyLoss node 'xent' (or equal its ignore_index -100)" % value, [])

# --- One run per checkpoint folder --------------------------------------------
# Two runs into one folder both used to exit 0, overwriting each other's
# checkpoints (and the second deleted the first's temporary file at start).
shared = os.path.join(out, "shared_ck")
first_log = os.path.join(out, "first.jsonl")
first = subprocess.Popen(train + ["--data", data, "--steps", "100000000", "--checkpoint-dir",
                                  shared, "--checkpoint-every", "1", "--log", first_log],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
try:
    deadline = time.time() + 60
    while time.time() < deadline and not (os.path.exists(first_log) and
                                          os.path.getsize(first_log) > 200):
        time.sleep(0.01)
    assert first.poll() is None, first.stderr.read()
    before = set(os.listdir(shared))
    check("checkpoint dir: a second run into it",
          train + ["--data", data, "--steps", "3", "--checkpoint-dir", shared],
          "'%s' is in use by another run (process %d on host " % (shared, first.pid), [])
    check("checkpoint dir: a second run resuming from it",
          train + ["--data", data, "--steps", "3", "--checkpoint-dir", shared, "--resume"],
          "--checkpoint-dir '%s' is in use" % shared, [])
    assert first.poll() is None, "the first run stopped"
    # The lock of a run that died is taken over at once.
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
finally:
    if first.poll() is None:
        first.kill()
steps_done = len(open(first_log).read().splitlines())
resumed = subprocess.run(train + ["--data", data, "--steps", str(steps_done + 2),
                                  "--checkpoint-dir", shared, "--resume"],
                         capture_output=True, text=True)
assert resumed.returncode == 0 and "resumed from" in resumed.stdout, resumed.stderr
cases += 1
print("ok %2d %-44s %s" % (cases, "checkpoint dir: a dead run's lock is taken over",
                           resumed.stdout.splitlines()[0][:80]))

# --- Environment ---------------------------------------------------------------
exported = os.path.join(out, "full", "trained.onnx")
os.makedirs(os.path.dirname(exported))
check("output: file size limit (export)",
      ["bash", "-c", 'ulimit -f 0 && exec "$@"', "accrue-train"] + train +
      ["--data", data, "--steps", "1", "--export", exported], "trained.onnx", [exported])
full_ck = os.path.join(out, "full_ck")
check("output: file size limit (checkpoint)",
      ["bash", "-c", 'ulimit -f 0 && exec "$@"', "accrue-train"] + train +
      ["--data", data, "--steps", "1", "--checkpoint-dir", full_ck], "full_ck", [])
assert not [n for n in os.listdir(full_ck) if n.endswith(".safetensors")], \
    "a partial checkpoint was left"
dp = os.path.join(out, "dp")
e2e.run(compile_cmd(good, dp, "--data-parallel"))
mpirun = [os.environ.get("ACCRUE_MPIRUN", "mpirun"), "--oversubscribe", "-np", "2"]
check("mpi: library missing", mpirun + ["-x", "ACCRUE_MPI_LIBRARY=/nonexistent/libmpi.so",
      e2e.tool("accrue-train"), dp, "--data", data, "--no-progress"], "MPI", [], ranks=2)
# A rank that dies mid-run: the other ends within seconds (no hang in the
# collective), and the run fails naming the rank.
log = os.path.join(out, "dies.jsonl")
proc = subprocess.Popen(mpirun + [e2e.tool("accrue-train"), dp, "--data", data, "--no-progress",
                                  "--steps", "100000000", "--log", log],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    deadline = time.time() + 60
    while time.time() < deadline and not (os.path.exists(log) and os.path.getsize(log) > 1000):
        time.sleep(0.01)
    # The ranks are mpirun's children.
    ranks = subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "accrue-train"],
                           capture_output=True, text=True).stdout.split()
    assert len(ranks) == 2, ranks
    os.kill(int(ranks[-1]), signal.SIGKILL)
    killed = time.time()
    _, err = proc.communicate(timeout=60)
    elapsed = time.time() - killed
finally:
    if proc.poll() is None:
        subprocess.run(["pkill", "-9", "-P", str(proc.pid)])
        proc.kill()
cases += 1
assert proc.returncode != 0 and elapsed < 30, (proc.returncode, elapsed, err)
assert "rank" in err and not any(sig in err for sig in CRASH[:2]), err
print("ok %2d %-44s ended %.1f s after the kill" % (cases, "mpi: a rank dies mid-run", elapsed))

print("%d bad-input cases: all refused cleanly" % cases)
assert cases >= 40, cases
