"""Accrue: compile an ONNX model whose graph computes a loss into a training
step with exact gradient accumulation, and train it.

    import accrue
    art = accrue.compile("model.onnx", "step", micro_batch=8,
                         accumulation_steps=4, optimizer="adamw", lr=1e-3,
                         clip_norm=1.0)
    sess = accrue.Session(art, checkpoint_dir="ck")
    metrics = sess.train({"x": x, "y": y}, steps=100)
    sess.export("trained.onnx")

Keywords are accrue-compile's and accrue-train's settings (their flags with
'_' for '-'); an unknown keyword raises TypeError. Bad data raises
ValueError before anything runs; everything else raises AccrueError (a
RuntimeError) with the library's message.
"""
import json
import os
import warnings

import numpy as np

from . import _accrue
from ._accrue import AccrueError

__all__ = ["AccrueError", "Artifact", "Session", "compile", "compile_torch",
           "export_torch"]

_COMPILE_SETTINGS = dict(_accrue.compile_settings())
_SESSION_SETTINGS = list(_accrue.session_settings())


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _check_keywords(function, given, known):
    for name in given:
        if name not in known:
            raise TypeError("%s() got an unexpected keyword argument '%s' (settings: %s)"
                            % (function, name, ", ".join(sorted(known))))


class Artifact:
    """A compiled training step (the directory accrue-compile writes)."""

    def __init__(self, directory):
        self.path = os.fspath(directory)
        self._handle = _accrue.Artifact(self.path)

    @property
    def micro_batch(self):
        return self._handle.micro_batch

    @property
    def inputs(self):
        """[(name, dtype, shape)] of the batch inputs; -1 marks the samples."""
        return self._handle.inputs

    @property
    def parameters(self):
        """{name: shape} of the trained parameters (ONNX names)."""
        return dict(self._handle.parameters)

    @property
    def memory_plan(self):
        """The memory plan (compiled with plan="text" or "json", or with
        memory_budget) as a dict of bytes and batch sizes, or None."""
        plan = self._handle.memory_plan
        return json.loads(plan) if plan is not None else None

    @property
    def kernel_report(self):
        """The kernel report of a CUDA artifact compiled with
        kernel_report="text" or "json" (kernels, their launches and memory
        accesses, GEMM calls; see docs/cuda.md) as a dict, or None."""
        report = self._handle.kernel_report
        return json.loads(report) if report is not None else None

    @property
    def buffers(self):
        """{name: shape} of the model's buffers (BatchNormalization's running
        statistics), which the step updates but does not train."""
        return dict(self._handle.buffers)

    def __repr__(self):
        return "accrue.Artifact(%r)" % self.path


def compile(model, output, **settings):
    """Compiles `model` (a path, or the bytes of a .onnx file) into the
    artifact directory `output` with accrue-compile's settings as keywords
    (micro_batch is required unless memory_budget chooses it); returns the
    Artifact. Warnings of the compiler become Python warnings."""
    _check_keywords("compile", settings, _COMPILE_SETTINGS)
    if not isinstance(model, (bytes, bytearray)):
        model = os.fspath(model)
    else:
        model = bytes(model)
    diagnostics = _accrue.compile(model, os.fspath(output),
                                  [(k, _text(v)) for k, v in settings.items()])
    for severity, message in diagnostics:
        if severity == "warning":
            warnings.warn(message, stacklevel=2)
    return Artifact(output)


def _float_kind(dtype):
    return dtype.startswith("f")


def _checked(artifact, data):
    """The arrays of `data` the artifact reads, checked (ValueError)."""
    if not isinstance(data, dict):
        raise ValueError("data must be a dict of numpy arrays (samples on axis 0), got %s"
                         % type(data).__name__)
    arrays, samples = {}, None
    names = [name for name, _, _ in artifact.inputs]
    for name, dtype, shape in artifact.inputs:
        if name not in data:
            raise ValueError("the data has no array '%s' (the model's batch inputs: %s)"
                             % (name, ", ".join(names)))
        array = data[name]
        if hasattr(array, "detach"):  # a torch tensor
            array = array.detach().cpu().numpy()
        array = np.asarray(array) if not isinstance(array, np.ndarray) else array
        if array.ndim != len(shape) or tuple(array.shape[1:]) != tuple(shape[1:]):
            raise ValueError("array '%s' has shape %s; the model takes %s"
                             % (name, tuple(array.shape),
                                tuple("N" if d < 0 else d for d in shape)))
        if not array.dtype.isnative:
            # A big-endian array ('>f4', '>i8'): Accrue reads this machine's
            # byte order, so convert it (its values, not its bytes).
            array = array.astype(array.dtype.newbyteorder("="))
        if array.dtype in (np.int8, np.int16, np.uint16):
            # Narrow integers widen to int32, as the .npz reader does.
            array = array.astype(np.int32)
        if _float_kind(dtype) != (array.dtype.kind == "f"):
            raise ValueError("array '%s' has dtype %s; the model takes %s"
                             % (name, array.dtype, dtype))
        if not array.flags["C_CONTIGUOUS"]:
            raise ValueError("array '%s' is not C-contiguous (np.ascontiguousarray makes "
                             "a contiguous copy)" % name)
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            raise ValueError("array '%s' contains NaN or infinity" % name)
        if samples is not None and array.shape[0] != samples:
            raise ValueError("array '%s' has %d samples, the others %d"
                             % (name, array.shape[0], samples))
        samples = array.shape[0]
        arrays[name] = array
    return arrays


_PROCESS_GROUP = []


def _use_process_group(group):
    """A data-parallel session's collectives from a torch.distributed
    process group (gloo or mpi on the CPU): its all-reduce sums the step's
    accumulator, its broadcast carries the first parameters (and on GPUs
    NCCL's id); a sharded optimizer state's reduce-scatter and all-gather
    are its reduces and broadcasts, one per shard. Rank and size are the
    group's. One group per process."""
    import weakref

    import torch
    import torch.distributed as dist
    if _PROCESS_GROUP:
        if _PROCESS_GROUP[0]() is not group:
            raise ValueError("this process's sessions already use another process group")
        return
    source = dist.get_global_rank(group, 0) if hasattr(dist, "get_global_rank") \
        else dist.distributed_c10d._get_global_rank(group, 0)
    # The collectives outlive any session; they hold the group weakly, so
    # that destroy_process_group() ends it as it would without Accrue.
    held = weakref.ref(group)

    def alive():
        group = held()
        if group is None:
            raise RuntimeError("the process group was destroyed")
        return group

    def total(array):
        dist.all_reduce(torch.from_numpy(array), op=dist.ReduceOp.SUM, group=alive())

    def extremum(array, largest):
        dist.all_reduce(torch.from_numpy(array),
                        op=dist.ReduceOp.MAX if largest else dist.ReduceOp.MIN, group=alive())

    def broadcast(array):
        dist.broadcast(torch.from_numpy(array), src=source, group=alive())

    def shards(array, counts):
        """(global rank, view) of each nonempty shard, in rank order."""
        group, begin, views = alive(), 0, []
        tensor = torch.from_numpy(array)
        for rank, count in enumerate(counts):
            if count:
                views.append((dist.get_global_rank(group, rank) if hasattr(
                    dist, "get_global_rank") else dist.distributed_c10d._get_global_rank(
                        group, rank), tensor[begin:begin + count]))
            begin += count
        return group, views

    # A sharded optimizer state's collectives: one reduce to each shard's
    # owner (a reduce-scatter of unequal shards), one broadcast from each
    # owner (an all-gather).
    def reduce_scatter(array, counts):
        group, views = shards(array, counts)
        for owner, view in views:
            dist.reduce(view, dst=owner, op=dist.ReduceOp.SUM, group=group)

    def all_gather(array, counts):
        group, views = shards(array, counts)
        for owner, view in views:
            dist.broadcast(view, src=owner, group=group)

    _accrue.set_collectives(dist.get_rank(group), dist.get_world_size(group), total, extremum,
                            broadcast, reduce_scatter, all_gather)
    _PROCESS_GROUP.append(held)


class Session:
    """A training run of an artifact: parameters, optimizer state, the step
    count and the data position, as accrue-train keeps them. Keywords are
    accrue-train's settings (accumulation_steps, lr, lr_schedule,
    warmup_steps, total_steps, checkpoint_dir, checkpoint_every,
    keep_checkpoints, log, device, drop_last, threads, ...).
    `process_group`: a torch.distributed process group whose collectives a
    data-parallel artifact's ranks use (instead of MPI or Gloo)."""

    def __init__(self, artifact, process_group=None, **options):
        if "steps" in options:
            raise TypeError("Session() takes the number of steps in train(data, steps=N)")
        if process_group is not None:
            _use_process_group(process_group)
        _check_keywords("Session", options, _SESSION_SETTINGS)
        self.artifact = artifact if isinstance(artifact, Artifact) else Artifact(artifact)
        self._options = [(k, _text(v)) for k, v in options.items()]
        # Fail now, not at the first train(): settings that exclude each
        # other, an artifact deleted or damaged since it was opened.
        _accrue.check_session(self.artifact._handle, self._options)
        self._session = None
        self._closed = False

    @classmethod
    def resume(cls, artifact, checkpoint_dir, **options):
        """A session that continues from the newest checkpoint in
        `checkpoint_dir` when it first trains (with the data and settings
        the checkpoint was written with)."""
        return cls(artifact, checkpoint_dir=os.fspath(checkpoint_dir), resume=True,
                   **options)

    @property
    def steps(self):
        """Optimizer steps (windows of data) run so far."""
        return self._session.iterations if self._session else 0

    def train(self, data, steps=None):
        """Trains on `data`: a dict of numpy arrays (samples on axis 0, one
        per batch input), or an iterable of such dicts, each trained from
        its first window. Runs `steps` optimizer steps in all (default: one
        pass over each dict). Returns the steps' metrics as dicts with the
        keys of metrics.jsonl."""
        chunks = [data] if isinstance(data, dict) else data
        records = []
        if self._closed:
            raise RuntimeError("the session is closed")
        for chunk in chunks:
            if steps is not None and len(records) >= steps:
                break
            arrays = _checked(self.artifact, chunk)
            if self._session is None:
                self._session = _accrue.Session(self.artifact._handle, arrays,
                                                self._options)
            else:
                self._session.set_data(arrays)
            left = self._session.steps_left_in_pass
            count = left if steps is None else steps - len(records)
            self._session.plan_steps(self._session.iterations + count)
            while self._session.iterations < self._session.planned_steps:
                records.append(json.loads(self._session.step()))
        return records

    def close(self):
        """Ends the run: releases its checkpoint_dir (which another session
        may then write, or resume from) and its memory. Also on leaving a
        `with` block."""
        self._session = None
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _require(self):
        if self._session is None:
            raise RuntimeError(
                "the session is closed" if self._closed
                else "the session has not trained yet: call train() first")
        return self._session

    def parameters(self):
        """{name: numpy array} of the current parameters (ONNX names)."""
        session = self._require()
        return {name: session.parameter(name, shape)
                for name, shape in self.artifact.parameters.items()}

    def buffers(self):
        """{name: numpy array} of the model's buffers: the running mean and
        variance of training-mode BatchNormalization nodes (ONNX names)."""
        session = self._require()
        return {name: session.parameter(name, shape)
                for name, shape in self.artifact.buffers.items()}

    def save_checkpoint(self, path=None):
        """Writes a checkpoint: to `path`, or to the checkpoint_dir setting's
        folder (rotated like accrue-train's)."""
        session = self._require()
        if path is None:
            session.save_checkpoint()
        else:
            session.save_checkpoint_to(os.fspath(path))

    def export(self, path):
        """Writes the artifact's ONNX model with the trained parameters."""
        self._require().export(os.fspath(path))

    def save_gradients(self, path):
        """Writes the gradient accumulator, by parameter, as .npz."""
        self._require().save_gradients(os.fspath(path))

    def save_kernel_profile(self, path):
        """Writes the counted kernels' memory profile of the steps run so far
        as JSON (artifacts compiled with count_accesses=True for target
        "cuda-emulated")."""
        self._require().save_kernel_profile(os.fspath(path))


def export_torch(module, example, path, opset=None, exporter="auto"):
    """Exports a torch.nn.Module whose forward takes the arrays of `example`
    (a dict of numpy arrays or tensors, in the forward's order, or a tuple
    of them, named after the forward's parameters) and returns the loss, in
    training mode with a dynamic batch axis, to `path`. Parameters keep the
    module's state_dict names (an initializer the exporter named otherwise
    is renamed after the entry holding its values).

    `exporter`: "dynamo" (PyTorch 2's torch.export-based exporter, opset 20
    by default), "torchscript" (the TorchScript exporter, opset 17 by
    default; PyTorch 1.x has only this one) or "auto": dynamo where
    torch.onnx.export has it, the TorchScript exporter where not, or where
    the dynamo export fails (it says so). The dynamo export runs with
    optimize=False: its default optimizations fold position embeddings into
    constants and merge parameters that are equal at initialization (every
    LayerNorm scale), which training cannot take."""
    return _export_torch(module, example, path, opset, exporter)[0]


def _example_inputs(module, example):
    """The input names and arrays of an example: a dict's keys, or for a
    tuple (or list) of tensors or arrays, the names of the forward's
    positional parameters it fills."""
    import inspect
    if isinstance(example, dict):
        return list(example), [example[n] for n in example]
    if not isinstance(example, (tuple, list)):
        raise TypeError("example must be a dict of arrays (input name -> array) or a "
                        "tuple of arrays in the forward's order, not %s"
                        % type(example).__name__)
    parameters = [p for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(parameters) < len(example):
        raise TypeError("example has %d arrays but %s.forward takes %d positional inputs"
                        % (len(example), type(module).__name__, len(parameters)))
    return [p.name for p in parameters[:len(example)]], list(example)


def _state_dict_names(module, path):
    """Renames the initializers of the exported `path` that are not named
    after the module's state_dict (an exporter's generated names) to the
    state_dict entry holding the same values, where exactly one does, so
    that parameters keep the module's names."""
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        return
    import torch
    state = {k: v for k, v in module.state_dict().items()
             if isinstance(v, torch.Tensor) and v.is_floating_point()}
    model = onnx.load(path)
    renames = {}
    taken = {t.name for t in model.graph.initializer}
    for tensor in model.graph.initializer:
        if tensor.name in state or tensor.data_type not in (
                onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
                onnx.TensorProto.BFLOAT16):
            continue
        shape = tuple(tensor.dims)
        candidates = [k for k, v in state.items() if k not in taken and tuple(v.shape) == shape]
        if not candidates:
            continue
        value = numpy_helper.to_array(tensor).astype(np.float64)
        matches = [k for k in candidates
                   if np.array_equal(state[k].detach().double().cpu().numpy(), value)]
        if len(matches) == 1:
            renames[tensor.name] = matches[0]
            taken.add(matches[0])
    if not renames:
        return
    for tensor in model.graph.initializer:
        tensor.name = renames.get(tensor.name, tensor.name)
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            if name in renames:
                node.input[i] = renames[name]
    for info in list(model.graph.input) + list(model.graph.value_info):
        info.name = renames.get(info.name, info.name)
    # A new file (and its tensor data beside it, where the export had that),
    # then renamed over the export.
    folder = os.path.dirname(os.path.abspath(path))
    temporary = os.path.join(folder, ".accrue-rename-" + os.path.basename(path))
    if os.path.exists(path + ".data"):
        location = os.path.basename(temporary) + ".data"
        onnx.save(model, temporary, save_as_external_data=True, all_tensors_to_one_file=True,
                  location=location)
        os.replace(os.path.join(folder, location), path + ".data")
        # The model names its data file: point it at the final name.
        renamed = onnx.load(temporary, load_external_data=False)
        for tensor in renamed.graph.initializer:
            for entry in tensor.external_data:
                if entry.key == "location":
                    entry.value = os.path.basename(path) + ".data"
        onnx.save(renamed, temporary)
    else:
        onnx.save(model, temporary)
    os.replace(temporary, path)


def _export_torch(module, example, path, opset=None, exporter="auto"):
    """export_torch, and whether the dynamo exporter wrote the file."""
    import inspect
    import warnings

    import torch
    names, arrays = _example_inputs(module, example)
    inputs = tuple(torch.as_tensor(np.asarray(a)[:2]) for a in arrays)
    module.train()
    path = os.fspath(path)
    has_dynamo = "dynamo" in inspect.signature(torch.onnx.export).parameters
    if exporter not in ("auto", "dynamo", "torchscript"):
        raise ValueError("exporter must be 'auto', 'dynamo' or 'torchscript', "
                         "not %r" % (exporter,))
    if exporter == "dynamo" and not has_dynamo:
        raise ValueError("exporter='dynamo' needs PyTorch 2's torch.onnx.export "
                         "(this is PyTorch %s)" % torch.__version__)
    exported = False
    if exporter != "torchscript" and has_dynamo:
        batch = torch.export.Dim("batch", min=1)
        try:
            torch.onnx.export(module, inputs, path, dynamo=True, optimize=False,
                              opset_version=opset or 20, input_names=names,
                              output_names=["loss"],
                              dynamic_shapes=tuple({0: batch} for _ in names))
            exported = True
        except Exception as err:  # torch.export's own failures vary by model
            if exporter == "dynamo":
                raise
            warnings.warn("accrue.export_torch: the dynamo exporter failed (%s: %s); "
                          "exporting with the TorchScript exporter"
                          % (type(err).__name__, str(err).splitlines()[0][:200]))
    if exported:
        _state_dict_names(module, path)
        return path, True
    kwargs = {"dynamo": False} if has_dynamo else {}
    torch.onnx.export(module, inputs, path, input_names=names,
                      output_names=["loss"],
                      dynamic_axes={n: {0: "batch"} for n in names},
                      opset_version=opset or 17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, **kwargs)
    _state_dict_names(module, path)
    return path, False


def _torchscript_buffers(module):
    """A --freeze regex of the module's float buffers other than
    BatchNormalization's statistics (which Accrue keeps as buffers itself):
    the TorchScript exporter writes buffers as initializers without a mark,
    and Accrue trains every float initializer it is not told to keep."""
    import re

    import torch
    statistics = set()
    for prefix, sub in module.named_modules():
        if isinstance(sub, torch.nn.modules.batchnorm._BatchNorm):
            statistics.update((prefix + "." if prefix else "") + n
                              for n, _ in sub.named_buffers(recurse=False))
    names = [n for n, b in module.named_buffers()
             if b.is_floating_point() and n not in statistics]
    return "|".join(re.escape(n) for n in names)


def compile_torch(module, example, output, opset=None, exporter="auto", **settings):
    """export_torch then compile: a PyTorch module to a compiled step in one
    call (the ONNX file is kept as `output`.onnx). Through the TorchScript
    exporter, the module's float buffers are kept constant (added to
    `freeze`); the dynamo exporter marks them itself."""
    path, dynamo = _export_torch(module, example, os.fspath(output) + ".onnx", opset,
                                 exporter)
    buffers = "" if dynamo else _torchscript_buffers(module)
    if buffers:
        given = settings.get("freeze")
        settings["freeze"] = buffers if not given else "%s|%s" % (given, buffers)
    return compile(path, output, **settings)
