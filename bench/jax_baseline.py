#!/usr/bin/env python3
"""The bench models' training step in JAX/XLA, at its best on the CPU.

usage: jax_baseline.py MODEL DATA.npz MICRO_BATCH K STEPS THREADS

Run by bench/vs_pytorch.py under --jax-python (a venv with jax[cpu] and
optax: `python3 -m venv bench/.venv-jax && bench/.venv-jax/bin/pip install
"jax[cpu]" optax`). MODEL is mlp, gpt, cnn or lstmT, the same architectures as
vs_pytorch.py's (the GPT is the test suite's: pre-norm blocks, causal
attention, exact GELU, a tied head, cross-entropy ignoring -100; lstmT is
the LSTM language model over T tokens, its recurrence a lax.scan). One
optimizer step is one jitted function over the whole window: lax.scan over
the K micro-batches accumulating the gradients of each micro-batch's mean
loss / K (the loop vs_pytorch.py times in PyTorch), then optax's global-norm
clipping (1.0) and AdamW (lr 1e-3, weight decay 0.01), with the parameters
and the optimizer state donated. XLA:CPU's threads are limited by the
process's CPU affinity (the first THREADS cores). Prints the seconds per
step: the mean of STEPS steps after a warm-up step that compiles.
"""
import os
import sys
import time

MODEL, DATA = sys.argv[1], sys.argv[2]
B, K, STEPS, THREADS = (int(v) for v in sys.argv[3:7])
os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:THREADS]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402


def dense(key, n_in, n_out):
    return {"w": jax.random.normal(key, (n_in, n_out)) / np.sqrt(n_in), "b": jnp.zeros(n_out)}


def linear(p, x):
    return x @ p["w"] + p["b"]


def cross_entropy(logits, labels):
    """Mean over the labels that are not -100."""
    valid = labels != -100
    safe = jnp.where(valid, labels, 0)
    logp = jax.nn.log_softmax(logits, axis=-1)
    picked = jnp.take_along_axis(logp, safe[..., None], axis=-1)[..., 0]
    return -(picked * valid).sum() / jnp.maximum(valid.sum(), 1)


def mlp():
    keys = jax.random.split(jax.random.PRNGKey(0), 5)
    widths = [512, 1024, 1024, 1024, 1024, 10]
    params = [dense(keys[i], widths[i], widths[i + 1]) for i in range(5)]

    def loss(params, x, y):
        for p in params[:-1]:
            x = jax.nn.relu(linear(p, x))
        return cross_entropy(linear(params[-1], x), y)
    return params, loss


def cnn():
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    shapes = [(32, 3), (64, 32), (64, 64)]
    params = {"conv": [{"w": jax.random.normal(k, (o, i, 3, 3)) / np.sqrt(9 * i),
                        "b": jnp.zeros(o)} for k, (o, i) in zip(keys, shapes)],
              "fc": dense(keys[3], 64, 10)}

    def conv(p, x):
        y = jax.lax.conv_general_dilated(x, p["w"], (1, 1), "SAME",
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return jax.nn.relu(y + p["b"][None, :, None, None])

    def pool(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2),
                                     "VALID")

    def loss(params, x, y):
        c = params["conv"]
        x = pool(conv(c[0], x))
        x = pool(conv(c[1], x))
        x = conv(c[2], x).mean(axis=(2, 3))
        return cross_entropy(linear(params["fc"], x), y)
    return params, loss


def gpt(vocab=4096, d=256, heads=4, layers=4, block=128):
    keys = iter(jax.random.split(jax.random.PRNGKey(0), 4 + 4 * layers))

    def norm():
        return {"g": jnp.ones(d), "b": jnp.zeros(d)}
    params = {"wte": jax.random.normal(next(keys), (vocab, d)) * 0.02,
              "wpe": jax.random.normal(next(keys), (block, d)) * 0.02,
              "ln": norm(),
              "blocks": [{"ln1": norm(), "qkv": dense(next(keys), d, 3 * d),
                          "proj": dense(next(keys), d, d), "ln2": norm(),
                          "fc1": dense(next(keys), d, 4 * d),
                          "fc2": dense(next(keys), 4 * d, d)} for _ in range(layers)]}

    def layer_norm(p, x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["g"] + p["b"]

    def loss(params, idx, targets):
        b, t = idx.shape
        x = params["wte"][idx] + params["wpe"][:t]
        future = ~jnp.tril(jnp.ones((t, t), bool))
        for p in params["blocks"]:
            q, k, v = jnp.split(linear(p["qkv"], layer_norm(p["ln1"], x)), 3, axis=-1)
            q, k, v = (z.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3)
                       for z in (q, k, v))
            att = (q @ k.transpose(0, 1, 3, 2)) / np.sqrt(d // heads)
            att = jax.nn.softmax(jnp.where(future, -jnp.inf, att), axis=-1)
            y = (att @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
            x = x + linear(p["proj"], y)
            x = x + linear(p["fc2"], jax.nn.gelu(linear(p["fc1"], layer_norm(p["ln2"], x)),
                                                 approximate=False))
        logits = layer_norm(params["ln"], x) @ params["wte"].T
        return cross_entropy(logits, targets)
    return params, loss


def lstm(vocab=1024, width=128, hidden=256, layers=2):
    """torch.nn.LSTM's cell (gates i, f, g, o; both biases), batch first."""
    keys = iter(jax.random.split(jax.random.PRNGKey(0), 2 + 2 * layers))
    scale = 1 / np.sqrt(hidden)

    def uniform(shape):
        return jax.random.uniform(next(keys), shape, minval=-scale, maxval=scale)
    params = {"emb": jax.random.normal(next(keys), (vocab, width)),
              "layers": [{"w_ih": uniform((4 * hidden, width if i == 0 else hidden)),
                          "w_hh": uniform((4 * hidden, hidden)),
                          "b": jnp.zeros(4 * hidden)} for i in range(layers)],
              "head": dense(next(keys), hidden, vocab)}

    def layer(p, xs):
        # The input projections of every step at once, then the recurrence.
        inputs = xs @ p["w_ih"].T + p["b"]

        def cell(carry, gates_in):
            h, c = carry
            i, f, g, o = jnp.split(gates_in + h @ p["w_hh"].T, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h
        zeros = jnp.zeros((xs.shape[0], hidden))
        _, hs = jax.lax.scan(cell, (zeros, zeros), inputs.transpose(1, 0, 2))
        return hs.transpose(1, 0, 2)

    def loss(params, idx, targets):
        x = params["emb"][idx]
        for p in params["layers"]:
            x = layer(p, x)
        return cross_entropy(linear(params["head"], x).reshape(-1, vocab), targets.reshape(-1))
    return params, loss


def main():
    params, loss = (lstm if MODEL.startswith("lstm") else
                    {"mlp": mlp, "cnn": cnn, "gpt": gpt}[MODEL])()
    data = np.load(DATA)
    arrays = [data[name] for name in data.files]
    arrays = [a.astype(np.int32) if a.dtype == np.int64 else a for a in arrays]
    tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-3, weight_decay=0.01))

    def window(params, state, batch):
        def micro(acc, inputs):
            value, grads = jax.value_and_grad(loss)(params, *inputs)
            return jax.tree.map(lambda a, g: a + g / K, acc, grads), value
        grads, losses = jax.lax.scan(micro, jax.tree.map(jnp.zeros_like, params), batch)
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state, losses.mean()

    step = jax.jit(window, donate_argnums=(0, 1))
    windows = [[jnp.asarray(a[s * B * K:(s + 1) * B * K].reshape((K, B) + a.shape[1:]))
                for a in arrays] for s in range(STEPS + 1)]
    state = tx.init(params)
    params, state, value = step(params, state, windows[0])
    value.block_until_ready()
    start = time.perf_counter()
    for s in range(1, STEPS + 1):
        params, state, value = step(params, state, windows[s])
    value.block_until_ready()
    print((time.perf_counter() - start) / STEPS)


if __name__ == "__main__":
    main()
