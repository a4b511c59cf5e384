# Hugging Face transformers models as a user exports them today: PyTorch 2's
# torch.onnx.export (the dynamo exporter, optimize=False, dynamic batch) of
# small random-weight configurations, each model's own loss. GPT-2 (opset
# 20), LLaMA (RMSNorm, rotary positions, SwiGLU, grouped-query heads; opset
# 23, where the exporter writes Attention), Qwen2 (grouped-query heads with
# key/value biases), BERT (masked LM: -100 everywhere but the masked
# tokens), ViT (image classification), BART (encoder-decoder; the decoder's
# inputs are the labels shifted right inside the graph) and T5 (through the
# TorchScript exporter: its dynamo export fails inside PyTorch). Token
# batches are right-padded to random lengths, so micro-batches count
# different numbers of tokens.
#
# Each trains 3 AdamW steps (clipping, weight decay) at micro-batch 2 x 4
# accumulation steps through accrue-compile and accrue-train, against
# PyTorch's step on the one big batch of 8: every parameter within rtol
# 1e-4. Where a gradient is zero mathematically (a key bias: softmax does not
# see it), Adam turns float32 rounding noise into updates; such a
# parameter is held to PyTorch run in float64 instead: Accrue must be as
# close to it as PyTorch's own float32 run (within twice its distance).
# Where only a few elements' gradients are below float32's rounding noise
# (which order the sums take decides their step), those elements are left
# out of both comparisons (resolved_close).
# Buffers (the rotary inverse frequencies, marked BUFFER by the exporter)
# must come back unchanged.
#
# REQUIRES: torch2
# RUN: rm -rf %t && mkdir -p %t
# RUN: %latest_python %s %t

import copy
import os
import sys
import warnings

import numpy as np
import torch
import transformers as tf

import accrue_e2e as e2e

warnings.filterwarnings("ignore")
tf.logging.set_verbosity_error()
out = sys.argv[1]
B, K, STEPS, LR, WD, CLIP = 2, 4, 3, 1e-3, 0.01, 1.0
E = B * K
T, V = 8, 64


def tokens(rng, pad_id=0):
    """Right-padded token batches: real tokens avoid the ids models reserve
    (pad, bos, eos: 0 to 2; an embedding's padding_idx row, which ONNX does
    not mark, is read only at padded positions), padded positions hold the
    pad id and the label -100."""
    n = STEPS * E
    ids = rng.integers(3, V, (n, T)).astype(np.int64)
    mask = np.ones((n, T), np.int64)
    for i in range(n):
        mask[i, rng.integers(T // 2, T + 1):] = 0
    ids = np.where(mask == 1, ids, pad_id)
    labels = np.where(mask == 1, ids, -100)
    # Micro-batches must count different numbers of tokens: a mean of
    # micro-batch means would then differ from the big batch's mean.
    counts = mask.reshape(-1, B, T).sum(axis=(1, 2))
    assert len(set(counts.tolist())) > 1, counts
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class Loss(torch.nn.Module):
    """The model's own loss, from positional inputs."""

    def __init__(self, model, names):
        super().__init__()
        self.m, self.names = model, names

    def forward(self, *inputs):
        return self.m(**dict(zip(self.names, inputs))).loss


def export(model, data, path, opset, dynamo):
    names = list(data)
    example = tuple(torch.tensor(v[:B]) for v in data.values())
    if dynamo:
        batch = torch.export.Dim("N", min=1, max=64)
        torch.onnx.export(Loss(model, names), example, path, dynamo=True, optimize=False,
                          opset_version=opset, input_names=names, output_names=["loss"],
                          dynamic_shapes={"inputs": tuple({0: batch} for _ in names)})
    else:
        torch.onnx.export(Loss(model, names), example, path, dynamo=False, opset_version=opset,
                          input_names=names, output_names=["loss"],
                          dynamic_axes={n: {0: "N"} for n in names},
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)


def window(data, step, dtype):
    """The one big batch of optimizer step `step`, its floats in `dtype`."""
    batch = {k: torch.tensor(v[step * E:(step + 1) * E]) for k, v in data.items()}
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in batch.items()}


def pytorch_step(model, data, dtype=torch.float32):
    """PyTorch on the one big batch of each window."""
    model = model.to(dtype)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WD)
    for step in range(STEPS):
        opt.zero_grad()
        model(**window(data, step, dtype)).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
    return {n: p.detach().double().numpy() for n, p in model.named_parameters()}


failures = []


def first_gradients(model, data, dtype):
    """PyTorch's gradients on the first window, in `dtype`."""
    model = copy.deepcopy(model).to(dtype)
    model.train()
    model(**window(data, 0, dtype)).loss.backward()
    return {n: p.grad.double().numpy() for n, p in model.named_parameters()}


def resolved_close(name, pname, gradients, got, want, exact):
    """The comparisons again, on the elements whose gradient float32
    resolves. Where an element's float64 gradient is below four times the
    largest error of PyTorch's own float32 gradient of that parameter, its
    float32 gradient has no correct digits (whichever order its sums take)
    and Adam, dividing by its root mean square, turns that noise into a
    step of up to lr: such an element says nothing about either side. The
    others are held as before (rtol 1e-4 against PyTorch, or twice PyTorch
    float32's distance to float64), and the noise must stay rare: at most
    1% of the parameter's elements. `gradients`: first_gradients in
    float32 and float64."""
    g32, g64 = (g[pname] for g in gradients)
    resolved = np.abs(g64) > 4 * np.abs(g32 - g64).max()
    noise = resolved.size - int(resolved.sum())
    print("%s %s: %d of %d elements below float32's resolution of its gradient"
          % (name, pname, noise, resolved.size))
    if noise > 0.01 * resolved.size or not np.isfinite(got).all():
        return False
    got, want, exact = got[resolved], want[resolved], exact[resolved]
    try:
        e2e.assert_close("%s %s (resolved)" % (name, pname), got, want, rtol=1e-4, atol=1e-6)
        return True
    except AssertionError:
        pass
    return np.abs(got - exact).max() <= 2 * np.abs(want - exact).max() + 1e-7


def check(name, make, data, opset=20, dynamo=True):
    print("==", name, flush=True)
    torch.manual_seed(0)
    initial = make()
    initial.train()
    path = os.path.join(out, name + ".onnx")
    export(copy.deepcopy(initial), data, path, opset, dynamo)
    npz = os.path.join(out, name + ".npz")
    np.savez(npz, **data)
    art = e2e.compile_model(path, os.path.join(out, name), B, accumulation_steps=K,
                            optimizer="adamw", lr=LR, weight_decay=WD, clip_norm=CLIP)
    trained = os.path.join(out, name + "_trained.onnx")
    e2e.train(art, npz, STEPS, export=trained)
    got = e2e.initializers(trained)
    start = e2e.initializers(path)
    want = pytorch_step(copy.deepcopy(initial), data)
    exact = gradients = None
    # A tied parameter is one initializer under one of its names.
    aliases = {}
    for n, p in initial.named_parameters(remove_duplicate=False):
        aliases.setdefault(id(p), []).append("m." + n)
    names = {n: aliases[id(p)] for n, p in initial.named_parameters()}
    parameters = set()
    for pname, value in want.items():
        keys = [k for k in names[pname] if k in got]
        if len(keys) != 1:
            print("FAILED %s %s: %d initializers for it" % (name, pname, len(keys)))
            failures.append(name)
            continue
        parameters.add(keys[0])
        assert np.abs(value - start[keys[0]]).max() > 0, pname
        try:
            e2e.assert_close("%s %s" % (name, pname), got[keys[0]], value, rtol=1e-4, atol=1e-6)
        except AssertionError as err:
            if exact is None:
                exact = pytorch_step(copy.deepcopy(initial), data, torch.float64)
            torch_error = np.abs(value - exact[pname]).max()
            accrue_error = np.abs(got[keys[0]] - exact[pname]).max()
            print("%s; against float64: Accrue %.3g, PyTorch float32 %.3g"
                  % (err, accrue_error, torch_error))
            if accrue_error > 2 * torch_error + 1e-7 and gradients is None:
                gradients = [first_gradients(initial, data, t)
                             for t in (torch.float32, torch.float64)]
            if accrue_error > 2 * torch_error + 1e-7 and not resolved_close(
                    name, pname, gradients, got[keys[0]], value, exact[pname]):
                print("FAILED", pname)
                failures.append(name)
    # Everything else is a buffer or a constant: it must not train.
    for key, value in start.items():
        if key not in parameters and value.dtype.kind == "f" and key in got:
            if not np.array_equal(got[key], value):
                print("FAILED %s: buffer %s changed" % (name, key))
                failures.append(name)
    print("%s: %d parameters" % (name, len(parameters)), flush=True)


text = tokens(np.random.default_rng(0))
check("gpt2", lambda: tf.GPT2LMHeadModel(tf.GPT2Config(
    vocab_size=V, n_positions=16, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
    embd_pdrop=0.0, attn_pdrop=0.0)), text)
check("llama", lambda: tf.LlamaForCausalLM(tf.LlamaConfig(
    vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16)), text, opset=23)
check("qwen2", lambda: tf.Qwen2ForCausalLM(tf.Qwen2Config(
    vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16)), text)
masked = tokens(np.random.default_rng(1), pad_id=0)
rng = np.random.default_rng(3)
masked["labels"] = np.where((rng.random((STEPS * E, T)) < 0.3) & (masked["attention_mask"] == 1),
                            masked["input_ids"], -100)
check("bert", lambda: tf.BertForMaskedLM(tf.BertConfig(
    vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
    num_attention_heads=4, max_position_embeddings=16, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0)), masked)
check("vit", lambda: tf.ViTForImageClassification(tf.ViTConfig(
    image_size=8, patch_size=4, num_channels=3, hidden_size=32, intermediate_size=64,
    num_hidden_layers=2, num_attention_heads=4, num_labels=5, hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0)),
    {"pixel_values": rng.standard_normal((STEPS * E, 3, 8, 8)).astype(np.float32),
     "labels": rng.integers(0, 5, STEPS * E).astype(np.int64)})
check("bart", lambda: tf.BartForConditionalGeneration(tf.BartConfig(
    vocab_size=V, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
    decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
    max_position_embeddings=16, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
    pad_token_id=1, decoder_start_token_id=2)), tokens(np.random.default_rng(2), pad_id=1))
check("t5", lambda: tf.T5ForConditionalGeneration(tf.T5Config(
    vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=1,
    num_heads=4, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0)),
    tokens(np.random.default_rng(4), pad_id=0), opset=17, dynamo=False)

print("%d failures %s" % (len(failures), sorted(set(failures))))
sys.exit(1 if failures else 0)
