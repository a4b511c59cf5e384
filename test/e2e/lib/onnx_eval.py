"""A small float64 evaluator for the ONNX operators the tests use.

Written from the operator specifications (onnx.ai/onnx/operators), not from
Accrue's lowering: it is the reference the gradient checks differentiate
numerically.
"""
import numpy as np
from onnx import numpy_helper


def _attrs(node):
    out = {}
    for a in node.attribute:
        if a.type == a.FLOAT:
            out[a.name] = a.f
        elif a.type == a.INT:
            out[a.name] = a.i
        elif a.type == a.INTS:
            out[a.name] = list(a.ints)
        elif a.type == a.STRING:
            out[a.name] = a.s.decode()
        elif a.type == a.TENSOR:
            out[a.name] = numpy_helper.to_array(a.t)
    return out


def _reduce_axes(node, inputs, attrs, opset, input_since):
    if opset >= input_since:
        axes = inputs[1] if len(inputs) > 1 and inputs[1] is not None else None
        if axes is None or len(axes) == 0:
            return None if not attrs.get("noop_with_empty_axes", 0) else ()
        return tuple(int(a) for a in axes)
    axes = attrs.get("axes")
    return None if axes is None else tuple(axes)


def _sce(scores, labels, weights, reduction, ignore_index):
    # scores [N, C, d...] -> log_softmax over axis 1.
    m = scores.max(axis=1, keepdims=True)
    logp = scores - m - np.log(np.exp(scores - m).sum(axis=1, keepdims=True))
    labels = labels.astype(np.int64)
    valid = np.ones(labels.shape, bool) if ignore_index is None else labels != ignore_index
    safe = np.where(valid, labels, 0)
    picked = np.take_along_axis(logp, np.expand_dims(safe, 1), axis=1).squeeze(1)
    w = np.ones(labels.shape) if weights is None else weights[safe]
    w = np.where(valid, w, 0.0)
    loss = -picked * w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / w.sum()


def run(model, feeds, params=None):
    """Evaluates `model` in float64; `params` overrides initializers."""
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    env = {}
    for t in model.graph.initializer:
        v = numpy_helper.to_array(t)
        env[t.name] = v.astype(np.float64) if v.dtype.kind == "f" else v
    for k, v in (params or {}).items():
        env[k] = np.asarray(v, np.float64)
    for k, v in feeds.items():
        env[k] = v.astype(np.float64) if v.dtype.kind == "f" else v
    for node in model.graph.node:
        x = [env[n] if n else None for n in node.input]
        a = _attrs(node)
        op = node.op_type
        if op == "Gemm":
            A = x[0].T if a.get("transA", 0) else x[0]
            B = x[1].T if a.get("transB", 0) else x[1]
            y = a.get("alpha", 1.0) * (A @ B)
            if len(x) > 2 and x[2] is not None:
                y = y + a.get("beta", 1.0) * x[2]
        elif op == "MatMul":
            y = np.matmul(x[0], x[1])
        elif op in ("Add", "Sub", "Mul", "Div", "Pow"):
            f = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
                 "Div": np.divide, "Pow": np.power}[op]
            y = f(x[0], x[1])
        elif op == "Relu":
            y = np.maximum(x[0], 0)
        elif op == "Sigmoid":
            y = 1 / (1 + np.exp(-x[0]))
        elif op == "Tanh":
            y = np.tanh(x[0])
        elif op == "Exp":
            y = np.exp(x[0])
        elif op == "Log":
            y = np.log(x[0])
        elif op == "Neg":
            y = -x[0]
        elif op == "Sqrt":
            y = np.sqrt(x[0])
        elif op == "Identity":
            y = x[0]
        elif op in ("ReduceSum", "ReduceMean"):
            axes = _reduce_axes(node, x, a, opset, 13 if op == "ReduceSum" else 18)
            if axes == ():
                y = x[0]
            else:
                f = np.sum if op == "ReduceSum" else np.mean
                y = f(x[0], axis=axes, keepdims=bool(a.get("keepdims", 1)))
        elif op == "Reshape":
            shape = [int(s) for s in x[1]]
            shape = [x[0].shape[i] if s == 0 else s for i, s in enumerate(shape)]
            y = x[0].reshape(shape)
        elif op == "Flatten":
            axis = a.get("axis", 1)
            axis = axis + x[0].ndim if axis < 0 else axis
            y = x[0].reshape(int(np.prod(x[0].shape[:axis])), -1)
        elif op == "Transpose":
            y = np.transpose(x[0], a.get("perm"))
        elif op == "Constant":
            y = a["value"]
        elif op == "SoftmaxCrossEntropyLoss":
            y = _sce(x[0], x[1], x[2] if len(x) > 2 else None,
                     a.get("reduction", "mean"), a.get("ignore_index"))
        else:
            raise NotImplementedError(op)
        env[node.output[0]] = y
    return {o.name: env[o.name] for o in model.graph.output}
