"""Serving engines' custom ops: vLLM's `_C` and `_C_cache_ops` kernels (activations, RMS norms,
rotary embedding, KV-cache writes, FP8 quantization), as a vLLM trace records them.

They write into an output they are passed (`Tensor!`): it is written, never read, unless the
op updates it in place. FLOPs per element follow the registry's conventions (`elementwise`,
`reductions`): silu 5, gelu 20 (its tanh and fast forms too), a multiply or add 1, an RMS norm 3
plus 1 for its weight; a rotary embedding's rotated element 3 (two multiplies and an add);
quantization 2 per element (scale, round) and a dynamic scale's max 1 more. The paged-attention
kernels are not costed: the keys they read depend on the sequence lengths, data the trace does
not hold.
"""

from __future__ import annotations

from wlprof.cost.elementwise import BINARY_FLOPS, UNARY_FLOPS
from wlprof.cost.registry import VECTOR, Cost, OpCall, formula

NS = "_C"
CACHE_NS = "_C_cache_ops"

# op -> FLOPs per output element of act(x[..., :d]) * x[..., d:] (or x * act for mul_and_silu)
GATED = {
    "silu_and_mul": UNARY_FLOPS["silu"] + BINARY_FLOPS["mul"],
    "mul_and_silu": UNARY_FLOPS["silu"] + BINARY_FLOPS["mul"],
    "gelu_and_mul": UNARY_FLOPS["gelu"] + BINARY_FLOPS["mul"],
    "gelu_tanh_and_mul": UNARY_FLOPS["gelu"] + BINARY_FLOPS["mul"],
    "fatrelu_and_mul": 1 + BINARY_FLOPS["mul"],  # a threshold compare
}
# op -> FLOPs per output element of out = act(input)
PLAIN = {"gelu_new": UNARY_FLOPS["gelu"], "gelu_fast": UNARY_FLOPS["gelu"],
         "gelu_quick": UNARY_FLOPS["sigmoid"] + 2}  # x * sigmoid(1.702 x)


def _activation(per: int):
    def cost(call: OpCall) -> Cost | None:
        # (out!, input, ...): reads the input ([..., 2d] for a gated one), writes out [..., d]
        out, x = call.tensor(0), call.tensor(1)
        written = out.numel * out.itemsize
        return Cost(per * out.numel, x.nbytes_read + written, VECTOR, x.dtype, written=written)
    return cost


for _name, _per in {**GATED, **PLAIN}.items():
    formula(f"{NS}::{_name}")(_activation(_per))


@formula(f"{NS}::rms_norm")
def rms_norm(call: OpCall) -> Cost | None:
    # rms_norm(result!, input, weight, epsilon): 3 per element + 1 for the weight; reads input and
    # weight, writes result (no saved statistics)
    out, x, w = call.tensor(0), call.tensor(1), call.tensor(2)
    written = out.numel * out.itemsize
    return Cost(4 * x.numel, x.nbytes_read + w.nbytes_read + written, VECTOR, x.dtype, written=written)


@formula(f"{NS}::fused_add_rms_norm")
def fused_add_rms_norm(call: OpCall) -> Cost | None:
    # fused_add_rms_norm(input!, residual!, weight, epsilon): residual += input, then input =
    # rms_norm(residual) * weight, in place: 1 + 4 per element; reads input, residual and weight,
    # writes both
    x, r, w = call.tensor(0), call.tensor(1), call.tensor(2)
    written = x.numel * x.itemsize + r.numel * r.itemsize
    return Cost(5 * x.numel, x.nbytes_read + r.nbytes_read + w.nbytes_read + written, VECTOR, x.dtype,
                written=written)


@formula(f"{NS}::rotary_embedding")
def rotary_embedding(call: OpCall) -> Cost | None:
    # rotary_embedding(positions [T], query! [T, Hq * D], key!? [T, Hk * D], head_size, cos_sin_cache
    # [P, rot_dim], is_neox): the first rot_dim of each head's D elements rotated in place, 3 FLOPs
    # each; reads and writes them, reads a cache row per token and the positions
    pos, q, k, cache = call.tensor(0), call.tensor(1), call.tensor(2), call.tensor(4)
    head = call.scalar(3)
    if not isinstance(head, int) or head <= 0 or cache is None or len(cache.dims) != 2:
        return None
    rot = min(cache.dims[1], head)
    tokens = pos.numel
    rotated = sum(t.numel // head * rot for t in (q, k) if t is not None)
    moved = rotated * q.itemsize
    reads = pos.nbytes_read + tokens * cache.dims[1] * cache.itemsize + moved
    return Cost(3 * rotated, reads + moved, VECTOR, q.dtype, written=moved)


def _cache_write(call: OpCall) -> Cost | None:
    # (key [T, Hk, D], value, key_cache!, value_cache!, slot_mapping [T], kv_cache_dtype, k_scale,
    # v_scale): each token's key and value copied into its cache slot (at the cache's element size)
    k, v, kc, vc, slots = (call.tensor(i) for i in range(5))
    written = k.numel * kc.itemsize + v.numel * vc.itemsize
    return Cost(0, k.nbytes_read + v.nbytes_read + slots.nbytes_read + written, VECTOR, k.dtype, written=written)


formula(f"{CACHE_NS}::reshape_and_cache", f"{CACHE_NS}::reshape_and_cache_flash")(_cache_write)


def _quant(dynamic: bool):
    def cost(call: OpCall) -> Cost | None:
        # (result!, input, scale[!], ...): 2 per element, + 1 for a dynamic scale's max; reads the
        # input (and a static scale), writes the quantized result (and a dynamic scale)
        out, x, scale = call.tensor(0), call.tensor(1), call.tensor(2)
        written = out.numel * out.itemsize + (scale.numel * scale.itemsize if dynamic else 0)
        reads = x.nbytes_read + (0 if dynamic else scale.nbytes_read)
        return Cost((3 if dynamic else 2) * x.numel, reads + written, VECTOR, x.dtype, written=written)
    return cost


formula(f"{NS}::static_scaled_fp8_quant", f"{NS}::static_scaled_int8_quant")(_quant(False))
formula(f"{NS}::dynamic_scaled_fp8_quant", f"{NS}::dynamic_per_token_scaled_fp8_quant",
        f"{NS}::dynamic_scaled_int8_quant")(_quant(True))
