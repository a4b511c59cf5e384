# The CUDA pipeline, checked on the CPU: --target cuda-emulated compiles a
# step through every CUDA transformation (per-step scalars as device
# buffers, the loss-scaling state kept by the step, scalar glue in rank-0
# device tensors, two-stage full and row reductions, contractions as calls
# of the runtime's GEMM entry, the planned workspace, one kernel per linalg
# op or a streaming kernel, the device-access check) and runs each kernel's
# threads one after the other on the host; the GEMM entry runs on the host
# the same column-major plan (transposes, leading dimensions, batch strides,
# beta) it gives cuBLASLt on a GPU. Trained with the same flags and data,
# it must reach the CPU artifact's parameters and losses: the
# transformations compute the same step, whatever the order threads run in
# (every thread writes only its own outputs). Models:
# PyTorch exports of an MLP, a CNN, a GPT with padded tokens, GRU and LSTM
# classifiers, a CNN with BatchNorm statistics, a partial last window,
# Dropout, an embedding gradient by sorted rows over skewed ids, fp16 with
# dynamic loss scaling (the scale grows until steps overflow, which both
# skip, and backs off, as GradScaler's rule), SGD with momentum, a
# gradient-only step, and two data-parallel ranks.
#
# REQUIRES: torch, mpi
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import json
import os
import sys

import numpy as np

import accrue_e2e as e2e
import zoo

out = sys.argv[1]
MPIRUN = [os.environ.get("ACCRUE_MPIRUN", "mpirun"), "--oversubscribe", "-np", "2"]
rng = np.random.default_rng(11)


def export(name, module, samples):
    return zoo.export_with_data(module, samples, rng, out, name)


def both(tag, model, data, micro_batch, steps, ranks=1, extra=(),
         targets=("cpu", "cuda-emulated"), **flags):
    """Trains the CPU and the emulated CUDA artifact; returns both results."""
    results = []
    for target in targets:
        name = "%s_%s" % (tag, target)
        art = e2e.compile_model(model, os.path.join(out, name), micro_batch,
                                target=target, **flags)
        manifest = json.load(open(os.path.join(art, "step.json")))
        assert manifest["target"] == target, manifest["target"]
        trained = os.path.join(out, name + ".onnx")
        log = os.path.join(out, name + ".jsonl")
        cmd = [e2e.tool("accrue-train"), art, "--data", data, "--no-progress",
               "--steps", str(steps), "--log", log]
        if flags.get("optimizer") == "none":
            cmd += ["--save-gradients", trained + ".npz"]
        else:
            cmd += ["--export", trained]
        e2e.run((MPIRUN if ranks > 1 else []) + cmd + list(extra))
        params = (dict(np.load(trained + ".npz")) if flags.get("optimizer") == "none"
                  else e2e.initializers(trained))
        results.append((params, e2e.read_jsonl(log), manifest))
    return results


def same(tag, cpu, emulated, rtol=2e-5, atol=1e-6, metric_rtol=1e-5):
    (cpu_params, cpu_log, _), (emu_params, emu_log, manifest) = cpu, emulated
    # The emulated step takes its per-step scalars as buffers and its
    # temporaries from a workspace.
    kinds = {a["role"]: a["kind"] for a in manifest["args"]}
    assert kinds["lr"] == "buffer" and "workspace" in kinds, kinds
    for name, value in cpu_params.items():
        e2e.assert_close("%s %s" % (tag, name), zoo.comparable(name, emu_params[name]),
                         zoo.comparable(name, value), rtol=rtol, atol=atol)
    assert len(cpu_log) == len(emu_log)
    for a, b in zip(cpu_log, emu_log):
        assert set(a) == set(b), (a, b)
        # The CUDA step sums its whole accumulator (the loss sum and count
        # sit in its tail), the CPU step the part up to them.
        if "collective_floats" in a:
            assert a["collective_floats"] <= b["collective_floats"] <= manifest["arena_size"], \
                (a, b)
        for key in set(a) - {"collective_floats"}:
            if isinstance(a[key], float):
                assert abs(a[key] - b[key]) <= metric_rtol * abs(a[key]) + 1e-7, \
                    (key, a, b)
            else:
                assert a[key] == b[key], (key, a, b)
    print("%s: %d steps, losses and parameters agree" % (tag, len(cpu_log)))


def near(tag, cpu, emulated, rtol, loss_rtol):
    """One step's gradients within `rtol` of the CPU's in relative L2 per
    tensor, the loss within `loss_rtol` (bf16 steps: the precision, not
    the bits)."""
    for name, value in cpu[0].items():
        a, b = np.asarray(value, np.float64), np.asarray(emulated[0][name], np.float64)
        assert np.linalg.norm(a - b) <= rtol * np.linalg.norm(a), \
            (tag, name, np.linalg.norm(a - b))
    assert abs(cpu[1][0]["loss"] - emulated[1][0]["loss"]) <= \
        loss_rtol * abs(cpu[1][0]["loss"]), (tag, cpu[1], emulated[1])


common = dict(accumulation_steps=4, optimizer="adamw", lr=0.01, weight_decay=0.01,
              clip_norm=0.5)

mse, mse_data = export("mse", zoo.MSEMLP(1), 64)
same("mse", *both("mse", mse, mse_data, 4, 4, **common))

cnn, cnn_data = export("cnn", zoo.CNN(2), 32)
same("cnn", *both("cnn", cnn, cnn_data, 2, 4, **common))
# The convolutions are GEMMs over their columns (im2col): at micro-batch 16
# the samples are the forward's and the input gradient's batch (the
# weight's stride 0) and conv2's two groups a host loop, and the weight
# gradients sum over samples and pixels in one call from copies laid out
# for it; at micro-batch 2 (above) the groups are the batch.
same("cnn micro-batch 16", *both("cnn16", cnn, cnn_data, 16, 2, accumulation_steps=2,
                                 optimizer="adamw", lr=0.01, weight_decay=0.01,
                                 clip_norm=0.5))
# bf16: the padding and the columns move bf16 values and the GEMMs read
# them (cuda-fold-into-contractions). The values are the CPU target's
# (bf16 widened exactly); gradients of one step agree to 1e-5 relative L2
# per tensor (summation orders may differ; measured: equal).
cpu, emulated = both("cnn_bf16", cnn, cnn_data, 16, 1, accumulation_steps=2,
                     optimizer="none", precision="bf16")
near("cnn_bf16", cpu, emulated, 1e-5, 1e-6)
print("cnn bf16: gradients and loss agree")

# Padded tokens (ignore_index) and 19 samples: the last window is partial.
# The GEMMs and the warp reductions (LayerNorm's and softmax's row sums of
# products among them) sum in other orders than the CPU's kernels, and
# AdamW's m / sqrt(v) magnifies that for gradients near zero: parameters
# after AdamW steps agree to 3e-5 absolute (measured 2.8e-5, in a weight
# whose gradient is -9.2e-5 against a median of 1e-2, the two targets'
# gradients there differing by 6e-5 relative); the gradients themselves
# are compared tightly below ("gpt gradients only": 3.5e-7 of each
# tensor's largest, measured).
gpt, gpt_data = export("gpt", zoo.GPT(3), 19)
same("gpt", *both("gpt", gpt, gpt_data, 2, 3, **common), atol=3e-5)

# bf16 (autocast's classes): the emulated GEMMs write the products rounded
# to bf16 themselves (the host GEMM rounds its f32 sum to nearest even, as
# cuBLASLt does for a bf16 D). The runs agree to bf16's precision, not
# bitwise: the CPU's erf is its own polynomial, the emulated kernels' the C
# library's, and a last-bit difference in f32 sometimes rounds a bf16 GELU
# value to the other neighbour. Gradients of one step (K = 2) within 2% of
# each other in relative L2 per tensor (measured at most 0.8%: a bf16 ulp
# is 0.4%), the loss within 0.1%; at least half the GEMMs write bf16.
cpu, emulated = both("gpt_bf16", gpt, gpt_data, 2, 1, accumulation_steps=2,
                     optimizer="none", precision="bf16")
near("gpt_bf16", cpu, emulated, 2e-2, 1e-3)
report_art = e2e.compile_model(gpt, os.path.join(out, "gpt_bf16_report"), 2,
                               target="cuda-emulated", precision="bf16",
                               accumulation_steps=2, optimizer="none",
                               kernel_report=True)
gemms = json.load(open(os.path.join(report_art, "step.json")))["kernel_report"]["gemms"]
assert sum(g["output_type"] == "bf16" for g in gemms) * 2 >= len(gemms), gemms
print("gpt bf16: gradients within 2%% of the CPU's; %d of %d GEMMs write bf16"
      % (sum(g["output_type"] == "bf16" for g in gemms), len(gemms)))

# Rows a row group's members pass each other (softmax's masked scores over
# 64 keys, in bf16 steps) stay in the block's workgroup memory
# (cuda-group-rows' row-local buffers): the same gradients.
rows64, rows64_data = export("rows64", zoo.GPT(7, vocab=96, d=64, heads=2, layers=1,
                                               block=64), 8)
cpu, emulated = both("rows64_bf16", rows64, rows64_data, 2, 1, accumulation_steps=2,
                     optimizer="none", precision="bf16")
near("rows64_bf16", cpu, emulated, 2e-2, 1e-3)
print("gpt bf16, rows of 64 in workgroup memory: gradients within 2% of the CPU's")

# Recurrences: the CPU runs each nn.scan (and its reverse-order VJP) as a
# loop, the CUDA pipeline unrolls them into straight-line kernels.
for kind in ("gru", "lstm"):
    rnn, rnn_data = export(kind, zoo.RecurrentClassifier(6, kind), 16)
    same("%s classifier" % kind, *both(kind, rnn, rnn_data, 2, 3, **common))

# Rows of 128 (LayerNorm) and 300 (the logits' softmax) elements: split
# reductions with a warp of threads per row.
wide, wide_data = export("wide", zoo.GPT(5, vocab=300, d=128, heads=2, layers=1), 8)
wide_cpu, wide_emulated = both("wide", wide, wide_data, 2, 1, accumulation_steps=2,
                               optimizer="none")
same("wide gpt gradients", wide_cpu, wide_emulated)
# Each LayerNorm's and softmax's row reductions and the row maps between
# them are one kernel of a block per row (row groups): its warps share a
# row through workgroup memory, with block barriers, which the emulator
# runs in phases. Apart (--no-row-groups), a kernel each, warp reductions
# a warp per row.
(wide_apart,) = both("wide_apart", wide, wide_data, 2, 1, accumulation_steps=2,
                     optimizer="none", targets=("cuda-emulated",), no_row_groups=True)
same("wide gpt gradients, no row groups", wide_cpu, wide_apart)

# RMSNorm (zoo.RMSNorm, as LLaMA-style models write it): its row sums of
# products are warp reductions in row groups, as LayerNorm's.
rms, rms_data = export("rms", zoo.GPT(5, vocab=300, d=128, heads=2, layers=1, norm="rms"), 8)
same("rmsnorm gpt gradients", *both("rms", rms, rms_data, 2, 1, accumulation_steps=2,
                                    optimizer="none"))

# The embedding's gradient by sorted rows (cuda-sort-gather-grads, 64
# tokens or more): micro-batches of 16 x 8 tokens, most of them one id
# (a segment over every tile), negative ids and the last row among them.
skew_rng = np.random.default_rng(4)
skewed = zoo.GPT(5, vocab=300, d=128, heads=2, layers=1).data(32, skew_rng)
ids = skewed["idx"]
ids[skew_rng.random(ids.shape) < 0.8] = 7
ids[:, 0], ids[0, 1], ids[1, 1] = -1, 299, -300
skewed_data = os.path.join(out, "skewed.npz")
np.savez(skewed_data, **skewed)
same("wide gpt, skewed ids, sorted embedding gradient",
     *both("skewed", wide, skewed_data, 16, 1, accumulation_steps=2, optimizer="none"))

dropout, dropout_data = export("dropout", zoo.GPT(4, dropout=0.2, loss="masked"), 16)
same("gpt dropout", *both("dropout", dropout, dropout_data, 2, 2, **common))

# fp16 with dynamic loss scaling, from a scale whose steps are finite: it
# grows by 16 after every 2 finite steps until the scaled gradient
# overflows, backs off by half per skipped step, and grows again. Both
# targets skip the same steps, and the scale follows GradScaler's rule
# (e2e.grad_scaler_scales) step by step.
FP16_STEPS, SCALE = 10, dict(init=16384.0, growth=16.0, backoff=0.5, interval=2)

cpu, emulated = both("fp16", mse, mse_data, 4, FP16_STEPS, precision="fp16",
                     loss_scale="dynamic:init=%(init)g,growth=%(growth)g,backoff=%(backoff)g,"
                                "interval=%(interval)d" % SCALE, **common)
for tag, (_, log, _) in (("cpu", cpu), ("cuda-emulated", emulated)):
    skipped = [r["skipped"] for r in log]
    assert any(skipped) and not all(skipped) and not skipped[0], (tag, skipped)
    assert [r["loss_scale"] for r in log] == e2e.grad_scaler_scales(skipped, **SCALE), (tag, log)
    finite = np.cumsum([not s for s in skipped]).tolist()
    assert [r["optimizer_steps"] for r in log] == finite, (tag, log)
start = e2e.initializers(mse)
assert any(np.abs(cpu[0][n] - start[n]).max() > 1e-4 for n in start), "nothing trained"
same("mse fp16 dynamic loss scale", cpu, emulated, rtol=1e-3, atol=1e-5)
print("fp16 dynamic loss scale: %s (skipped), the scale as GradScaler's rule"
      % [r["skipped"] for r in cpu[1]])

# The emulated step keeps its loss-scaling state in its own buffers: a run
# stopped after 3 steps and resumed from its checkpoint (the host loads the
# state back into them) ends where an uninterrupted run does.
art = os.path.join(out, "fp16_cuda-emulated")
ck = os.path.join(out, "fp16_ck")
resumed = os.path.join(out, "fp16_resumed.onnx")
base = [e2e.tool("accrue-train"), art, "--data", mse_data, "--no-progress",
        "--checkpoint-dir", ck]
e2e.run(base + ["--steps", "3"])
e2e.run(base + ["--steps", str(FP16_STEPS), "--resume", "--export", resumed])
whole = e2e.initializers(os.path.join(out, "fp16_cuda-emulated.onnx"))
for name, value in e2e.initializers(resumed).items():
    e2e.assert_close("fp16 resumed " + name, value, whole[name], rtol=0, atol=0)
print("fp16 dynamic loss scale: resumed on the emulated target, bit for bit")

same("mse sgd momentum", *both("sgd", mse, mse_data, 4, 4, accumulation_steps=2,
                               optimizer="sgd", lr=0.1, momentum=0.9, nesterov=True))
same("gpt gradients only", *both("grads", gpt, gpt_data, 2, 1, accumulation_steps=4,
                                 optimizer="none"))

# Two ranks: the loss sum and count ride in the accumulator's tail through
# one all-reduce, as on the CPU.
cpu, emulated = both("dp", gpt, gpt_data, 2, 2, ranks=2, data_parallel=True, **common)
assert all(r["all_reduces"] == 1 for r in emulated[1]), emulated[1]
same("gpt 2 ranks", cpu, emulated)

# BatchNorm's running statistics (the buffer arena, updated per micro-batch
# on the device) with a partial last window (20 samples, windows of 8).
# The first step's gradient norms agree to the last bit; the last window
# (4 samples, BatchNorm over micro-batches of 2) amplifies what the two
# targets' summation orders leave in the parameters after two updates: on a
# host without AVX-512 (other vector widths, other orders) its norm differs
# by 2.0e-5 relative while every parameter agrees within 2e-5. That window's
# gradients differ between the targets by up to 2e-5 relative (in bn2d's
# and fc's; the CPU target against itself at other orders alike), and AdamW
# turns that into up to 3e-6 in a parameter of 0.03 (conv.weight, with the
# warp reductions' butterfly order): atol 5e-6 here.
bn, bn_data = export("bn", zoo.BatchNormCNN(12), 20)
same("batchnorm statistics", *both("bn", bn, bn_data, 2, 3, **common),
     atol=5e-6, metric_rtol=5e-5)
print("ok")
