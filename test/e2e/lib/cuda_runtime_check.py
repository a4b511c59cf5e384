"""Checks the calls a CUDA run made (the stub driver's log) and its metrics
(for cuda_runtime.test)."""
import json
import sys

# mode: single (with a checkpoint after the last step), scaled (fp16 with
# dynamic loss scaling), parallel (2 ranks), sharded (2 ranks, ZeRO stage 1)
# or separate-bias (cuBLASLt has no bias-gradient epilogue); then the
# micro-batches per step.
mode, stub, metrics = sys.argv[1:4]
log = [json.loads(line) for line in open(metrics)]
steps = len(log)
assert [r["graph_launches"] for r in log] == [0] + [1] * (steps - 1), log
# No synchronization of the device inside a step: the host waits for each
# step's metrics (an event) while the device runs the next. (The checkpoint
# after the last step, single, drains the device between steps: not
# counted.)
assert all(r["device_syncs"] == 0 for r in log), log
files = [stub + ".0", stub + ".1"] if mode in ("parallel", "sharded") else [stub]
for path in files:
    calls = json.load(open(path))
    assert calls["module_target"] == "sm_90", calls
    assert calls["cuModuleLoadData"] == 1, calls
    # The first step runs directly; then one graph per batch slot (steps
    # alternate between two sets of batch buffers), replayed.
    assert calls["cuStreamBeginCapture"] == 2 and calls["cuGraphInstantiate"] == 2, calls
    assert calls["cuGraphLaunch"] == steps - 1, calls
    assert calls["cuLaunchKernel"] * 2 == calls["captured_launches"] > 0, calls
    # Every step's metrics came back through an event, none captured.
    assert calls["cuEventSynchronize"] >= steps, calls
    assert "captured_event_records" not in calls and "captured_event_waits" not in calls, calls
    # The batches went over the copy stream, each call waiting for its own.
    assert calls["cuStreamWaitEvent"] >= steps, calls
    # The GEMMs of the direct step, micro-batch by micro-batch: the same
    # products, the weight gradients starting from zero on the first only.
    betas = calls["gemm_betas"].split()
    micro_batches = int(sys.argv[4])
    per = len(betas) // micro_batches
    # 3 Linear layers: forward, weight gradient and the input gradient of
    # the last two; without the epilogue, a GEMM more per bias gradient.
    separate = mode == "separate-bias"
    assert per == (11 if separate else 8) and len(betas) == per * micro_batches, \
        (betas, micro_batches)
    chunks = [betas[i * per:(i + 1) * per] for i in range(micro_batches)]
    assert all(chunk == chunks[1] for chunk in chunks[1:]), chunks
    restarted = [i for i in range(per) if chunks[0][i] == "0" and chunks[1][i] == "1"]
    # One per weight matrix; fp16 rounds each weight gradient to fp16
    # before adding it into the fp32 accumulator (as autocast does), so
    # those go through a temporary.
    assert len(restarted) == (0 if mode == "scaled" else 3), chunks
    assert calls["captured_gemms"] == 2 * len(betas), calls
    # Each layer's bias gradient is its weight gradient's GEMM's epilogue
    # (cuBLASLt's BGRADA/BGRADB into an f32 vector at a pointer), direct
    # and captured; where cuBLASLt has no algorithm with it, none is asked
    # for and a GEMM of the gradient and a vector of ones computes it.
    assert "bad_bias_gradient_epilogues" not in calls, calls
    gemms = len(betas) + calls["captured_gemms"]
    if separate:
        assert "bias_gradient_epilogues" not in calls, calls
    else:
        assert calls["bias_gradient_epilogues"] * per == 3 * gemms, calls
    # cuBLASLt's algorithm choice is made once per shape and alignment.
    assert calls["cublasLtMatmulAlgoGetHeuristic"] < len(betas), calls
    assert calls["bad_layouts"] == 0, calls
    if mode == "parallel":
        assert calls["ncclCommInitRank"] == 1, calls
        assert calls["ncclAllReduce"] == 1 and calls["captured_all_reduces"] == 2, calls
        assert "ncclReduce" not in calls and "ncclBroadcast" not in calls, calls
    if mode == "sharded":
        # Per step (the direct one, and each of the two captured graphs):
        # the reduce-scatter is one NCCL group of a reduce per rank's shard,
        # the all-gather one of a broadcast per shard; all-reduces of the
        # loss sum and count (beside the reduce-scatter) and of the norm's
        # partial sum.
        assert calls["ncclCommInitRank"] == 1, calls
        assert calls["ncclGroupStart"] == 2 and calls["captured_group_starts"] == 4, calls
        assert calls["ncclReduce"] == 2 and calls["captured_reduces"] == 4, calls
        assert calls["ncclBroadcast"] == 2 and calls["captured_broadcasts"] == 4, calls
        assert calls["ncclAllReduce"] == 2 and calls["captured_all_reduces"] == 4, calls
if mode == "parallel":
    assert all(r["all_reduces"] == 1 for r in log), log
if mode == "sharded":
    assert all(r["reduce_scatters"] == 1 and r["all_gathers"] == 1 for r in log), log
if mode == "scaled":
    # The step keeps its loss scale on the device; the host's copy of it
    # (from the metrics) is in the log.
    assert all("loss_scale" in r and not r["skipped"] for r in log), log
print("ok: %d steps, %s" % (steps, json.load(open(files[0]))))
