"""Checks the calls a CUDA run made (the stub driver's log) and its metrics
(for cuda_runtime.test)."""
import json
import sys

mode, stub, metrics = sys.argv[1:4]
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
    if mode == "parallel":
        assert calls["ncclCommInitRank"] == 1, calls
        assert calls["ncclAllReduce"] == 1 and calls["captured_all_reduces"] == 1, calls
if mode == "parallel":
    assert all(r["all_reduces"] == 1 for r in log), log
print("ok: %d steps, %s" % (steps, json.load(open(files[0]))))
