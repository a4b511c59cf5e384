"""What the GPU check runs, shared by prepare.py (on the development machine:
exports, compiles, CPU references) and check.py (on the GPU machine).

The bundle prepare.py writes (default .gpu/, git-ignored) holds everything
check.py needs and nothing the GPU machine cannot run: accrue-train (no MLIR,
CUDA or MPI linked), compiled artifacts, data, and reference results computed
here. The models are the test suite's (test/e2e/models/zoo.py), which travel
with the repository.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e", "models"))

# Equivalence: 3 optimizer steps of AdamW with global-norm clipping, an
# effective batch of 32 samples as 4 micro-batches of 8 (and as 1 of 32).
STEPS, B, K = 3, 8, 4
LR, WD, CLIP = 0.01, 0.01, 0.5
ADAMW = dict(optimizer="adamw", lr=LR, weight_decay=WD, clip_norm=CLIP)

# name: (zoo constructor, its arguments, samples)
MODELS = {
    "mlp": ("MSEMLP", dict(seed=1)),
    "cnn": ("CNN", dict(seed=2)),
    "gpt": ("GPT", dict(seed=3, loss="masked")),
}

# fp16 with dynamic loss scaling, the scale growing every 2 finite steps; an
# input of 1e5 (infinite in fp16) in the third window makes that step's
# gradient overflow: it is skipped and the scale backs off.
FP16_STEPS = 8
FP16_SCALE = dict(init=1024.0, growth=2.0, backoff=0.5, interval=2)
FP16_OVERFLOW_STEP = 2

# Performance: the bench's GPTs (bench/compile_gpt.py), bf16, AdamW fused
# with clipping, micro-batch 8 x 4.
GPTS = {
    "gpt10m": dict(vocab=8192, d=320, heads=5, layers=6, block=128),
    "gpt100m": dict(vocab=16384, d=768, heads=12, layers=12, block=256),
}
BENCH_B, BENCH_K = 8, 4
BENCH_WARMUP, BENCH_STEPS = 5, 20
BENCH_LR = 3e-4


def loss_scale_flag(scale):
    return "dynamic:init=%g,growth=%g,backoff=%g,interval=%d" % (
        scale["init"], scale["growth"], scale["backoff"], scale["interval"])


def make(name, **overrides):
    """A fresh module of model `name` (its initial parameters are fixed by
    its seed)."""
    import zoo
    cls, args = MODELS[name]
    return getattr(zoo, cls)(**dict(args, **overrides))


def gpt(name):
    import zoo
    return zoo.GPT(0, tied=True, **GPTS[name])


def item_count(name, inputs):
    """How many items a micro-batch's mean loss averages over (the exact
    normalization divides the window's summed loss by the window's count)."""
    if name.startswith("gpt"):
        return int((inputs["targets"] != -100).sum())
    if name == "mlp":
        return inputs["t"].size
    return len(next(iter(inputs.values())))
