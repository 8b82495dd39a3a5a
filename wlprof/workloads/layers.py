"""Training layers: the forward and backward of one layer per point (convolution, attention, norms,
pooling, a loss, an embedding), the ops a training step runs beside its GEMMs.

The step runs with autograd on (the capture's inference mode is left for it) and takes the
gradients of the layer's inputs and weights with `torch.autograd.grad`, so nothing accumulates
between steps; regions layers/forward and layers/backward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from wlprof.params import Param, PerDevice, Values
from wlprof.schema import I64, Column, S
from wlprof.workloads.base import Built, Parsed, Point, Workload

# layer -> what batch (N), channels (C) and size (S) mean for it
LAYERS = {
    "conv2d": "x [N, C, S, S], a C -> C convolution of kernel_size (padding kernel_size // 2)",
    "batch_norm": "x [N, C, S, S], batch norm in training mode",
    "group_norm": "x [N, C, S, S], group norm of gcd(32, C) groups",
    "layer_norm": "x [N, S, C], layer norm over C",
    "max_pool": "x [N, C, S, S], 3x3 max pooling of stride 2, padding 1",
    "avg_pool": "x [N, C, S, S], 2x2 average pooling",
    "attention": "q, k, v [N, C / head_dim, S, head_dim], causal scaled dot-product attention",
    "cross_entropy": "logits [N * S, C] against N * S class indices",
    "embedding": "N x S indices into a vocab x C table",
    "embedding_bag": "N bags of S indices into a vocab x C table, summed per bag",
    "lstm": "x [N, S, C], one LSTM layer of hidden width C over S steps",
    "channels_last": "x [N, C, S, S] copied to channels-last memory and back: two layout-changing copies",
    "head_transpose": "x [N, S, C] split into C / head_dim heads, copied to [N, heads, S, head_dim] and back",
    "linear": "x [N, S, C] through a C -> C linear layer with bias (its backward sums the bias gradient over "
              "N x S rows)",
}
IMAGE = {"conv2d", "batch_norm", "group_norm", "max_pool", "avg_pool", "channels_last"}


@dataclass(frozen=True)
class LayersSpec:
    layers: tuple[str, ...]
    batch: tuple[int, ...]
    channels: tuple[int, ...]
    size: tuple[int, ...]
    kernel_size: int
    head_dim: int
    vocab: int
    norm_weights: str = "dtype"


class Layers(Workload):
    name = "layers"
    summary = "training layers, forward and backward: conv2d, attention, norms, pooling, cross entropy, embedding"
    label = "training layers (fwd + bwd)"
    unlistable = ("its convolutions and attention run CPU kernels on the meta device, with other names and "
                  "arguments than CUDA's")
    params = (
        Param("layers", "str", "Layers to run (" + "; ".join(f"{k}: {v}" for k, v in LAYERS.items()) + ")",
              many=True, choices=tuple(LAYERS), default=list(LAYERS)),
        Param("batch", "int", "Batch sizes N", many=True, unit="samples", default=PerDevice([8, 32], [2])),
        Param("channels", "int", "Channels or widths C (classes for cross_entropy)", many=True,
              default=PerDevice([64, 256], [32])),
        Param("size", "int", "Spatial side or sequence length S", many=True, default=PerDevice([32], [8])),
        Param("kernel_size", "int", "conv2d: kernel side", default=3),
        Param("head_dim", "int", "attention, head_transpose: width of one head (C must be a multiple of it)",
              default=PerDevice(64, 16)),
        Param("vocab", "int", "embedding, embedding_bag: rows of the table", default=PerDevice(32000, 1000)),
        Param("norm_weights", "str", "batch_norm: its weight, bias and running statistics in the run's dtype "
              "(dtype) or in float32 beside activations in the run's dtype (float32: what a float32 module "
              "under torch.autocast runs, another kernel)", choices=("dtype", "float32"), default="dtype"),
    )
    columns = (
        Column("layer", S, "", "training layer: " + ", ".join(LAYERS)),
        Column("batch", I64, "rows", "MLP: batch size (tokens); training layers: batch N"),
        Column("channels", I64, "", "training layer: channels or width C (classes of cross_entropy)"),
        Column("spatial", I64, "", "training layer: spatial side or sequence length S"),
        Column("kernel_size", I64, "", "training layer: conv2d kernel side"),
        Column("head_dim", I64, "", "training layer: attention or head_transpose head width"),
        Column("vocab", I64, "", "training layer: embedding or embedding_bag table rows"),
        Column("norm_weights", S, "", "training layer: batch_norm's weights in the run's dtype or in float32"),
    )
    examples = (
        "wlprof run layers --layers conv2d,batch_norm --batch 2 --channels 16,32 --size 8",
        "wlprof run layers --layers attention --batch 1 --channels 128 --size 64,128 --head-dim 32",
    )

    def spec(self, values: Values, device, dtype) -> Parsed:
        import torch

        from wlprof.errors import InputError, Key

        notes = []
        for heads in ("attention", "head_transpose"):
            if heads not in values["layers"]:
                continue
            hd, widest = values["head_dim"], max(values["channels"])
            if hd > widest:
                raise InputError(Key("head_dim"), ("must be at most ", Key("channels"), f" ({widest}) for {heads}"),
                                 hd)
            bad = [c for c in values["channels"] if c % hd]
            if bad:
                raise InputError(Key("channels"), ("must be multiples of ", Key("head_dim"), f" ({hd}) for {heads}"),
                                 bad[0])
        layers, sizes = values["layers"], values["size"]
        if "avg_pool" in layers and min(sizes) < 2:
            raise InputError(Key("size"), "must be at least 2 for avg_pool (one 2x2 window)", min(sizes))
        # torch refuses a norm with batch statistics over one value ("Expected more than 1 value per
        # channel when training"): batch_norm's N x S x S per channel, group_norm's N x S x S x C / groups
        for layer in ("batch_norm", "group_norm"):
            if layer not in layers:
                continue
            for n in values["batch"]:
                for c in values["channels"]:
                    for s in sizes:
                        per_group = c // math.gcd(32, c) if layer == "group_norm" else 1
                        if n * s * s * per_group > 1:
                            continue
                        if layer == "group_norm":
                            where = (" 1 and ", Key("channels"), f" {c} ({c} groups of one channel): a group "
                                     "norm needs more than one value per group (N x S x S x C / groups is 1)")
                        else:
                            where = (" 1: a batch norm in training needs more than one value per channel "
                                     "(N x S x S is 1)",)
                        raise InputError(Key("batch"), (f"must be at least 2 for {layer} at ", Key("size"), *where), n)
        if device.type != "cuda" and not {"batch", "channels", "size"} & values.given:
            notes.append("CPU: batch 2, channels 32, size 8 (GPU default 8,32 / 64,256 / 32)")
        if values["norm_weights"] != "dtype" and "batch_norm" not in layers:
            raise InputError(Key("norm_weights"), ("applies to batch_norm only, and ", Key("layers"),
                                                   " holds none"), values["norm_weights"])
        if values["norm_weights"] == "float32" and dtype == torch.float64:
            # torch's batch norm takes float32 weights beside bfloat16 or float16 activations (or float32 ones,
            # the same dtype); beside float64 ones its CPU and CUDA kernels refuse the mixed dtypes
            raise InputError(Key("norm_weights"), ("must be dtype for ", Key("dtype", "study"), " float64: a batch norm "
                                                   "takes float32 weights beside bfloat16, float16 or float32 "
                                                   "activations only"), values["norm_weights"])
        return Parsed(LayersSpec(tuple(values["layers"]), tuple(values["batch"]), tuple(values["channels"]),
                                 tuple(values["size"]), values["kernel_size"], values["head_dim"], values["vocab"],
                                 values["norm_weights"]), tuple(notes))

    def points(self, spec: LayersSpec) -> list[Point]:
        out = []
        for layer in spec.layers:
            for n in spec.batch:
                for c in spec.channels:
                    for s in spec.size:
                        p = {"layer": layer, "batch": n, "channels": c, "spatial": s}
                        if layer == "conv2d":
                            p["kernel_size"] = spec.kernel_size
                        elif layer in ("attention", "head_transpose"):
                            p["head_dim"] = spec.head_dim
                        elif layer in ("embedding", "embedding_bag"):
                            p["vocab"] = spec.vocab
                        mixed = layer == "batch_norm" and spec.norm_weights == "float32"
                        if mixed:
                            p["norm_weights"] = "float32"
                        out.append(Point(f"{layer} N{n} C{c} S{s}" + (" w32" if mixed else ""), p))
        return out

    def size_params(self) -> tuple[str, ...]:
        return ("batch", "channels", "size", "kernel_size", "head_dim", "vocab")

    def estimate_bytes(self, point: Point, dtype) -> int:
        p = point.params
        n, c, s = p["batch"], p["channels"], p["spatial"]
        elems = n * c * s * s if p["layer"] in IMAGE else n * c * s
        if p["layer"] == "attention":
            elems = 3 * n * c * s + n * (c // p["head_dim"]) * s * s  # q, k, v and the math backend's scores
        if p["layer"] == "lstm":
            elems = n * s * 6 * c  # its input, output and the four gates kept for the backward
        weights = {"conv2d": c * c * p.get("kernel_size", 1) ** 2, "linear": c * c + c, "embedding": p.get("vocab", 0) * c,
                   "embedding_bag": p.get("vocab", 0) * c, "lstm": 8 * c * c + 8 * c,
                   "batch_norm": 2 * c, "group_norm": 2 * c, "layer_norm": 2 * c}
        extra = weights.get(p["layer"], 0)
        return 4 * (elems + extra) * dtype.itemsize  # input, output and their gradients

    def build(self, point: Point, device, dtype) -> Built:
        import torch
        import torch.nn.functional as F
        from torch.profiler import record_function

        p = point.params
        n, c, s = p["batch"], p["channels"], p["spatial"]
        gen = torch.Generator(device=device).manual_seed(0)

        def randn(*shape, grad=True, dt=dtype):
            return torch.randn(*shape, device=device, dtype=dt, generator=gen).requires_grad_(grad)

        layer = p["layer"]
        if layer in IMAGE:
            x = randn(n, c, s, s)
        if layer == "conv2d":
            k = p["kernel_size"]
            w = randn(c, c, k, k)
            inputs, fwd = (x, w), lambda: F.conv2d(x, w, padding=k // 2)
        elif layer == "batch_norm":
            wt = torch.float32 if p.get("norm_weights") == "float32" else dtype
            w, b = randn(c, dt=wt), randn(c, dt=wt)
            mean = torch.zeros(c, device=device, dtype=wt)
            var = torch.ones(c, device=device, dtype=wt)
            inputs, fwd = (x, w, b), lambda: F.batch_norm(x, mean, var, w, b, training=True)
        elif layer == "group_norm":
            w, b = randn(c), randn(c)
            inputs, fwd = (x, w, b), lambda: F.group_norm(x, math.gcd(32, c), w, b)
        elif layer == "max_pool":
            inputs, fwd = (x,), lambda: F.max_pool2d(x, 3, 2, 1)
        elif layer == "avg_pool":
            inputs, fwd = (x,), lambda: F.avg_pool2d(x, 2)
        elif layer == "layer_norm":
            x, w, b = randn(n, s, c), randn(c), randn(c)
            inputs, fwd = (x, w, b), lambda: F.layer_norm(x, (c,), w, b)
        elif layer == "attention":
            heads, d = c // p["head_dim"], p["head_dim"]
            q, kk, v = randn(n, heads, s, d), randn(n, heads, s, d), randn(n, heads, s, d)
            inputs, fwd = (q, kk, v), lambda: F.scaled_dot_product_attention(q, kk, v, is_causal=True)
        elif layer == "cross_entropy":
            logits = randn(n * s, c)
            target = torch.randint(0, c, (n * s,), device=device, generator=gen)
            inputs, fwd = (logits,), lambda: F.cross_entropy(logits, target)
        elif layer == "channels_last":
            inputs, fwd = (x,), lambda: x.contiguous(memory_format=torch.channels_last).contiguous()
        elif layer == "head_transpose":
            heads, d = c // p["head_dim"], p["head_dim"]
            x = randn(n, s, c)
            inputs, fwd = (x,), lambda: x.view(n, s, heads, d).transpose(1, 2).contiguous().transpose(1, 2).contiguous()
        elif layer == "lstm":
            x = randn(n, s, c)
            lstm = torch.nn.LSTM(c, c, batch_first=True).to(device=device, dtype=dtype)
            with torch.no_grad():  # seeded weights, of the scale nn.LSTM draws them at
                for w in lstm.parameters():
                    w.copy_(torch.rand(w.shape, device=device, dtype=dtype, generator=gen).sub_(0.5).mul_(2 / c ** 0.5))
            inputs, fwd = (x, *lstm.parameters()), lambda: lstm(x)[0]
        elif layer == "linear":
            x, w, b = randn(n, s, c), randn(c, c), randn(c)
            inputs, fwd = (x, w, b), lambda: F.linear(x, w, b)
        elif layer == "embedding_bag":
            table = randn(p["vocab"], c)
            idx = torch.randint(0, p["vocab"], (n, s), device=device, generator=gen)
            inputs, fwd = (table,), lambda: F.embedding_bag(idx, table, mode="sum")
        else:  # embedding
            table = randn(p["vocab"], c)
            idx = torch.randint(0, p["vocab"], (n, s), device=device, generator=gen)
            inputs, fwd = (table,), lambda: F.embedding(idx, table)
        with torch.no_grad():
            probe = fwd()
        grad_out = None if probe.dim() == 0 else torch.randn(probe.shape, device=device, dtype=dtype, generator=gen)
        del probe

        def step():
            with torch.inference_mode(False), torch.enable_grad():
                with record_function("layers/forward"):
                    out = fwd()
                with record_function("layers/backward"):
                    return torch.autograd.grad(out, inputs, grad_out)

        return Built(step=step, graph_safe=False)


WORKLOAD = Layers()
