"""Checks the calls a CUDA run made (the stub driver's log) and its metrics
(for cuda_runtime.test)."""
import json
import sys

mode, stub, metrics = sys.argv[1:4]  # then the micro-batches per step
log = [json.loads(line) for line in open(metrics)]
steps = len(log)
assert [r["graph_launches"] for r in log] == [0] + [1] * (steps - 1), log
# One synchronization per step: the metrics come back before the next.
assert all(r["device_syncs"] == 1 for r in log), log
files = [stub] if mode == "single" else [stub + ".0", stub + ".1"]
for path in files:
    calls = json.load(open(path))
    assert calls["module_target"] == "sm_90", calls
    assert calls["cuModuleLoadData"] == 1, calls
    assert calls["cuStreamBeginCapture"] == 1 and calls["cuGraphInstantiate"] == 1, calls
    assert calls["cuGraphLaunch"] == steps - 1, calls
    # The direct first step and the capture launch the same kernels.
    assert calls["cuLaunchKernel"] == calls["captured_launches"] > 0, calls
    # The GEMMs of the direct step, micro-batch by micro-batch: the same
    # products, the weight gradients starting from zero on the first only.
    betas = calls["gemm_betas"].split()
    micro_batches = int(sys.argv[4])
    per = len(betas) // micro_batches
    assert per == 8 and len(betas) == per * micro_batches, (betas, micro_batches)
    chunks = [betas[i * per:(i + 1) * per] for i in range(micro_batches)]
    assert all(chunk == chunks[1] for chunk in chunks[1:]), chunks
    restarted = [i for i in range(per) if chunks[0][i] == "0" and chunks[1][i] == "1"]
    assert len(restarted) == 3, chunks  # one per weight matrix
    assert calls["captured_gemms"] == len(betas), calls
    assert calls["cublasLtMatmulAlgoGetHeuristic"] <= per, calls
    assert calls["bad_layouts"] == 0, calls
    if mode == "parallel":
        assert calls["ncclCommInitRank"] == 1, calls
        assert calls["ncclAllReduce"] == 1 and calls["captured_all_reduces"] == 1, calls
if mode == "parallel":
    assert all(r["all_reduces"] == 1 for r in log), log
print("ok: %d steps, %s" % (steps, json.load(open(files[0]))))
