# Every end-to-end model compiles for the GPU: PyTorch exports of an MLP, a
# CNN and a GPT (padded tokens, Dropout), in fp32, bf16 and fp16 with dynamic
# loss scaling, and data-parallel, each for sm_80 and sm_90 in one artifact.
# ptxas assembles every architecture's PTX, and the fused update kernel
# (the optimizer's pass over the arenas) spills no registers. The manifest
# describes a CUDA step: per-step scalars in device buffers, a workspace.
#
# REQUIRES: torch, cuda-toolkit
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import json
import os
import re
import subprocess
import sys

import numpy as np

import accrue_e2e as e2e
import zoo

out = sys.argv[1]
PTXAS = os.environ["ACCRUE_PTXAS"]
rng = np.random.default_rng(3)

models = {
    "mlp": zoo.MSEMLP(1),
    "cnn": zoo.CNN(2),
    "gpt": zoo.GPT(3),
    "gpt_dropout": zoo.GPT(4, dropout=0.1, loss="masked"),
}
variants = {
    "fp32": dict(clip_norm=1.0),
    "bf16": dict(precision="bf16", clip_norm=1.0),
    "fp16": dict(precision="fp16", loss_scale="dynamic"),
    "dp": dict(data_parallel=True, clip_norm=1.0),
}
for name, module in models.items():
    data = module.data(4, rng)
    path = os.path.join(out, name + ".onnx")
    zoo.export(module, data, path, 17)
    for variant, flags in variants.items():
        if name.startswith("gpt_dropout") and variant != "fp32":
            continue
        tag = "%s %s" % (name, variant)
        art = e2e.compile_model(path, os.path.join(out, "%s_%s" % (name, variant)), 2,
                                target="cuda", cuda_arch="sm_80,sm_90",
                                accumulation_steps=4, **flags)
        manifest = json.load(open(os.path.join(art, "step.json")))
        assert manifest["target"] == "cuda" and manifest["cuda_archs"] == ["sm_80", "sm_90"]
        args = {a["role"]: a for a in manifest["args"]}
        assert args["lr"]["kind"] == "buffer" and args["step"]["kind"] == "buffer", args
        assert args["workspace"]["dtype"] == "u8", args["workspace"]
        for arch in ("sm_80", "sm_90"):
            ptx = os.path.join(art, "kernels.%s.ptx" % arch)
            proc = subprocess.run([PTXAS, "-arch=" + arch, "-v", ptx, "-o",
                                   os.path.join(out, "k.cubin")],
                                  capture_output=True, text=True)
            assert proc.returncode == 0, "%s %s: ptxas failed:\n%s" % (tag, arch, proc.stderr)
            kernels = len(re.findall(r"Compiling entry function", proc.stderr))
            update = re.search(r"Function properties for (k\d+_update)\n\s*(.*)", proc.stderr)
            assert update, "%s %s: no update kernel" % (tag, arch)
            assert "0 bytes spill stores, 0 bytes spill loads" in update.group(2), \
                "%s %s: %s" % (tag, arch, update.group(2))
            print("%s %s: %d kernels assemble; %s: %s" % (tag, arch, kernels, update.group(1),
                                                          update.group(2).strip()))
print("ok")
