"""The Python package (python/accrue) against the command-line tools: the
same compiled step and the same training, bit for bit; its checks of data
and keywords; checkpoints; PyTorch modules."""
import json
import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import accrue
from conftest import SPIRALS, run, tool

FLAGS = dict(micro_batch=16, accumulation_steps=2, optimizer="adamw", lr=0.01,
             weight_decay=0.01, clip_norm=1.0)


def cli_flags(settings):
    flags = []
    for name, value in settings.items():
        flags += ["--" + name.replace("_", "-"), str(value)]
    return flags


def initializers(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def assert_same(params, reference):
    assert params.keys() == reference.keys()
    for name, value in reference.items():
        assert params[name].dtype == value.dtype and params[name].shape == value.shape
        assert params[name].tobytes() == value.tobytes(), name


def cli_train(tmp_path, model, data_path, steps, settings, extra=()):
    art = tmp_path / "cli_art"
    run(tool("accrue-compile"), model, "-o", art, *cli_flags(settings))
    out = tmp_path / "cli.onnx"
    run(tool("accrue-train"), art, "--data", data_path, "--steps", steps, "--export", out,
        "--no-progress", *extra)
    return initializers(out)


def test_spirals_bit_identical_to_accrue_train(tmp_path, spirals):
    model = os.path.join(SPIRALS, "model.onnx")
    art = accrue.compile(model, tmp_path / "art", **FLAGS)
    assert art.micro_batch == 16
    assert [name for name, _, _ in art.inputs] == ["x", "y"]
    session = accrue.Session(art)
    metrics = session.train(spirals, steps=7)
    assert [m["step"] for m in metrics] == list(range(1, 8))
    assert all(np.isfinite(m["loss"]) for m in metrics)
    want = cli_train(tmp_path, model, os.path.join(SPIRALS, "data.npz"), 7, FLAGS)
    assert_same(session.parameters(), want)
    # The export is the same model with those parameters.
    session.export(tmp_path / "py.onnx")
    assert_same(initializers(tmp_path / "py.onnx"), want)


def test_cuda_emulated_trains_from_python(tmp_path, spirals):
    """A CUDA artifact's step.so calls the runtime's GEMM entry by name,
    which the extension (imported RTLD_LOCAL) makes visible to it: the
    emulated target trains from Python to accrue-train's parameters."""
    model = os.path.join(SPIRALS, "model.onnx")
    settings = dict(FLAGS, target="cuda-emulated")
    session = accrue.Session(accrue.compile(model, tmp_path / "art", **settings))
    session.train(spirals, steps=3)
    want = cli_train(tmp_path, model, os.path.join(SPIRALS, "data.npz"), 3, settings)
    assert_same(session.parameters(), want)


def test_gpt_from_pytorch_bit_identical(tmp_path):
    import zoo
    module = zoo.GPT(3)
    data = module.data(64, np.random.default_rng(0))
    np.savez(tmp_path / "gpt.npz", **data)
    settings = dict(FLAGS, micro_batch=4)
    art = accrue.compile_torch(module, data, tmp_path / "gpt", **settings)
    session = accrue.Session(art)
    session.train(data, steps=5)
    want = cli_train(tmp_path, str(tmp_path / "gpt.onnx"), tmp_path / "gpt.npz", 5, settings)
    assert_same(session.parameters(), want)


def test_batchnorm_buffers(tmp_path):
    """The running statistics of training-mode BatchNorm are the artifact's
    buffers: named and shaped, read after training, equal to what
    accrue-train exports (parameters too)."""
    import zoo
    module = zoo.BatchNormCNN(1)
    data = module.data(32, np.random.default_rng(0))
    np.savez(tmp_path / "bn.npz", **data)
    settings = dict(FLAGS, micro_batch=4)
    art = accrue.compile_torch(module, data, tmp_path / "bn", **settings)
    assert art.buffers == {"bn2d.running_mean": [4], "bn2d.running_var": [4],
                           "bn1d.running_mean": [6], "bn1d.running_var": [6]}
    assert not set(art.buffers) & set(art.parameters)
    session = accrue.Session(art)
    session.train(data, steps=3)
    want = cli_train(tmp_path, str(tmp_path / "bn.onnx"), tmp_path / "bn.npz", 3, settings)
    buffers = session.buffers()
    start = initializers(tmp_path / "bn.onnx")
    for name, value in buffers.items():
        assert np.abs(value - start[name]).max() > 1e-3, name
    assert_same({**session.parameters(), **buffers},
                {k: v for k, v in want.items() if k in art.parameters or k in art.buffers})


def test_memory_plan(tmp_path):
    """The plan an artifact was compiled with, as accrue-compile --plan=json
    printed it into step.json; None without one."""
    model = os.path.join(SPIRALS, "model.onnx")
    planned = accrue.compile(model, tmp_path / "planned", plan="json", **FLAGS)
    with open(tmp_path / "planned" / "step.json") as f:
        assert planned.memory_plan == json.load(f)["memory_plan"]
    plan = planned.memory_plan
    assert plan["micro_batch"] == 16 and plan["accumulation_steps"] == 2
    assert plan["activation_bytes_per_sample"] > 0
    assert plan["peak_bytes"] == (plan["static_bytes"] + plan["activation_fixed_bytes"]
                                  + 16 * plan["activation_bytes_per_sample"]
                                  + 32 * plan["input_bytes_per_sample"])
    assert accrue.compile(model, tmp_path / "plain", **FLAGS).memory_plan is None


def test_kernel_report(tmp_path):
    """A CUDA artifact compiled with kernel_report carries the report
    (through the C API's accrueArtifactKernelReport), as step.json holds
    it; None without one; the CPU target refuses the setting."""
    model = os.path.join(SPIRALS, "model.onnx")
    art = accrue.compile(model, tmp_path / "cuda", target="cuda-emulated",
                         kernel_report="json", **FLAGS)
    with open(tmp_path / "cuda" / "step.json") as f:
        assert art.kernel_report == json.load(f)["kernel_report"]
    report = art.kernel_report
    assert report["accumulation_steps"] == 2
    assert report["totals"]["kernels"] == len(report["kernels"]) > 0
    assert all(k["name"].startswith("k%d_" % i) for i, k in enumerate(report["kernels"]))
    assert accrue.compile(model, tmp_path / "plain", target="cuda-emulated",
                          **FLAGS).kernel_report is None
    with pytest.raises(Exception, match="kernel_report"):
        accrue.compile(model, tmp_path / "cpu", kernel_report="text", **FLAGS)


def test_kernel_profile(tmp_path, spirals):
    """An emulated artifact compiled with count_accesses writes the profile
    of its counted kernels from Python as accrue-train does; one compiled
    without refuses, naming the setting."""
    model = os.path.join(SPIRALS, "model.onnx")
    art = accrue.compile(model, tmp_path / "counted", target="cuda-emulated",
                         count_accesses=True, **FLAGS)
    session = accrue.Session(art)
    session.train(spirals, steps=3)
    session.save_kernel_profile(tmp_path / "py.json")
    run(tool("accrue-train"), art.path, "--data", os.path.join(SPIRALS, "data.npz"),
        "--steps", 3, "--no-progress", "--kernel-profile", tmp_path / "cli.json")
    with open(tmp_path / "py.json") as py, open(tmp_path / "cli.json") as cli:
        text = py.read()
        assert text == cli.read()
    profile = json.loads(text)
    assert profile["steps"] == 3 and profile["totals"]["accesses"] > 0
    plain = accrue.Session(accrue.compile(model, tmp_path / "plain", target="cuda-emulated",
                                          **FLAGS))
    plain.train(spirals, steps=1)
    with pytest.raises(Exception, match="count_accesses"):
        plain.save_kernel_profile(tmp_path / "none.json")


def test_memory_budget_chooses_the_micro_batch(tmp_path):
    """memory_budget without micro_batch: a micro-batch whose planned peak
    (from the step measured at b) fits, the one accrue-compile chooses."""
    model = os.path.join(SPIRALS, "model.onnx")
    budget = 1 << 20
    art = accrue.compile(model, tmp_path / "budget", memory_budget=str(budget), plan="json")
    plan = art.memory_plan
    b, k = art.micro_batch, plan["accumulation_steps"]
    assert b == plan["micro_batch"] and b > 1 and k == 1

    def peak(n):
        return (plan["static_bytes"] + plan["activation_fixed_bytes"]
                + n * plan["activation_bytes_per_sample"] + n * k * plan["input_bytes_per_sample"])
    assert plan["peak_bytes"] == peak(b) <= budget
    run(tool("accrue-compile"), model, "-o", tmp_path / "cli", "--memory-budget", str(budget))
    assert accrue.Artifact(tmp_path / "cli").micro_batch == b


def test_narrow_integer_labels(tmp_path, spirals):
    """int8 and int16 labels train exactly like int64 ones (widened)."""
    model = os.path.join(SPIRALS, "model.onnx")
    art = accrue.compile(model, tmp_path / "art", **FLAGS)
    results = []
    for dtype in (np.int64, np.int16, np.int8):
        session = accrue.Session(art)
        session.train({"x": spirals["x"], "y": spirals["y"].astype(dtype)}, steps=3)
        results.append(session.parameters())
    assert_same(results[1], results[0])
    assert_same(results[2], results[0])


def test_iterable_of_batches(tmp_path, spirals):
    """Two chunks, each trained from its first window, equal one pass over
    their concatenation when each holds whole effective batches."""
    model = os.path.join(SPIRALS, "model.onnx")
    art = accrue.compile(model, tmp_path / "art", **FLAGS)
    n = 32 * 4
    first = {k: v[:n] for k, v in spirals.items()}
    second = {k: v[n:2 * n] for k, v in spirals.items()}
    session = accrue.Session(art)
    metrics = session.train(iter([first, second]))
    assert len(metrics) == 8 and session.steps == 8
    both = {k: np.concatenate([first[k], second[k]]) for k in spirals}
    np.savez(tmp_path / "both.npz", **both)
    assert_same(session.parameters(),
                cli_train(tmp_path, model, tmp_path / "both.npz", 8, FLAGS))
    # steps caps the total across chunks.
    capped = accrue.Session(art)
    assert len(capped.train([first, second], steps=5)) == 5


def test_checkpoint_and_resume_bit_identical(tmp_path, spirals):
    model = os.path.join(SPIRALS, "model.onnx")
    art = accrue.compile(model, tmp_path / "art", **FLAGS)
    straight = accrue.Session(art)
    straight.train(spirals, steps=5)
    first = accrue.Session(art, checkpoint_dir=tmp_path / "ck")
    first.train(spirals, steps=3)
    first.save_checkpoint(tmp_path / "explicit.safetensors")
    assert (tmp_path / "explicit.safetensors").exists()
    first.close()  # releases the folder
    resumed = accrue.Session.resume(art, tmp_path / "ck")
    metrics = resumed.train(spirals, steps=2)
    assert [m["step"] for m in metrics] == [4, 5]
    assert_same(resumed.parameters(), straight.parameters())


def test_bad_data_raises_value_error(tmp_path, spirals):
    art = accrue.compile(os.path.join(SPIRALS, "model.onnx"), tmp_path / "art", **FLAGS)
    session = accrue.Session(art)
    with pytest.raises(ValueError, match="no array 'y'"):
        session.train({"x": spirals["x"]})
    with pytest.raises(ValueError, match="array 'x' has dtype int64; the model takes f32"):
        session.train({"x": spirals["x"].astype(np.int64), "y": spirals["y"]})
    with pytest.raises(ValueError, match=r"array 'x' has shape \(\d+, 3\)"):
        session.train({"x": np.zeros((len(spirals["y"]), 3), np.float32), "y": spirals["y"]})
    with pytest.raises(ValueError, match="not C-contiguous"):
        session.train({"x": np.asfortranarray(spirals["x"]), "y": spirals["y"]})
    bad = spirals["x"].copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        session.train({"x": bad, "y": spirals["y"]})
    with pytest.raises(ValueError, match="samples"):
        session.train({"x": spirals["x"][:-1], "y": spirals["y"]})
    # Nothing ran.
    assert session.steps == 0


def test_unknown_keywords_raise_type_error(tmp_path):
    model = os.path.join(SPIRALS, "model.onnx")
    with pytest.raises(TypeError, match="unexpected keyword argument 'micro_bach'"):
        accrue.compile(model, tmp_path / "art", micro_bach=16)
    art = accrue.compile(model, tmp_path / "art", micro_batch=16)
    with pytest.raises(TypeError, match="unexpected keyword argument 'learning_rate'"):
        accrue.Session(art, learning_rate=0.1)


def test_library_errors(tmp_path, spirals):
    model = os.path.join(SPIRALS, "model.onnx")
    with pytest.raises(accrue.AccrueError, match="micro_batch is required"):
        accrue.compile(model, tmp_path / "art")
    with pytest.raises(accrue.AccrueError, match="optimizer must be"):
        accrue.compile(model, tmp_path / "art", micro_batch=16, optimizer="adamz")
    with pytest.raises(accrue.AccrueError, match="not a valid ONNX model"):
        accrue.compile(b"\x08\x01garbage", tmp_path / "art", micro_batch=16)
    assert not (tmp_path / "art").exists()
    with pytest.raises(accrue.AccrueError):
        accrue.Artifact(tmp_path / "nothing")
    art = accrue.compile(model, tmp_path / "art", micro_batch=16)
    # Settings are checked when the session is made, not at its first train().
    with pytest.raises(accrue.AccrueError, match="lr_schedule must be constant, linear or cosine"):
        accrue.Session(art, lr_schedule="sideways")
    with pytest.raises(accrue.AccrueError, match="resume needs checkpoint_dir"):
        accrue.Session(art, resume=True)
    assert isinstance(accrue.AccrueError("x"), RuntimeError)


def test_big_endian_arrays_train_like_native(tmp_path, spirals):
    """'>f4' and '>i8' arrays hold the same values as native ones: they
    train to the same bits (they used to be read as little-endian bytes)."""
    art = accrue.compile(os.path.join(SPIRALS, "model.onnx"), tmp_path / "art", **FLAGS)
    native = accrue.Session(art)
    native.train(spirals, steps=3)
    swapped = {k: v.astype(v.dtype.newbyteorder(">")) for k, v in spirals.items()}
    assert all(not v.dtype.isnative for v in swapped.values())
    other = accrue.Session(art)
    other.train(swapped, steps=3)
    assert_same(other.parameters(), native.parameters())


def test_out_of_range_labels_raise(tmp_path, spirals):
    """A label outside the loss's classes is refused before any step,
    naming the array, the sample and the value."""
    art = accrue.compile(os.path.join(SPIRALS, "model.onnx"), tmp_path / "art", **FLAGS)
    classes = int(spirals["y"].max()) + 1
    bad = dict(spirals, y=spirals["y"].copy())
    bad["y"][9] = classes
    session = accrue.Session(art)
    with pytest.raises(accrue.AccrueError,
                       match=r"array 'y' holds %d at sample 9, outside \[0, %d\)"
                       % (classes, classes)):
        session.train(bad, steps=1)
    assert session.steps == 0


def test_token_ids_past_the_vocabulary_raise(tmp_path):
    """A token id past the embedding's table used to train row 0 silently
    (the gather clamps); it is refused before any step."""
    import zoo
    module = zoo.GPT(3)
    data = module.data(16, np.random.default_rng(0))
    art = accrue.compile_torch(module, data, tmp_path / "gpt", **dict(FLAGS, micro_batch=4))
    bad = dict(data, idx=data["idx"].copy())
    bad["idx"][5, 2] = module.vocab
    with pytest.raises(accrue.AccrueError,
                       match=r"array 'idx' holds 17 at sample 5, outside \[-17, 17\): "
                       r"the values index the 17 rows of Gather node"):
        accrue.Session(art).train(bad, steps=1)


def test_one_session_per_checkpoint_dir(tmp_path, spirals):
    """A second session writing into a folder another one holds is
    refused, naming the folder and this process; once the first is gone,
    the folder is free again."""
    art = accrue.compile(os.path.join(SPIRALS, "model.onnx"), tmp_path / "art", **FLAGS)
    first = accrue.Session(art, checkpoint_dir=tmp_path / "ck")
    first.train(spirals, steps=1)
    second = accrue.Session(art, checkpoint_dir=tmp_path / "ck")
    with pytest.raises(accrue.AccrueError,
                       match="checkpoint_dir '.*ck' is in use by another run \\(process %d "
                       % os.getpid()):
        second.train(spirals, steps=1)
    first.close()
    with pytest.raises(RuntimeError, match="the session is closed"):
        first.parameters()
    with accrue.Session.resume(art, tmp_path / "ck") as third:
        assert [m["step"] for m in third.train(spirals, steps=1)] == [2]
    # Leaving the block released the folder again.
    fourth = accrue.Session.resume(art, tmp_path / "ck")
    assert [m["step"] for m in fourth.train(spirals, steps=1)] == [3]


def test_session_on_a_deleted_artifact_fails_at_creation(tmp_path):
    import shutil
    art = accrue.compile(os.path.join(SPIRALS, "model.onnx"), tmp_path / "art", **FLAGS)
    shutil.rmtree(tmp_path / "art")
    with pytest.raises(accrue.AccrueError, match="cannot read '.*art/step.so'"):
        accrue.Session(art)


def test_pip_install(tmp_path):
    """pip wheel . builds the package from the sources with CMake
    (scikit-build-core, in build-pip/; no scripts/build needed), and the
    wheel installs into a clean venv (numpy from PyPI), where it compiles
    and trains the spirals model to accrue-train's parameters, bit for
    bit, and trains a data-parallel step on 2 ranks launched as torchrun
    would (Gloo, through the libaccrue-gloo.so the wheel carries) to the
    parameters of one rank at twice the accumulation steps."""
    import glob
    import subprocess
    import sys
    from conftest import ROOT
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    pip = venv / "bin" / "pip"
    run(pip, "wheel", "--quiet", "--no-deps", "--disable-pip-version-check", "-w",
        tmp_path / "dist", ROOT)
    wheels = glob.glob(str(tmp_path / "dist" / "accrue-*.whl"))
    assert len(wheels) == 1, wheels
    run(pip, "install", "--quiet", "--disable-pip-version-check", wheels[0])
    model = os.path.join(SPIRALS, "model.onnx")
    code = ("import accrue, numpy as np, sys\n"
            "a = accrue.compile(sys.argv[1], sys.argv[2], micro_batch=16, "
            "accumulation_steps=2, optimizer='adamw', lr=0.01, weight_decay=0.01, "
            "clip_norm=1.0)\n"
            "s = accrue.Session(a)\n"
            "s.train(dict(np.load(sys.argv[3])), steps=5)\n"
            "np.savez(sys.argv[4], **s.parameters())\n"
            "print(accrue.__file__)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ACCRUE_BUILD_DIR")}
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", code, model,
                           str(tmp_path / "art"), os.path.join(SPIRALS, "data.npz"),
                           str(tmp_path / "params.npz")],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert str(venv) in proc.stdout
    want = cli_train(tmp_path, model, os.path.join(SPIRALS, "data.npz"), 5, FLAGS)
    assert_same(dict(np.load(tmp_path / "params.npz")), want)

    import socket
    import zipfile
    assert "accrue/libaccrue-gloo.so" in zipfile.ZipFile(wheels[0]).namelist()
    parallel = ("import accrue, numpy as np, sys\n"
                "a = accrue.compile(sys.argv[1], sys.argv[2] + sys.argv[4], micro_batch=8, "
                "accumulation_steps=2, data_parallel=True, optimizer='adamw', lr=0.01)\n"
                "s = accrue.Session(a, accumulation_steps=int(sys.argv[5]))\n"
                "s.train(dict(np.load(sys.argv[3])), steps=3)\n"
                "np.savez(sys.argv[2] + sys.argv[4] + '.npz', **s.parameters())\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    procs = [subprocess.Popen([str(venv / "bin" / "python"), "-c", parallel, model,
                               str(tmp_path / "dp"), os.path.join(SPIRALS, "data.npz"),
                               str(rank), "2"],
                              env=dict(env, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
                                       MASTER_ADDR="127.0.0.1", MASTER_PORT=port),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
             for rank in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    one = subprocess.run([str(venv / "bin" / "python"), "-c", parallel, model, str(tmp_path / "dp"),
                          os.path.join(SPIRALS, "data.npz"), "one", "4"],
                         capture_output=True, text=True, env=env, cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    ranks, alone = np.load(str(tmp_path / "dp0.npz")), np.load(str(tmp_path / "dpone.npz"))
    for name in alone.files:
        np.testing.assert_allclose(ranks[name], alone[name], rtol=1e-5, atol=1e-7)


def test_torch_example_as_tuple(tmp_path):
    """compile_torch takes the example as a tuple of arrays too, naming the
    inputs after the forward's parameters; anything else is a TypeError
    that says what it takes."""
    import zoo
    module = zoo.MSEMLP(1)
    data = module.data(16, np.random.default_rng(0))
    names = list(data)
    art = accrue.compile_torch(module, tuple(data.values()), tmp_path / "mlp",
                               **dict(FLAGS, micro_batch=4))
    assert [name for name, _, _ in art.inputs] == names
    accrue.Session(art).train(data, steps=1)
    with pytest.raises(TypeError, match="dict of arrays"):
        accrue.export_torch(module, data["x"], tmp_path / "bad.onnx")
    with pytest.raises(TypeError, match="takes 2 positional inputs"):
        accrue.export_torch(module, tuple(data.values()) * 2, tmp_path / "bad.onnx")


def test_exported_names_follow_the_state_dict(tmp_path):
    """An initializer an exporter named otherwise (onnx::MatMul_7) is
    renamed after the state_dict entry holding its values, in the graph's
    nodes too."""
    import torch
    module = torch.nn.Linear(3, 2)
    weight = module.weight.detach().numpy()
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 2])
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Gemm", ["x", "onnx::MatMul_7", "bias"], ["y"], transB=1)],
        "g", [x], [y],
        [numpy_helper.from_array(weight, "onnx::MatMul_7"),
         numpy_helper.from_array(module.bias.detach().numpy(), "bias")])
    path = str(tmp_path / "m.onnx")
    onnx.save(onnx.helper.make_model(graph), path)
    accrue._state_dict_names(module, path)
    renamed = onnx.load(path)
    assert [t.name for t in renamed.graph.initializer] == ["weight", "bias"]
    assert list(renamed.graph.node[0].input) == ["x", "weight", "bias"]
