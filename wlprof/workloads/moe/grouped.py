"""Which grouped-GEMM path torch takes: probed on the device, never assumed."""

from __future__ import annotations

PATH_FUSED = "torch._grouped_mm"
PATH_TORCH_LOOP = "torch._grouped_mm: per-group mm"
PATH_FALLBACK = "fallback: per-group mm"



def _grouped_mm_op():
    """torch._grouped_mm where this torch has it, else None (tests replace this to force the fallback)."""
    import torch

    return getattr(torch, "_grouped_mm", None)


def probe_grouped_dtype(device, dtype) -> str | None:
    """None if torch._grouped_mm takes `dtype` on `device` (or does not exist), else torch's refusal."""
    import torch

    op = _grouped_mm_op()
    if op is None:
        return None
    # 16 x 16 operands: aligned for every dtype (16 * 1 byte), so only the dtype can be refused.
    a = torch.zeros(4, 16, device=device, dtype=dtype)
    b = torch.zeros(2, 16, 16, device=device, dtype=dtype)
    offs = torch.tensor([2, 4], device=device, dtype=torch.int32)
    try:
        op(a, b, offs=offs)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except RuntimeError as exc:
        return str(exc).splitlines()[0][:200]
    return None


def grouped_path(device, dtype, w1t, offs_len: int) -> tuple[str, str | None]:
    """Which grouped-GEMM path runs for these weights: observed, not assumed.

    One call on the real weights runs under torch.profiler (CPU activity only): a
    nested aten::mm or a host read of `offs` (aten::item) means torch ran it as one
    mm per group; none means one grouped kernel. Returns (path, why the fallback). A step
    listed for a GPU (`predict --spec`) takes CUDA's path: one grouped kernel for bfloat16
    (CUTLASS on sm90 and later), one mm per group for the other dtypes.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile

    from wlprof.stderr_filter import profiler_noise_filtered
    from wlprof.workloads.base import listing_only

    op = _grouped_mm_op()
    if op is None:
        return PATH_FALLBACK, "this torch has no torch._grouped_mm"
    if listing_only():
        # listed for a GPU (`predict --spec`): what CUDA runs, not what this CPU or the meta device does
        # (the CPU runs every dtype one mm per group; the meta kernel refuses all but bfloat16)
        return (PATH_FUSED if dtype == torch.bfloat16 else PATH_TORCH_LOOP), None
    a = torch.zeros(8, w1t.shape[1], device=device, dtype=dtype)
    offs = torch.full((offs_len,), 8, device=device, dtype=torch.int32)  # all 8 rows in group 0
    try:
        with profiler_noise_filtered(), profile(activities=[ProfilerActivity.CPU]) as prof:
            op(a, w1t, offs=offs)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
    except RuntimeError as exc:
        return PATH_FALLBACK, f"torch._grouped_mm refused: {str(exc).splitlines()[0][:160]}"
    names = {e.name for e in prof.events()}
    per_group = bool(names & {"aten::mm", "aten::addmm", "aten::bmm", "aten::item", "aten::_local_scalar_dense"})
    return (PATH_TORCH_LOOP if per_group else PATH_FUSED), None


def grouped_ffn(w1, w3, w2, ffn: str, path: str, sizes: list[int], d_model: int):
    """The experts' FFN over rows grouped by expert, as `run(xs, offs)`: one `_grouped_mm` per weight
    (its B column-major), or on the fallback path each expert's rows (group sizes `sizes`) through its
    own FFN."""
    import torch

    from wlprof.workloads.moe.tensors import _act, expert_ffn

    act = _act(ffn)
    w1t, w2t = w1.transpose(1, 2), w2.transpose(1, 2)  # [E, d, f], [E, f, d]: column-major B
    w3t = w3.transpose(1, 2) if w3 is not None else None
    gmm = _grouped_mm_op()

    def run(xs, offs):
        if path == PATH_FALLBACK:
            parts = [expert_ffn(part, w1[e], w3[e] if w3 is not None else None, w2[e], ffn)
                     for e, part in enumerate(xs.split(sizes)) if sizes[e] > 0]
            return torch.cat(parts) if parts else xs.new_zeros(0, d_model)
        if w3t is not None:
            h = act(gmm(xs, w1t, offs=offs)) * gmm(xs, w3t, offs=offs)
        else:
            h = act(gmm(xs, w1t, offs=offs))
        return gmm(h, w2t, offs=offs)

    return run

