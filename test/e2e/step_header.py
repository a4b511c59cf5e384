# An artifact's step.h is enough for a C host: test/StepHeader/train-step.c
# includes it (compiled here with the C compiler against the artifact),
# loads step.so, checks the fingerprint, passes the arguments in the order
# and layout the header gives and trains 3 AdamW steps of the MLP (micro-
# batch 8 x 4, clipping, a third of the labels ignored). Its parameters,
# losses and gradient norms equal accrue-train's, bit for bit. A
# data-parallel step.h compiles beside the step contract's header.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t %cc %S/../StepHeader/train-step.c

import os
import subprocess
import sys

import numpy as np

import accrue_e2e as e2e
import mlp

out, cc, source = sys.argv[1:4]
B, K, STEPS, LR = 8, 4, 3, 0.01
model = os.path.join(out, "mlp.onnx")
mlp.export(mlp.MLP(seed=2), model)
x, y = mlp.dataset(STEPS * B * K, seed=3, ignored=0.3)
data = os.path.join(out, "data.npz")
np.savez(data, x=x, y=y)
art = e2e.compile_model(model, os.path.join(out, "art"), B, accumulation_steps=K, lr=LR,
                        clip_norm=0.5)

# The parameter arena, laid out by the header's offsets.
header = open(os.path.join(art, "step.h")).read()
init = e2e.read_safetensors(os.path.join(art, "init.safetensors"))
size = int(header.split("#define ACCRUE_STEP_ARENA_SIZE ")[1].split()[0])
arena = np.zeros(size, np.float32)
for line in header.splitlines():
    if line.startswith("#define ACCRUE_PARAM_"):
        offset, name = int(line.split()[2]), line.split("/* ")[1].split()[0]
        arena[offset:offset + init[name].size] = init[name].ravel()
arena.tofile(os.path.join(out, "params.bin"))
x.tofile(os.path.join(out, "x.bin"))
y.tofile(os.path.join(out, "y.bin"))

host = os.path.join(out, "train-step")
e2e.run([cc, "-std=c11", "-Wall", "-Werror", "-I", art, source, "-o", host, "-ldl"])
proc = e2e.run([host, art] + [os.path.join(out, f) for f in ["params.bin", "x.bin", "y.bin"]]
               + [str(STEPS), str(K), str(LR), os.path.join(out, "trained.bin")])
host_log = [line.split() for line in proc.stdout.splitlines()]

log = os.path.join(out, "log.jsonl")
e2e.train(art, data, STEPS, export=os.path.join(out, "trained.onnx"), log=log)
trained = np.fromfile(os.path.join(out, "trained.bin"), np.float32)
want = e2e.initializers(os.path.join(out, "trained.onnx"))
moved = False
for line in header.splitlines():
    if line.startswith("#define ACCRUE_PARAM_"):
        offset, name = int(line.split()[2]), line.split("/* ")[1].split()[0]
        got = trained[offset:offset + want[name].size].reshape(want[name].shape)
        assert np.array_equal(got, want[name]), "%s differs from accrue-train's" % name
        moved |= not np.array_equal(got, init[name])
assert moved, "the host's steps changed nothing"
for words, record in zip(host_log, e2e.read_jsonl(log)):
    assert np.float32(words[3]) == np.float32(record["loss"]), (words, record)
    assert np.float32(words[5]) == np.float32(record["grad_norm"]), (words, record)
assert len(host_log) == STEPS

# A data-parallel artifact's step.h declares the all-reduce hook with the
# step contract's AccrueBuffer: a host may include it and
# accrue-runtime/StepABI.h together, in either order (they used to define
# the struct twice).
dp = e2e.compile_model(model, os.path.join(out, "dp"), B, data_parallel=True)
contract = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include")
for order in (["step.h", "accrue-runtime/StepABI.h"], ["accrue-runtime/StepABI.h", "step.h"]):
    both = os.path.join(out, "both_%d.c" % len(os.listdir(out)))
    with open(both, "w") as f:
        f.write("".join('#include "%s"\n' % h for h in order) +
                "void hook(AccrueBuffer *b) { %s(b); }\n"
                "AccrueAllReduceFn fn = %s;\n" % ("_mlir_ciface_accrue_all_reduce",
                                                    "_mlir_ciface_accrue_all_reduce"))
    e2e.run([cc, "-std=c11", "-Wall", "-Werror", "-fsyntax-only", "-I", dp, "-I", contract,
             both])
print("ok")
