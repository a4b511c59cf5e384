# Activation recomputation (accrue-compile --recompute): with `auto` the
# backward recomputes the segments between the forward's cuts, with a regex
# the ops of the ONNX nodes it names. Parameters, gradients and the logged
# loss and gradient norm after 3 AdamW steps are bitwise identical to the
# run without recomputation on the CPU, for an MLP, a CNN and a GPT with
# Dropout (its mask is a hash of its position, so it recomputes the same).
# An MLP is a chain, every layer output a cut, so `auto` keeps them all
# (and says so); the regexes recompute activations, pooling and a
# convolution. `auto` plans the GPT's activations at a fraction of none's,
# and under a memory budget fits a larger micro-batch than without.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import json
import os
import re
import sys

import numpy as np

import accrue_e2e as e2e
import zoo

out = sys.argv[1]
rng = np.random.default_rng(4)
MODELS = {
    "mlp": (zoo.MSEMLP(0), zoo.MSEMLP.data(48, rng)),
    "cnn": (zoo.CNN(1), zoo.CNN.data(48, rng)),
}
gpt = zoo.GPT(3, vocab=64, d=32, heads=2, layers=3, block=16, dropout=0.1)
MODELS["gpt"] = (gpt, gpt.data(48, rng))
REGEX = {
    "mlp": "/Sigmoid|/Sub",
    "cnn": "/Relu(_1)?|/MaxPool|/conv1/Conv",
    # The attention's softmax and the MLP's GELU pieces of every block.
    "gpt": r"/blocks\.[0-9]+/(Softmax|mlp/.*|Div.*|Mul.*|Erf|Add_[0-9]+)",
}


def recomputed(name, recompute):
    """What accrue-compile says it recomputed."""
    proc = e2e.run([e2e.tool("accrue-compile"), os.path.join(out, name + ".onnx"), "-o",
                    os.path.join(out, "said"), "--micro-batch", "4", "--recompute", recompute,
                    "--emit", "linalg"])
    return proc.stderr


def run(name, recompute):
    model, data = MODELS[name]
    path = os.path.join(out, name + ".onnx")
    npz = os.path.join(out, name + ".npz")
    if not os.path.exists(path):
        zoo.export(model, data, path, 17)
        np.savez(npz, **data)
    tag = "%s_%s" % (name, "regex" if recompute == REGEX[name] else recompute)
    art = e2e.compile_model(path, os.path.join(out, tag), 4, accumulation_steps=2,
                            optimizer="adamw", lr=0.01, clip_norm=1.0, recompute=recompute)
    trained, grads, log = (os.path.join(out, tag + ext) for ext in (".onnx", ".grads.npz", ".jsonl"))
    e2e.train(art, npz, 3, export=trained, log=log, extra=["--save-gradients", grads])
    with open(os.path.join(art, "step.json")) as f:
        activation = json.load(f)["activation_bytes"]
    return (e2e.initializers(trained), dict(np.load(grads)), e2e.read_jsonl(log), activation)


def bitwise(got, want, what):
    params, grads, log, _ = got
    ref_params, ref_grads, ref_log, _ = want
    for name, value in ref_params.items():
        assert np.array_equal(params[name], value), "%s: parameter %s differs" % (what, name)
    assert ref_grads and grads.keys() == ref_grads.keys(), what
    for name, value in ref_grads.items():
        assert np.array_equal(grads[name], value), "%s: gradient %s differs" % (what, name)
    for a, b in zip(log, ref_log):
        assert a["loss"] == b["loss"] and a["grad_norm"] == b["grad_norm"], (what, a, b)


for name in MODELS:
    none = run(name, "none")
    auto = run(name, "auto")
    bitwise(auto, none, name + " --recompute auto")
    regex = run(name, REGEX[name])
    bitwise(regex, none, name + " --recompute REGEX")
    said = recomputed(name, REGEX[name])
    assert re.search(r"remark: recomputing [1-9][0-9]* op\(s\) in the backward", said), said
    if name == "mlp":
        assert "nothing to recompute: every activation" in recomputed(name, "auto"), name
    print("%s: activation bytes %d (none), %d (auto), %d (regex)"
          % (name, none[3], auto[3], regex[3]))
    # auto recomputes only between cuts: it never plans more than none.
    # (The test CNN, two convolutions, has no recomputation that lowers its
    # peak: auto keeps all of it, and the regex's clones raise it.)
    assert auto[3] <= none[3], (name, auto[3], none[3])
    if name == "gpt":
        assert auto[3] < 0.7 * none[3], (auto[3], none[3])
        assert regex[3] < none[3], (regex[3], none[3])

# Under a memory budget `auto` recomputes only when that fits a larger
# micro-batch: at the budget b = 8 needs without recomputation, it does.
gpt_onnx = os.path.join(out, "gpt.onnx")


def budget_choice(budget, recompute):
    art = os.path.join(out, "budget_%s" % recompute)
    proc = e2e.run([e2e.tool("accrue-compile"), gpt_onnx, "-o", art, "--memory-budget",
                    str(budget), "--effective-batch", "32", "--recompute", recompute])
    with open(os.path.join(art, "step.json")) as f:
        return json.load(f)["micro_batch"], proc.stderr


plan_art = os.path.join(out, "plan8")
e2e.run([e2e.tool("accrue-compile"), gpt_onnx, "-o", plan_art, "--micro-batch", "8",
         "--accumulation-steps", "4", "--plan=json"])
with open(os.path.join(plan_art, "step.json")) as f:
    budget = json.load(f)["memory_plan"]["peak_bytes"]
b_none, _ = budget_choice(budget, "none")
b_auto, said = budget_choice(budget, "auto")
assert 6 <= b_none <= 8 and b_auto > b_none, (b_none, b_auto, said)
assert re.search(r"recomputing the segments between the forward's cuts \(without: "
                 r"micro-batch %d\)" % b_none, said), said
print("budget %d: micro-batch %d without recomputation, %d with" % (budget, b_none, b_auto))

# A regex that is not one is refused, naming the flag.
proc = e2e.run([e2e.tool("accrue-compile"), os.path.join(out, "mlp.onnx"), "-o",
                os.path.join(out, "bad"), "--micro-batch", "4", "--recompute", "("],
               expect_ok=False)
assert proc.returncode != 0 and "--recompute must be none, auto or a regex" in proc.stderr, \
    proc.stderr
print("ok")
