#!/usr/bin/env python3
"""Writes the seed inputs of a fuzz target (scripts/fuzz) into a folder.

    fuzz_seeds.py TARGET OUT_DIR TOOLS_DIR

onnx-import: ONNX's backend node-test models (Debian's libonnx-testdata),
the example and PyTorch exports of the test models (MLP, CNN, GPT with
masked tokens and Dropout), and a model with a training algorithm;
npz: numpy's own files of every dtype the reader takes and some it refuses
(object arrays, Fortran order, compressed members, 0-d and empty arrays);
safetensors: the initial parameters and checkpoints of compiled artifacts
(AdamW, SGD with momentum, fp16 with dynamic loss scaling);
manifest: the step.json of artifacts compiled with many settings."""
import glob
import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "test", "e2e", "models")]


def artifacts(tools, work):
    """Compiles the spirals example with several settings and trains each a
    few steps with checkpoints; yields the artifact folders."""
    model = os.path.join(ROOT, "examples", "spirals", "model.onnx")
    data = os.path.join(ROOT, "examples", "spirals", "data.npz")
    settings = {
        "adamw": ["--accumulation-steps", "2", "--clip-norm", "1"],
        "sgd": ["--optimizer", "sgd", "--momentum", "0.9", "--nesterov"],
        "fp16": ["--precision", "fp16", "--loss-scale", "dynamic"],
        "bf16": ["--precision", "bf16", "--optimizer", "adam"],
        "grads": ["--optimizer", "none"],
        "dp": ["--data-parallel", "--accumulation-steps", "4"],
        "k3": ["--accumulation-steps", "3"],
    }
    for name, flags in settings.items():
        art = os.path.join(work, name)
        subprocess.run([os.path.join(tools, "accrue-compile"), model, "-o", art,
                        "--micro-batch", "16"] + flags, check=True, capture_output=True)
        if name not in ("dp",):
            subprocess.run([os.path.join(tools, "accrue-train"), art, "--data", data,
                            "--steps", "2", "--no-progress", "--checkpoint-dir",
                            os.path.join(art, "ckpt"), "--checkpoint-every", "1"],
                           check=True, capture_output=True)
        yield name, art


def onnx_seeds(out, tools, work):
    count = 0
    for path in sorted(glob.glob("/usr/share/libonnx-testdata/data/node/*/model.onnx")):
        shutil.copy(path, os.path.join(out, os.path.basename(os.path.dirname(path)) + ".onnx"))
        count += 1
    shutil.copy(os.path.join(ROOT, "examples", "spirals", "model.onnx"),
                os.path.join(out, "spirals.onnx"))
    import torch  # noqa: F401  (the exports below)
    import mlp
    import zoo
    rng = np.random.default_rng(0)
    mlp.export(mlp.MLP(seed=0), os.path.join(out, "mlp.onnx"))
    for name, module in [("msemlp", zoo.MSEMLP(0)), ("cnn", zoo.CNN(0)),
                         ("gpt_masked", zoo.GPT(0, loss="masked")),
                         ("gpt_dropout", zoo.GPT(0, dropout=0.2))]:
        inputs = module.data(4, rng)
        zoo.export(module, inputs, os.path.join(out, name + ".onnx"), 17)
    return count + 6


def npz_seeds(out, tools, work):
    rng = np.random.default_rng(0)
    arrays = {
        "f32": rng.standard_normal((4, 3)).astype(np.float32),
        "f64": rng.standard_normal(5),
        "f16": rng.standard_normal((2, 2)).astype(np.float16),
        "i64": np.arange(6, dtype=np.int64).reshape(2, 3),
        "i32": np.arange(4, dtype=np.int32),
        "i8": np.arange(-3, 3, dtype=np.int8),
        "u8": np.arange(5, dtype=np.uint8),
        "bool": np.array([True, False, True]),
        "scalar": np.array(3.5, np.float32),
        "empty": np.zeros((0, 3), np.float32),
        "big_endian": np.arange(3, dtype=">f4"),
        "fortran": np.asfortranarray(rng.standard_normal((3, 4)).astype(np.float32)),
    }
    for name, value in arrays.items():
        np.savez(os.path.join(out, name + ".npz"), x=value, y=np.arange(len(np.atleast_1d(value))))
    np.savez(os.path.join(out, "all.npz"), **arrays)
    np.savez_compressed(os.path.join(out, "compressed.npz"), **arrays)
    np.savez(os.path.join(out, "object.npz"), x=np.array([{"a": 1}, None], dtype=object))
    np.savez(os.path.join(out, "spirals.npz"), **np.load(os.path.join(ROOT, "examples", "spirals", "data.npz")))
    return len(arrays) + 4


def safetensors_seeds(out, tools, work):
    count = 0
    for name, art in artifacts(tools, work):
        shutil.copy(os.path.join(art, "init.safetensors"), os.path.join(out, name + "_init.safetensors"))
        count += 1
        for ckpt in sorted(glob.glob(os.path.join(art, "ckpt", "*.safetensors")))[-1:]:
            shutil.copy(ckpt, os.path.join(out, name + "_checkpoint.safetensors"))
            count += 1
    return count


def manifest_seeds(out, tools, work):
    count = 0
    for name, art in artifacts(tools, work):
        shutil.copy(os.path.join(art, "step.json"), os.path.join(out, name + ".json"))
        count += 1
    return count


def main():
    target, out, tools = sys.argv[1:4]
    os.makedirs(out, exist_ok=True)
    work = os.path.join(out, "..", "seed-work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    make = {"onnx-import": onnx_seeds, "npz": npz_seeds, "safetensors": safetensors_seeds,
            "manifest": manifest_seeds}[target]
    print("%s: %d seeds in %s" % (target, make(out, tools, work), out))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
