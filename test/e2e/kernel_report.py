# accrue-compile --kernel-report on the test suite's GPT (padded tokens),
# checked against what does not come from the report's code:
# - for the cuda target, its kernels are the PTX's .entry functions, by
#   name and in order, and its GEMM calls are the accrue_gemm calls of the
#   step;
# - launches per step are launches per micro-batch times K plus the rest,
#   for two values of K compiled separately;
# - the token embedding's gradient (a scatter-add) is one thread per
#   (feature, row range of the table) walking the micro-batch's b x T
#   tokens, each thread updating only its rows (a data-dependent guard the
#   report counts as taken: 4 accesses per token), from the model's sizes;
#   from 64 tokens on, sorted by row: no thread walks the tokens;
# - LayerNorm's per-row dot products are GEMMs with M = N = 1;
# - the position embedding's forward (a gather at a constant arange) is
#   the same in every micro-batch, the token embedding's is not;
# - step.json holds what --kernel-report=json printed; the CPU target
#   refuses the setting with one line naming it.
#
# REQUIRES: torch, cuda-toolkit
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import collections
import json
import os
import re
import subprocess
import sys

import numpy as np

import accrue_e2e as e2e
import zoo

out = sys.argv[1]
rng = np.random.default_rng(5)
B, T, D, VOCAB = 2, 8, 16, 17  # zoo.GPT's defaults: block 8, width 16

module = zoo.GPT(3)
data = module.data(8, rng)
model = os.path.join(out, "gpt.onnx")
zoo.export(module, data, model, 17)


def compile_report(name, k, target="cuda-emulated", fmt="json", extra=(), micro_batch=B):
    art = os.path.join(out, name)
    cmd = [e2e.tool("accrue-compile"), model, "-o", art, "--micro-batch", str(micro_batch),
           "--accumulation-steps", str(k), "--clip-norm", "1", "--target", target,
           "--kernel-report=" + fmt] + list(extra)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return art, proc.stdout


art, printed = compile_report("k4", 4)
report = json.loads(printed)
with open(os.path.join(art, "step.json")) as f:
    assert json.load(f)["kernel_report"] == report
kernels, totals = report["kernels"], report["totals"]
assert report["accumulation_steps"] == 4

# Per-step counts follow K.
_, printed1 = compile_report("k1", 1)
report1 = json.loads(printed1)
per_mb = totals["kernels_per_micro_batch"]
assert per_mb == report1["totals"]["kernels_per_micro_batch"] > 0
assert totals["kernels_per_step"] - report1["totals"]["kernels_per_step"] == 3 * per_mb
assert totals["kernels_per_step"] == sum(k["launches_per_step"] for k in kernels)
assert totals["gemm_calls_per_step"] - report1["totals"]["gemm_calls_per_step"] \
    == 3 * totals["gemm_calls_per_micro_batch"]

# The token embedding's gradient: one thread per feature (d of them) and
# range of table rows (at most 64 ranges: here the 17 rows, one each),
# each walking the b x T tokens in order (an id, and where the id is in
# its range the gradient's element and the table's element read and
# written: at most 4 accesses per token), so every table element sums its
# tokens in the order one loop over them would. The lanes of a warp are
# features of one token: they load its id from one address, so the report
# takes the id as the same in every lane and the table's row as written
# along its features, coalesced (the counting emulator's sectors agree,
# counting_emulator.py), not indirect.
wte = [k for k in kernels if k["node"] == "/wte/Gather" and k["trip_count"] > 1]
assert len(wte) == 1, [k["name"] for k in kernels if "wte" in k["node"]]
assert wte[0]["threads"] == D * VOCAB and wte[0]["trip_count"] == B * T, wte[0]
assert wte[0]["grid"] == [1, VOCAB, 1] and wte[0]["block"] == [D, 1, 1], wte[0]
assert wte[0]["memory_ops_per_thread"] == 4 * B * T, wte[0]
stores = [a for a in wte[0]["accesses"] if a["op"] == "store"]
assert stores and all(a["pattern"] == "coalesced" and a["sector_efficiency"] == 1
                      for a in stores), stores
assert wte[0]["launches_per_micro_batch"] == 1
# The position embedding's gradient (its gather's indices are a constant
# arange) is the adjoint itself, summed over the micro-batch's B samples
# (that sum, from zero in registers, fused into it): no one-thread kernel,
# no loop over the B x T positions as a scatter's.
assert not any(k["trip_count"] > B or k["threads"] == 1 for k in kernels
               if k["node"] == "/wpe/Gather"), [k for k in kernels if k["node"] == "/wpe/Gather"]
# The global norm's partials are split again while there are many: no
# one-thread kernel of the step's own code loops over more than 64 (it was
# 437 partials, after a first stage of 256 threads streaming 1024 of them).
assert not any(k["trip_count"] > 64 for k in kernels if k["node"] == "step"
               and k["threads"] == 1), [k for k in kernels if k["node"] == "step"]
# What still loops in one thread: the loss's sum over the micro-batch's
# tokens (too few to split).
serial = max((k for k in kernels if k["threads"] == 1), key=lambda k: k["memory_ops_per_thread"])
assert serial["trip_count"] > 1, serial
assert totals["single_thread_kernels_with_loops"] >= 1

# The position embedding's forward gathers the parameters at a constant
# arange: the same rows in every micro-batch, so it runs once per step,
# before the micro-batch loop; the token embedding's runs in every
# micro-batch. No kernel left in the loop reads only what the loop does
# not change (the report's own reading of the buffers; it was the wpe
# gather here and, in bf16, 42 weight transposes and casts).
wpe = [k for k in kernels if k["node"] == "/wpe/Gather" and k["threads"] > 1
       and any(a.get("parameter") == "wpe.weight" for a in k["accesses"])]
assert wpe and all(k["launches_per_micro_batch"] == 0 and k["launches_per_step"] == 1
                   for k in wpe), wpe
assert all(k["launches_per_micro_batch"] == 1 for k in kernels
           if k["node"] == "/wte/Gather"), [k for k in kernels if k["node"] == "/wte/Gather"]
assert totals["loop_invariant_kernels_per_micro_batch"] == 0, totals

# No GEMM sums a dot product per row (M = N = 1): LayerNorm's and
# softmax's backward sum a row's products as reductions (here, rows of 16:
# a thread per row of the b x T rows; from 32 elements a warp, in the row
# groups); they were 1 x 1 x d GEMMs. The LayerNorm scales' gradients, a
# dot product per column over the b x T rows, are still GEMMs (adding
# into the accumulator).
thin = [g for g in report["gemms"] if g["m"] == 1 and g["n"] == 1]
assert thin and all(g["batch"] == D and g["k"] == B * T for g in thin), thin
assert any(k["node"].endswith("LayerNormalization") and k["trip_count"] == D
           and k["threads"] == B * T for k in kernels), [k["name"] for k in kernels]
assert totals["gemms_with_m_or_n_1"] == len([g for g in report["gemms"]
                                             if g["m"] == 1 or g["n"] == 1])

# Under bf16 autocast every matrix product multiplies bf16 values: the
# GEMMs take bf16 buffers (or f32 ones holding bf16 values) and run on the
# tensor cores, with fp32 accumulation. (The host GEMM of the emulated
# target checks, at run time, that such inputs are exact in bf16.)
_, printed_bf16 = compile_report("bf16", 4, extra=["--precision", "bf16"])
bf16_gemms = json.loads(printed_bf16)["gemms"]
bf16_totals = json.loads(printed_bf16)["totals"]
# The weights' transposes and bf16 casts run once per step, before the loop.
assert bf16_totals["loop_invariant_kernels_per_micro_batch"] == 0, bf16_totals
# A Linear weight's transpose (16 x 16, 16 x 48, 16 x 64: sides multiples
# of 4) is one thread per 4 x 4 tile whose reads and writes move 4
# elements each (16 bytes of f32, 8 of bf16: the weights' bf16 casts, and
# the weight gradients the GEMMs write in bf16) and fill whole sectors
# (one thread per element read 4 bytes of a different sector in every
# lane: 12.5%); the weights' casts read and write along rows: every kernel
# of those nodes uses all the bytes it moves.
bf16_kernels = json.loads(printed_bf16)["kernels"]
weight_transposes = [k for k in bf16_kernels if k["node"].endswith("/Transpose")
                     and any(x in k["node"] for x in ("qkv", "proj", "fc1", "fc2"))]
assert all(k["sector_efficiency"] == 1 for k in weight_transposes), weight_transposes
tiled = [k for k in weight_transposes
         if all(a["access_bytes"] == 4 * a["element_bytes"] for a in k["accesses"])]
assert len(tiled) >= 8, [k["name"] for k in weight_transposes]
products = [g for g in bf16_gemms if g["m"] > 1 or g["n"] > 1]
assert len(products) == len([g for g in report["gemms"] if g["m"] > 1 or g["n"] > 1])
assert all(g["multiply_type"] == "bf16" for g in products), \
    [(g["node"], g["m"], g["n"], g["k"]) for g in products if g["multiply_type"] != "bf16"]
# Products whose operands were both widened from bf16 tensors read those
# tensors (cuda-fold-into-contractions): 28 of the 39, the rest read f32
# buffers holding bf16 values (a rounding fused into one op with its
# widening). No widening kernel is left for them: 269 kernels a
# micro-batch before, 235 then. Since the widenings fold in before
# elementwise fusion, all 39 read bf16. A product rounded to bf16 as soon
# as it is computed (autocast's bf16 result) is written in bf16 by its
# GEMM, which rounds the f32 sum itself: 36 of the 51 calls (the others
# add into f32: the accumulator, a gradient's sum).
assert len([g for g in products if g["input_type"] == "bf16"]) >= 39, \
    [(g["node"], g["input_type"]) for g in products]
assert len([g for g in bf16_gemms if g["output_type"] == "bf16"]) >= 36, \
    [(g["node"], g["output_type"]) for g in bf16_gemms]
assert all(g["output_type"] == "f32" for g in report["gemms"]), report["gemms"]
# Attention's products that read [batch, sequence, heads, dim] through a
# transpose (samples and heads in two strides) copy that operand with the
# samples and heads outermost, so each is one strided batched call over
# all B x heads pairs, not a call per sample: 55 calls a micro-batch
# before, 51 now, for 4 more (copy) kernels, 239. Neighbouring elementwise
# ops over the same points are one kernel since (cuda-fuse-kernels), and
# what follows a warp reduction at its points runs in its lane 0: 179;
# 140 since the gradients' accumulations join the kernels computing the
# gradients and a split's gradient is its parts written into one tensor
# (cuda-join-slice-sums), each by the kernel computing it; 136 since the
# GEMMs round their products to bf16 themselves. Since the dot products
# per row (M = N = 1: LayerNorm's and softmax's backward) are reductions,
# 7 GEMM calls fewer (51 -> 44) for 2 more kernels (136 -> 138: rows of 16
# are a thread per row here, apart from the row groups; from 32 elements
# they join them); 136 since reductions recompute the widening of what
# they read (the bias gradients' of their bf16 gradient); 128 since the
# weight gradients' GEMMs compute the bias gradients (their epilogue).
assert bf16_totals["gemm_calls_per_micro_batch"] <= 44, bf16_totals
assert bf16_totals["kernels_per_micro_batch"] <= 128, bf16_totals
attention = [g for g in products if g["batch"] > 1]
assert attention and all(g["batch"] == B * 2 and g["launches_per_micro_batch"] == 1
                         for g in attention), attention

# Column reductions (LayerNorm's beta gradients) over 16 x 8 = 128 rows are
# split into partials: the first stage's threads
# take neighbouring columns, so a warp reads along a row, 64 threads a
# column (about sqrt(32 x 128)) folding 2 rows each; each stores its partial
# where its column's partials are a row (one strided store a thread, 64
# partials apart), so that a warp reduces each column's 64 partials, 2 a
# lane (below). The only strided reads left are rows too short for a warp
# (16 elements) read one thread per row: the thread stride is the row's
# bytes.
_, printed128 = compile_report("rows128", 1, micro_batch=16)
column_stages = 0
for k in json.loads(printed128)["kernels"]:
    for a in k["accesses"]:
        if a["pattern"] == "strided" and a["op"] == "store":
            assert a["thread_stride_bytes"] == 64 * a["element_bytes"] \
                and k["trip_count"] == 2 and k["threads"] % 64 == 0, (k["name"], a)
            column_stages += 1
        elif a["pattern"] == "strided":
            assert a["thread_stride_bytes"] == k["trip_count"] * a["element_bytes"] \
                and k["trip_count"] in (D, T, VOCAB), (k["name"], k["trip_count"], a)
assert column_stages == 5, column_stages  # the 5 LayerNorms' betas

# A Linear's bias gradient (the sum of its output's gradient over the rows)
# is no column reduction: the weight gradient's GEMM, which sums the same
# rows, computes it (cuBLASLt's bias-gradient epilogue of its B operand,
# the output's gradient), for each of the 2 blocks' 4 Linears.
report128 = json.loads(printed128)
epilogues = sorted(g["node"] for g in report128["gemms"] if g["epilogue"] != "none")
assert epilogues == sorted("/blocks.%d/%s/MatMul" % (i, name) for i in range(2)
                           for name in ("qkv", "proj", "fc1", "fc2")), epilogues
assert all(g["epilogue"] == "bias_gradient_b" and g["k"] == 16 * T
           for g in report128["gemms"] if g["epilogue"] != "none")
assert report128["totals"]["bias_gradient_epilogues_per_micro_batch"] == 8

# Row reductions of 32 to 2,048 32-bit values (a GPT of width 64 over 32
# tokens and a vocabulary of 96: LayerNorm's moments over 64, softmax's
# maximum and sum over 32, the loss's over 96) are one kernel each, a warp
# a row: lane l folds the row's elements l, l + 32, ... (a warp reads 32
# neighbours at once), shuffles combine the lanes, and lane 0 stores the
# row's value; where a lane would fold several (ceil(n / 32) > 1), a block
# of that many warps (at most 8) takes the row, warp w the lane's
# elements w, w + W, ..., and thread 0 folds the warps' values from
# workgroup memory. Each thread runs ceil(ceil(n / 32) / W) loads of each
# operand, and one thread the store; there is no second stage reading
# partials.
wide = zoo.GPT(6, vocab=96, d=64, heads=2, layers=1, block=32)
wide_model = os.path.join(out, "wide.onnx")
zoo.export(wide, wide.data(8, rng), wide_model, 17)
proc = subprocess.run([e2e.tool("accrue-compile"), wide_model, "-o", os.path.join(out, "wide"),
                       "--micro-batch", "2", "--target", "cuda-emulated", "--no-row-groups",
                       "--kernel-report=json"], capture_output=True, text=True)
assert proc.returncode == 0, proc.stderr
wide_totals = json.loads(proc.stdout)["totals"]
wide_kernels = json.loads(proc.stdout)["kernels"]
rows = {"LayerNormalization": (2 * 32, 64), "Softmax": (2 * 2 * 32, 32),
        "SoftmaxCrossEntropyLoss": (2 * 32, 96)}
# What follows a reduction at its points (LayerNorm's division by n, its
# rsqrt(var + eps)) runs in lane 0 after the shuffles (cuda-fuse-kernels),
# loading its other operands once and storing its results there: lane 0
# is the only lane that stores.
warps = collections.Counter()
epilogues = collections.Counter()
for k in wide_kernels:
    op = k["node"].rsplit("/", 1)[-1].split("_")[0]
    stores = [a for a in k["accesses"] if a["op"] == "store"]
    if op not in rows or not stores or any(a["active_lanes"] != 1 for a in stores):
        continue
    count, n = rows[op]
    per_lane = -(-n // 32)
    warps_a_row = min(per_lane, 8)
    if k["threads"] != 32 * warps_a_row * count:
        continue
    loads = [a for a in k["accesses"] if a["op"] == "load"]
    row = [a for a in loads if a["active_lanes"] == 32]
    once = [a for a in loads if a["active_lanes"] == 1]
    assert k["trip_count"] == -(-per_lane // warps_a_row) and row and all(
        a["pattern"] in ("coalesced", "broadcast") and
        a["executions_per_thread"] == k["trip_count"] for a in row), k
    assert len(row) + len(once) == len(loads) and all(
        a["executions_per_thread"] == 1 for a in once + stores), k
    assert k["memory_ops_per_thread"] == \
        k["trip_count"] * len(row) + len(once) + len(stores), k
    warps[op] += 1
    epilogues[op] += len(stores) > 1
# A gradient's accumulation into the accumulator (emitted at the end of the
# micro-batch) is done by the kernel computing the gradient: the weights'
# by their tiled transposes, the warp-reduced biases' and LayerNorm
# parameters' by their warps. Left apart: the
# position embedding's (its gradient is a scatter) and those whose column
# reductions over 64 rows are one plain reduction kernel, not a warp's.
accumulations = [k["name"] for k in wide_kernels
                 if k["node"] == "step" and k["launches_per_micro_batch"] and
                 any(a["buffer"] == "grads" and a["op"] == "store" for a in k["accesses"])]
assert len(accumulations) <= 8, accumulations
# LayerNorm's mean and variance in each of its three forwards, two of its
# backwards' sums; softmax's maximum and sum; the loss's maximum and sum;
# and the dot products per row that were GEMMs: each LayerNorm backward's
# sum of dy x gamma x xhat, softmax's backward's sum of dy x y.
assert warps == {"LayerNormalization": 12, "Softmax": 3, "SoftmaxCrossEntropyLoss": 2}, warps
# Each forward's mean is divided by n, and its variance made 1 / sqrt(var +
# eps) (and sqrt(var + eps), kept for the backward), in their warps.
assert epilogues["LayerNormalization"] >= 6, epilogues
assert not any(a["pattern"] == "strided" for k in wide_kernels for a in k["accesses"]
               if k["node"].rsplit("/", 1)[-1].split("_")[0] in rows), \
    [k["name"] for k in wide_kernels if any(a["pattern"] == "strided" for a in k["accesses"])]

# Row groups (the default; the warps above were --no-row-groups): a
# LayerNorm's or a softmax's row reductions and the row maps between them
# (forward and backward) are one kernel of a block per row, which reads
# each row's temporaries in the same kernel that writes them: 73 kernels a
# micro-batch become 48, 2.13 MB of footprint 1.74 (measured; 44 since the
# bias gradients are GEMM epilogues);
# cuda_emulated.py and counting_emulator.py run them.
proc = subprocess.run([e2e.tool("accrue-compile"), wide_model, "-o", os.path.join(out, "wide_rows"),
                       "--micro-batch", "2", "--target", "cuda-emulated",
                       "--kernel-report=json"], capture_output=True, text=True)
assert proc.returncode == 0, proc.stderr
grouped_totals = json.loads(proc.stdout)["totals"]
assert grouped_totals["kernels_per_micro_batch"] <= 44 and \
    grouped_totals["footprint_bytes_per_micro_batch"] <= 1.75e6 and \
    wide_totals["kernels_per_micro_batch"] - grouped_totals["kernels_per_micro_batch"] >= 20 \
    and grouped_totals["footprint_bytes_per_micro_batch"] <= \
    0.85 * wide_totals["footprint_bytes_per_micro_batch"], (grouped_totals, wide_totals)
# Their PTX (workgroup memory, barriers) assembles for sm_80 and sm_90
# with no spills.
proc = subprocess.run([e2e.tool("accrue-compile"), wide_model, "-o", os.path.join(out, "wide_ptx"),
                       "--micro-batch", "2", "--target", "cuda", "--cuda-arch", "sm_80,sm_90",
                       "--kernel-report=json"], capture_output=True, text=True)
assert proc.returncode == 0, proc.stderr
assert json.loads(proc.stdout)["ptx_totals"]["kernels_spilling"] == 0, \
    json.loads(proc.stdout)["ptx_totals"]
with open(os.path.join(out, "wide_ptx", "kernels.sm_80.ptx")) as f:
    assert "bar.sync" in f.read()

# From 64 tokens a micro-batch on, the token embedding's gradient sorts its
# tokens by row (cuda-sort-gather-grads): at 16 x 8 = 128 tokens, one
# thread per token writes its key at its rank, one per (sorted token,
# feature) writes its segment's sum, and no thread walks the tokens: the
# longest chain is a segment's last token's (its key and the next, the
# tails of 11 tiles of 12 keys, its own tile, two loads each, the store),
# set by the shapes where the scatter's was up to 4 b T.
N16 = 16 * T
TILE = int(np.ceil(np.sqrt(N16)))
TILES = -(-(N16 + 1) // TILE)
wte16 = [k for k in json.loads(printed128)["kernels"] if k["node"] == "/wte/Gather"]
indirect = [k for k in wte16 if any(a["op"] == "store" and a["pattern"] == "indirect"
                                     for a in k["accesses"])]
assert sorted(k["threads"] for k in indirect) == [N16, N16 * D], \
    [(k["name"], k["threads"]) for k in indirect]
assert max(k["memory_ops_per_thread"] for k in wte16) == 2 + 2 * TILES + 2 * TILE + 1 \
    < 4 * N16, [(k["name"], k["memory_ops_per_thread"]) for k in wte16]

# The text report names them.
_, text = compile_report("text", 4, fmt="text")
assert re.search(r"warning: %s runs a loop of \d+ memory operations in one thread"
                 % re.escape(serial["name"]), text), text
assert "a reduction, not a matrix product" in text, text

# For the GPU: one report kernel per PTX entry, same names, same order; one
# GEMM per accrue_gemm call in the host code.
art_cuda, printed_cuda = compile_report("cuda", 4, target="cuda")
cuda_report = json.loads(printed_cuda)
with open(os.path.join(art_cuda, "kernels.sm_90.ptx")) as f:
    entries = re.findall(r"\.visible \.entry (\w+)\(", f.read())
assert [k["name"] for k in cuda_report["kernels"]] == entries, \
    (len(entries), len(cuda_report["kernels"]))
mlir = subprocess.run([e2e.tool("accrue-compile"), model, "-o", "-", "--micro-batch", str(B),
                       "--clip-norm", "1", "--target", "cuda", "--emit", "linalg"],
                      capture_output=True, text=True, check=True).stdout
assert len(re.findall(r"call @accrue_gemm\(", mlir)) == len(cuda_report["gemms"])
# The emulation runs the very kernels the GPU gets (the PTX lint aside).
ptx_totals = cuda_report.pop("ptx_totals")
ptx = {k["name"]: k.pop("ptx") for k in cuda_report["kernels"]}
assert cuda_report == report

# The PTX lint (sm_90, the newest architecture compiled) against the IR's
# reading: a one-thread kernel loops in the PTX only where it loops in the
# IR (LLVM may unroll short loops of constant trip count, not make them);
# a kernel divides by parameters in the PTX only where the IR divides by
# values from outside it that are not constants (LLVM removes some).
assert ptx_totals["arch"] == "sm_90", ptx_totals
serial_loops = {k["name"] for k in kernels if k["threads"] == 1 and k["trip_count"] > 1}
ptx_serial_loops = {k["name"] for k in kernels if k["threads"] == 1 and ptx[k["name"]]["loops"]}
assert ptx_serial_loops <= serial_loops, ptx_serial_loops - serial_loops
assert ptx_totals["single_thread_kernels_with_loops"] == len(ptx_serial_loops)
for k in kernels:
    if ptx[k["name"]]["parameter_divisions"]:
        assert k["parameter_divisions"] > 0, k["name"]
# The optimizer's streaming pass moves 16 bytes per access.
update = [k for k in kernels if k["node"] == "update"]
assert update and all(ptx[k["name"]]["widest_global_access"] == 16 for k in update)
assert ptx_totals["streaming_kernels_without_16_byte_accesses"] == 0
# ptxas' registers, and the occupancy they allow on an H100/H200 (64K
# registers per SM in warp granules of 256, 64 warps, 32 blocks).
for k in kernels:
    p = ptx[k["name"]]
    warps = (k["block"][0] * k["block"][1] * k["block"][2] + 31) // 32
    per_warp = -(-p["registers"] * 32 // 256) * 256
    blocks = min(65536 // (per_warp * warps), 64 // warps, 32)
    assert abs(p["occupancy"] - blocks * warps / 64) < 1e-3, (k["name"], p)

# Ceilings: what the instrument shows today may only go down.
assert ptx_totals["kernels_spilling"] == 0
# Index computations are sunk into the kernels before outlining: no kernel
# divides by a run-time value where the shapes are static.
assert ptx_totals["kernels_dividing_by_parameters"] == 0, ptx_totals
assert totals["kernels_dividing_by_parameters"] == 0, totals
# Kernels per micro-batch: 194 until reductions into a constant fill (a
# sum's zeros, a maximum's -inf) started from the constant in registers,
# without the fill's kernel; 139 until neighbouring elementwise ops and
# warp reductions' epilogues were fused (cuda-fuse-kernels), 119 until
# the accumulations and the split's parts joined their producers, 109
# until attention's products copied both their inputs into samples-and-
# heads-outermost order where both need it (4 copy kernels for 4 fewer
# GEMM calls: 63 -> 59); 115 since the dot products per row are
# reductions (a thread per row of 16 here), for 7 GEMM calls fewer (52);
# 107 since the weight gradients' GEMMs compute the 8 bias gradients.
assert totals["kernels_per_micro_batch"] <= 107, totals
assert totals["gemm_calls_per_micro_batch"] <= 52, totals
# The longest chain: it was the embedding gradient's 4 b T d = 1024, then
# the gradient norm's second stage (one thread over 437 partials); now a
# full reduction's thread, 64 elements of two loads each, and its
# partial's store (its partial starts from the identity, not a load).
assert totals["max_memory_ops_per_thread"] <= 129, totals
# At 16 x 8 tokens (rows and columns of 128 split, the embedding gradient
# sorted): 232 kernels a micro-batch until the split reductions' partials
# and the reductions into fills started from constants, 159 until
# cuda-fuse-kernels, 139 until the accumulations joined their producers,
# 115 until attention's products copied both inputs (4 copy kernels for
# 60 fewer GEMM calls, 231 -> 171: a call per sample and product before);
# 59 since the batch dimension of a GEMM whose batch loops do not
# collapse is their largest run (the 16 samples, not the 2 heads: a call
# per head instead of one per sample); 52 since the dot products per row
# are reductions (119 -> 121 kernels); 113 since the weight gradients'
# GEMMs compute the bias gradients (8 split column sums of 2 kernels each
# fewer, 8 adds into the accumulator more).
assert json.loads(printed128)["totals"]["kernels_per_micro_batch"] <= 113, \
    json.loads(printed128)["totals"]
assert json.loads(printed128)["totals"]["gemm_calls_per_micro_batch"] <= 52, \
    json.loads(printed128)["totals"]
# And every kernel there over 64 KB (the MLP's, the transposes', the
# attention's) uses at least 80% of the sectors it moves (the 10M and
# 100M GPTs' kernels over 1 MB below that are row reductions' second
# stages, bench/README.md).
for k in json.loads(printed128)["kernels"]:
    if k["footprint_bytes"] > 65536:
        assert all(a["sector_efficiency"] is None or a["sector_efficiency"] >= 0.8
                   for a in k["accesses"]), (k["name"], k["accesses"])

# RMSNorm (x / sqrt(mean(x^2) + eps) x scale, as LLaMA-style models write
# it) in a GPT of width 128 (b x T = 16 rows): its forward and backward
# row sums of products are reductions, a warp's, and each RMSNorm's
# forward (with the residual add before it) and backward is one kernel of
# a block per row (4 warps: 128 elements, 32 a warp); no row's dot product
# is a GEMM.
rms_module = zoo.GPT(5, vocab=300, d=128, heads=2, layers=1, norm="rms")
rms_model = os.path.join(out, "rms.onnx")
zoo.export(rms_module, rms_module.data(4, rng), rms_model, 17)
proc = subprocess.run([e2e.tool("accrue-compile"), rms_model, "-o", os.path.join(out, "rms"),
                       "--micro-batch", "2", "--target", "cuda-emulated",
                       "--kernel-report=json"], capture_output=True, text=True)
assert proc.returncode == 0, proc.stderr
rms_report = json.loads(proc.stdout)
rms_rows = 2 * rms_module.block
row_blocks = [k["name"] for k in rms_report["kernels"] if k["launches_per_micro_batch"]
              and k["grid"] == [rms_rows, 1, 1] and k["block"] == [128, 1, 1]]
assert len(row_blocks) == 2 * 3, row_blocks  # 3 RMSNorms, forward and backward
assert not [g for g in rms_report["gemms"] if g["m"] == 1 and g["n"] == 1 and
            g["batch"] == rms_rows], rms_report["gemms"]

# The test suite's CNN (b = 16, bf16): every convolution's products are
# GEMM calls over its columns (im2col) reading bf16 (the padding and the
# columns move bf16 values): conv1's forward and weight gradient (its
# input is the data: no input gradient), conv2's forward and input
# gradient (a call per group: the samples are the GEMM's batch, which the
# weight does not have) and its weight gradient (one call over both
# groups, summing over samples and pixels from copies laid out for it).
# The weight gradients were direct kernels, a thread per weight summing
# b x 8 x 8 products: 2,050 memory operations in one thread.
CNN_B = 16
cnn_module = zoo.CNN(2)
cnn_model = os.path.join(out, "cnn.onnx")
zoo.export(cnn_module, cnn_module.data(4, rng), cnn_model, 17)
proc = subprocess.run([e2e.tool("accrue-compile"), cnn_model, "-o", os.path.join(out, "cnn"),
                       "--micro-batch", str(CNN_B), "--accumulation-steps", "4",
                       "--precision", "bf16", "--clip-norm", "1", "--target", "cuda",
                       "--cuda-arch", "sm_90", "--kernel-report=json"],
                      capture_output=True, text=True)
assert proc.returncode == 0, proc.stderr
cnn_report = json.loads(proc.stdout)
conv_gemms = collections.defaultdict(list)
for g in cnn_report["gemms"]:
    if "conv" in g["node"]:
        assert g["input_type"] == "bf16" and g["multiply_type"] == "bf16", g
        conv_gemms[g["node"]] += [(g["batch"], g["m"], g["n"], g["k"])] * \
            g["launches_per_micro_batch"]
# Shapes from the model: conv1 2 -> 4 channels, 3 x 3, 8 x 8 pixels; conv2
# 4 -> 6 channels in 2 groups (2 -> 3 each), stride 2: 2 x 2 pixels.
assert sorted(conv_gemms["/conv1/Conv"]) == sorted([
    (CNN_B, 4, 8 * 8, 2 * 9),          # Y = W x columns, per sample
    (1, 4, 2 * 9, CNN_B * 8 * 8)]), conv_gemms  # dW = dY x columns^T
assert sorted(conv_gemms["/conv2/Conv"]) == sorted([
    (CNN_B, 3, 2 * 2, 2 * 9)] * 2 + [  # forward, per group
    (CNN_B, 2 * 9, 2 * 2, 3)] * 2 + [  # input gradient's columns, per group
    (2, 3, 2 * 9, CNN_B * 2 * 2)]), conv_gemms  # weight gradient, both groups
cnn_totals = cnn_report["totals"]
assert cnn_totals["max_memory_ops_per_thread"] <= 111, cnn_totals
# 65 kernels a micro-batch with direct convolutions; 59 with GEMMs; 50
# once col2im's copies of a window onto itself went (CSE after
# bufferization).
assert cnn_totals["kernels_per_micro_batch"] <= 50, cnn_totals

# The CPU has no kernels to report.
proc = subprocess.run([e2e.tool("accrue-compile"), model, "-o", os.path.join(out, "cpu"),
                       "--micro-batch", str(B), "--kernel-report"],
                      capture_output=True, text=True)
assert proc.returncode == 1 and not os.path.exists(os.path.join(out, "cpu")), proc
assert proc.stderr.strip().count("\n") == 0, proc.stderr
assert "--kernel-report" in proc.stderr and "cuda" in proc.stderr, proc.stderr
print("ptx: %s" % ptx_totals)
print("kernel report: %d kernels, %d launches and %d GEMM calls per step (K=4)"
      % (totals["kernels"], totals["kernels_per_step"], totals["gemm_calls_per_step"]))
