"""The profile grid: what `wlprof profile` measures, designed for coverage rather than replaying studies.

Every op class a workload runs, over the sizes that decide its time, through the
workloads themselves (so each call carries the same data facts and runs in the same
context as in a study):

- GEMMs (workload `gemm`): M over powers of two and their midpoints, K and N over
  1024..16384, in the three layouts a model runs (A @ B, A @ W.T, nn.Linear with a bias);
  skinny M (1..64) is the weight-streaming regime, large M the tile-and-wave one; and
  widths whose rows are not 16-byte multiples (12, 36, 1001, 2050, 50257), which cuBLAS
  runs with other kernels; ragged shapes (M and widths between the powers of two and the
  midpoints, whose tiles do not divide them evenly); narrow K (128, 512) and a wide N (32768);
- elementwise and copies (workload `elementwise`): 2^10..2^28 elements, and sizes between
  them that are odd or round decimal numbers, L2-resident to far past the 60 MB L2; matvec
  and matmul sides; mixed precision's casts and float32 + bfloat16 adds;
- index ops (workload `gnn`): gather, scatter_add, index_add, segment reduce and CSR SpMM
  over graphs of 2^14..2^20 nodes, 32..512 features, mean degrees 6, 16 and 32, three index
  distributions (uniform, RMAT, destination hubs zipf:1.5) in source and destination order;
  PyG's layers over them;
- MoE (workload `moe`): router, dispatch, grouped GEMMs with per-group token counts and
  combine, for 8..128 experts, top-1/2/4/8, five widths (d_ff from 0.67x to 3.5x d_model)
  and token counts 64..16384 with midpoints, under several routings, in the three dispatches;
- MLP blocks (workload `mlp`): two nn.Linear layers and their activation at four widths
  and batches 1..4096, where each layer's weights leave the L2 to the other's (the `gemm
  linear` section repeats one layer, whose weights stay in the L2 when they fit);
- training layers (workload `layers`), forward and backward: convolutions, batch and group
  norm, pooling over images; layer norm, causal attention, cross entropy and embeddings over
  sequences; batch norms from 32 to 2048 channels; layout-changing copies, an LSTM, embedding
  bags and linear layers with bias;
- optimizer steps (workload `optim`): AdamW and SGD, foreach and fused, over 4, 16 and 64 float32
  tensors of 4,096 to 16,777,216 elements each.

Sections run coarse first: `pass 1` holds every section's coarse points, `pass 2` the
rest; a budget that runs out in pass 2 leaves every section covered. `scale="cpu"` is a
miniature of the same grid that runs on a CPU in minutes (for tests and dry runs).
"""

from __future__ import annotations

from dataclasses import dataclass

from wlprof.capture import CaptureConfig
from wlprof.study import Study

# Short captures: the model needs kernel times (3 profiled steps, for their spread) and the
# host's unprofiled timings (latency and back-to-back), not long statistics.
PROFILE_CAPTURE = CaptureConfig(warmup=2, latency_reps=5, batches=2, min_batch_ms=2.0, profiled_steps=3,
                                profiler_warmup=1, graph=False)

M_POW = [1 << i for i in range(14)]  # 1..8192
M_MID = [3 << i for i in range(12)]  # 3, 6, 12, ..., 6144: the midpoints
KN_MAIN = [1024, 4096, 16384]
KN_MID = [2048, 8192]
ODD_M = [1, 16, 1024, 8192]
ODD_KN = [(4096, 12), (2048, 36), (1001, 4096), (4096, 1001), (2050, 2050), (768, 50257)]
# widths between the powers of two (multiples of 256, as model widths are) and M between the grid's
# powers and midpoints: a shape whose tiles do not divide it evenly
RAGGED_M = [1, 5, 24, 80, 300, 1000, 2500, 7000]
RAGGED_KN = ([(k, n) for k in (1536, 5120, 12288) for n in (2816, 7168)]
             + [(k, n) for k in (2816, 7168) for n in (1536, 5120, 12288)])
RAGGED_LINEAR = [(1536, 5120), (5120, 1536), (2816, 12288), (12288, 2816), (7168, 7168)]
# between 2^k and 2^(k+1), k = 10..24: odd sizes and round decimal ones (multiples of 8 to 32 only)
IRREGULAR_NUMEL = [1_400, 2_897, 5_800, 11_587, 23_000, 46_341, 93_000, 185_365, 370_000, 741_455, 1_480_000,
                   2_965_821, 5_930_000, 11_863_283, 23_730_000]
# narrow K (a head's or a low-rank projection's 64..512) and wide N (a vocabulary past 16384)
NARROW_M = [1, 4, 16, 64, 256, 1024, 4096, 8192]
NARROW_KN = [(k, n) for k in (128, 512) for n in KN_MAIN] + [(k, 32768) for k in (1024, 4096)]
MLP_WIDTHS = ((1024, 4096, "gelu"), (2048, 8192, "silu"), (5120, 20480, "gelu"), (8192, 28672, "silu"))
MLP_BATCHES = ([1, 4, 16, 64, 256, 1024, 4096], [2, 8, 32, 128, 512, 2048])  # pass 1, pass 2


@dataclass(frozen=True)
class Section:
    name: str  # e.g. "gemm nt"
    passno: int  # 1: coarse coverage, 2: the fill-in
    study: Study
    points: int  # sweep points, for the budget
    cost_s: float  # expected seconds per point on an H200 (the budget's first guess)


def _study(name: str, workload: str, params: dict, dtype: str | None, device: str | None) -> Study:
    return Study(workload=workload, params=params, device=device, dtype=dtype, capture=PROFILE_CAPTURE,
                 name=f"profile:{name}", description=f"wlprof profile grid: {name}")


def _shapes(ms, kns) -> list[str]:
    return [f"{m}x{k}x{n}" for m in ms for k, n in kns]


def gpu_sections(device: str | None = "cuda") -> list[Section]:
    out: list[Section] = []
    main = [(k, n) for k in KN_MAIN for n in KN_MAIN]
    mid = [(k, n) for k in KN_MID for n in KN_MID]
    linear_main = [(1024, 4096), (4096, 1024), (4096, 16384), (16384, 4096), (2048, 8192), (8192, 2048)]
    for layout in ("nn", "nt", "linear"):
        coarse = _shapes(M_POW, main if layout != "linear" else linear_main)
        fill = _shapes(M_MID, mid if layout != "linear" else [(2048, 8192), (8192, 2048)])
        for passno, shapes in ((1, coarse), (2, fill)):
            out.append(Section(f"gemm {layout}", passno, _study(f"gemm {layout} pass {passno}", "gemm", {
                "shapes": shapes, "layout": layout}, "bfloat16", device), len(shapes), 0.15))
    # rows whose bytes are not a multiple of 16 (an odd width, a vocabulary, a router over 12 experts):
    # cuBLAS runs other kernels for them
    out.append(Section("gemm odd", 2, _study("gemm odd pass 2", "gemm", {"shapes": _shapes(ODD_M, ODD_KN),
                                                                         "layout": "nn"}, "bfloat16", device),
                       len(ODD_M) * len(ODD_KN), 0.3))
    for layout, kns in (("nn", RAGGED_KN), ("linear", RAGGED_LINEAR)):
        shapes = _shapes(RAGGED_M, kns)
        out.append(Section("gemm ragged", 2, _study(f"gemm ragged {layout} pass 2", "gemm", {
            "shapes": shapes, "layout": layout}, "bfloat16", device), len(shapes), 0.4))
    shapes = _shapes(NARROW_M, NARROW_KN)
    out.append(Section("gemm narrow", 2, _study("gemm narrow nn pass 2", "gemm", {"shapes": shapes, "layout": "nn"},
                                                "bfloat16", device), len(shapes), 0.15))
    sizes = [1 << i for i in range(10, 29)]
    vector_ops = ["copy", "relu", "gelu", "silu", "mul", "add", "dot"]
    params = {"ops": [*vector_ops, "matvec", "matmul"], "numel": sizes, "matvec_n": [1024, 2048, 4096, 8192, 16384],
              "matmul_n": [512, 1024, 2048, 4096, 8192]}
    out.append(Section("elementwise", 1, _study("elementwise pass 1", "elementwise", params, "bfloat16", device),
                       len(vector_ops) * len(sizes) + 10, 0.12))
    # pass 2: sizes between the powers of two that are not multiples of large ones (a model's tensors
    # seldom are): a kernel's last, partial block costs its own time when the whole is small
    for half, irregular in (("a", IRREGULAR_NUMEL[0::2]), ("b", IRREGULAR_NUMEL[1::2])):
        params = {"ops": vector_ops, "numel": irregular}
        out.append(Section("elementwise", 2, _study(f"elementwise pass 2 irregular {half}", "elementwise", params,
                                                    "bfloat16", device), len(vector_ops) * len(irregular), 0.12))
    # mixed precision's kernels: autocast's casts to float32 and back, a float32 tensor plus a bfloat16 one
    # (their loads convert each element, off the vectorized path of one-dtype kernels)
    params = {"ops": ["cast", "add_mixed"], "numel": sizes}
    out.append(Section("elementwise mixed", 2, _study("elementwise mixed", "elementwise", params, "bfloat16", device),
                       2 * len(sizes), 0.12))
    raw = ["scatter", "index_add", "segment", "csr"]
    # pass 2 moves the mean degree off pass 1's 16, so that per-edge and per-node costs separate
    for passno, scales, feats, ef in ((1, [14, 18], [32, 128, 512], 16), (1, [16, 20], [64, 256], 16),
                                      (2, [14, 18], [64, 256], 32), (2, [16, 20], [32, 512], 6)):
        for graph in ("uniform", "rmat", "zipf:1.5"):
            params = {"graph": graph, "scale": scales, "features": feats, "backend": raw, "reduction": "sum",
                      "edge_factor": ef}
            name = f"gnn raw {graph} pass {passno}" + (f" ef{ef}" if ef != 16 else "")
            out.append(Section("gnn raw", passno, _study(name, "gnn", params, "float32", device),
                               len(scales) * len(feats) * len(raw), 0.35))
    pyg = ["pyg:gcn", "pyg:gcn-csr", "pyg:sage", "pyg:sage-csr", "pyg:gat", "pyg:gat-csr"]
    for passno, scales, feats in ((1, [14, 18], [32, 128]), (1, [16, 20], [64, 256]),
                                  (2, [14, 18], [256]), (2, [16, 20], [32]), (2, [16, 20], [512])):
        for graph in ("rmat", "uniform"):
            params = {"graph": graph, "scale": scales, "features": feats, "backend": pyg, "reduction": "sum",
                      "edge_factor": 16}
            out.append(Section("gnn pyg", passno, _study(f"gnn pyg {graph} pass {passno}", "gnn", params,
                                                         "float32", device),
                               len(scales) * len(feats) * len(pyg), 0.35))
    for passno, batches in enumerate(MLP_BATCHES, 1):
        for d_model, d_ff, act in MLP_WIDTHS:
            params = {"batch": batches, "d_model": d_model, "d_ff": d_ff, "activation": act}
            out.append(Section("mlp", passno, _study(f"mlp d{d_model} pass {passno}", "mlp", params, "bfloat16",
                                                     device), len(batches), 0.3))
    # a training step's other layers, forward and backward: convolutions, norms, pooling (images), layer
    # norm, attention, cross entropy and embeddings (sequences); convolutions in float32 too (TF32 in cuDNN)
    # (the basic image and sequence layers in the coarse pass, so that a budget that stops in the fill-in still
    # holds every kind of a training step's layers)
    for name, dtype, params in LAYER_STUDIES:
        n = len(params["layers"]) * len(params["batch"]) * len(params["channels"]) * len(params["size"])
        out.append(Section("layers", 1 if name in COARSE_LAYERS else 2,
                           _study(f"layers {name}", "layers", params, dtype, device), n, 0.4))
    # a training step's optimizer over float32 parameters (what torch.autocast trains): its _foreach_* kernels
    # (a launch per chunk of tensors) and its fused one, over few to many tensors, every other power of two
    # of elements from 4,096 to 16,777,216 per tensor; the coarse pass every fourth power over 16 tensors
    coarse = {"optimizer": ["adamw", "sgd"], "impl": ["foreach", "fused"], "tensors": [16],
              "numel": [1 << i for i in range(12, 25, 4)]}
    out.append(Section("optim", 1, _study("optim coarse", "optim", coarse, "float32", device), 16, 0.3))
    params = {"optimizer": ["adamw", "sgd"], "impl": ["foreach", "fused"], "tensors": [4, 16, 64],
              "numel": [1 << i for i in range(12, 25, 2)]}
    out.append(Section("optim", 2, _study("optim", "optim", params, "float32", device), 84, 0.3))
    for i, (tokens, experts, top_k, d_model, d_ff, routings) in enumerate(moe_configs()):
        for routing in routings:
            dispatches = moe_dispatches(tokens, experts, top_k, d_model, d_ff, routing)
            if not dispatches:
                continue
            params = {"tokens": [tokens], "experts": experts, "top_k": top_k, "d_model": d_model, "d_ff": d_ff,
                      "routing": [routing], "dispatch": dispatches, "ffn": "swiglu"}
            out.append(Section("moe", 1 if i % 2 == 0 else 2,
                               _study(f"moe T{tokens} E{experts} k{top_k} d{d_model} {routing}", "moe", params,
                                      "bfloat16", device), len(dispatches), 0.45))
    return out


COARSE_LAYERS = ("images", "sequences")  # the layer studies of the coarse pass
LAYER_STUDIES = (
    ("images", "bfloat16", {"layers": ["conv2d", "batch_norm", "group_norm", "max_pool", "avg_pool"],
                            "batch": [8, 32], "channels": [64, 256], "size": [28]}),
    # a batch norm's time follows its channels (the blocks it runs in parallel) and the N x S x S values each
    # reduces, from a few hundred to a quarter million, with float32 weights as a float32 module under
    # torch.autocast runs it; convolutions and pooling over larger batches and images
    ("images amp", "bfloat16", {"layers": ["batch_norm"], "batch": [4, 32, 256], "channels": [64, 256],
                                "size": [8, 32], "norm_weights": "float32"}),
    # batch norms from a stem's 32 channels to a late stage's 2048
    ("images bn channels", "bfloat16", {"layers": ["batch_norm"], "batch": [16, 96], "channels": [32, 128, 512, 2048],
                                        "size": [12, 24], "norm_weights": "float32"}),
    ("images large", "bfloat16", {"layers": ["conv2d", "max_pool"], "batch": [128], "channels": [64, 256],
                                  "size": [16, 32]}),
    ("conv fp32", "float32", {"layers": ["conv2d"], "batch": [8, 32], "channels": [128], "size": [32]}),
    ("sequences", "bfloat16", {"layers": ["layer_norm", "attention", "cross_entropy", "embedding"],
                               "batch": [4, 16], "channels": [1024], "size": [256, 1024]}),
    ("vocabulary", "bfloat16", {"layers": ["cross_entropy"], "batch": [4], "channels": [32000], "size": [256, 1024]}),
    # copies that change the memory layout (NCHW <-> NHWC, a head split and its merge), which run at other
    # rates than contiguous ones
    ("layouts", "bfloat16", {"layers": ["channels_last"], "batch": [8, 64], "channels": [64, 256], "size": [14, 56]}),
    ("head layouts", "bfloat16", {"layers": ["head_transpose"], "batch": [4, 16], "channels": [1024, 4096],
                                  "size": [256, 2048]}),
    # pointwise convolutions (a bottleneck's, a depthwise-separable block's), whose cuDNN kernels differ
    ("conv k1", "bfloat16", {"layers": ["conv2d"], "batch": [32, 128], "channels": [64, 256], "size": [14, 56],
                             "kernel_size": 1}),
    # linear layers with bias, forward and backward: their GEMMs in a training step's layouts, and the bias
    # gradient, a sum over the N x S rows of the output's gradient (a column reduction, slower per byte than
    # a row's), in bfloat16 and in float32
    ("linear", "bfloat16", {"layers": ["linear"], "batch": [4, 16], "channels": [512, 2048], "size": [256, 1024]}),
    ("linear fp32", "float32", {"layers": ["linear"], "batch": [4], "channels": [256, 1024], "size": [64, 512]}),
    # cuDNN's LSTM forward and backward, in float32 as recurrent models train
    ("rnn", "float32", {"layers": ["lstm"], "batch": [8, 64], "channels": [256, 1024], "size": [32, 128]}),
    # summed embedding bags in float32 (a recommender's tables), a table the L2 holds and one it does not:
    # the dense backward writes the whole table's gradient
    ("bags", "float32", {"layers": ["embedding_bag"], "batch": [256, 2048], "channels": [64, 256], "size": [4, 32]}),
    ("bags large", "float32", {"layers": ["embedding_bag"], "batch": [256, 2048], "channels": [64], "size": [4, 32],
                               "vocab": 1_000_000}),
)

MOE_MAX_FLOP = 25e12  # a grid point's step at most this much expert work (about 40 ms on an H200)
MOE_MAX_BYTES = 60 * 2**30  # and this much device memory


def moe_dispatches(tokens: int, experts: int, top_k: int, d_model: int, d_ff: int, routing: str) -> list[str]:
    """The dispatches whose step stays within the grid's work and memory bounds (the padded one
    computes every expert's capacity rows: concentrated routings of many tokens are out)."""
    import torch

    from wlprof import workloads
    from wlprof.workloads.base import Point
    from wlprof.workloads.moe.costs import capacity
    from wlprof.workloads.moe.tensors import routing_for

    wl = workloads.get("moe")
    out = []
    for dispatch in ("loop", "padded", "grouped"):
        p = {"tokens": tokens, "experts": experts, "top_k": top_k, "routing": routing, "dispatch": dispatch,
             "capacity_factor": 0.0 if dispatch == "padded" else None, "d_model": d_model, "d_ff": d_ff,
             "activation": "swiglu", "seed": 0}
        rows = tokens * top_k
        if dispatch == "padded":
            rows = experts * capacity(0.0, routing_for(p).counts(), tokens, top_k)
        if 6.0 * rows * d_model * d_ff <= MOE_MAX_FLOP and \
                wl.estimate_bytes(Point("x", p), torch.bfloat16) <= MOE_MAX_BYTES:
            out.append(dispatch)
    return out


MOE_EXPERTS = (8, 16, 32, 64, 128)
MOE_TOP_K = (1, 2, 4, 8)
# (d_model, d_ff): expert FFNs wider than the model (Mixtral's 3.5x, 2.75x), about as wide, and
# narrower (fine-grained experts), from 768 to 4096
MOE_WIDTHS = ((768, 2048), (1024, 2816), (1536, 1024), (2048, 5632), (4096, 14336))
MOE_TOKENS = (64, 256, 384, 1024, 1536, 4096, 6144, 16384)  # powers of two and midpoints
MOE_ROUTINGS = ("balanced", "zipf:0.6", "zipf:1.4", "concentrated", "dispersed")


def moe_configs() -> list[tuple[int, int, int, int, int, list[str]]]:
    """(tokens, experts, top_k, d_model, d_ff, routings) of the MoE grid: every experts x top-k pair at
    two widths, widths, token counts and routings cycled through the pairs so that each meets each of
    the others; every other config runs two routings."""
    out = []
    i = 0
    for experts in MOE_EXPERTS:
        for top_k in MOE_TOP_K:
            for j in range(2):
                d_model, d_ff = MOE_WIDTHS[(2 * i + j * 3 + experts // 8) % len(MOE_WIDTHS)]
                tokens = MOE_TOKENS[(3 * i + j + experts // 16) % len(MOE_TOKENS)]
                feasible = [r for r in MOE_ROUTINGS if _feasible(r, tokens, experts, top_k)]
                n = 2 if (i + j) % 2 == 0 else 1
                picked = [feasible[(i + 2 * j + m * 2) % len(feasible)] for m in range(n)]
                out.append((tokens, experts, top_k, d_model, d_ff, list(dict.fromkeys(picked))))
            i += 1
    return out


def _feasible(routing: str, tokens: int, experts: int, top_k: int) -> bool:
    from wlprof.errors import InputError
    from wlprof.workloads.moe import routing as rt

    try:
        rt.check_feasible(rt.parse_spec(routing, "routing"), tokens, experts, top_k, "routing")
    except InputError:
        return False
    return True


def cpu_sections(device: str | None = "cpu") -> list[Section]:
    """The grid in miniature for a CPU (float32): the same sections and passes, small sizes."""
    out = []
    for layout in ("nn", "nt", "linear"):
        for passno, ms in ((1, [1, 4, 16, 64]), (2, [2, 8, 32])):
            shapes = _shapes(ms, [(64, 128), (128, 64), (256, 256)])
            out.append(Section(f"gemm {layout}", passno, _study(f"gemm {layout} pass {passno}", "gemm", {
                "shapes": shapes, "layout": layout}, "float32", device), len(shapes), 0.05))
    for passno, numel in ((1, [1 << 10, 1 << 13, 1 << 16, 1 << 19]), (2, [3 << 10, 3 << 14])):
        params = {"ops": ["copy", "relu", "gelu", "mul", "add", "dot", "matvec", "matmul"], "numel": numel,
                  "matvec_n": [64, 256], "matmul_n": [32, 64]}
        out.append(Section("elementwise", passno, _study(f"elementwise pass {passno}", "elementwise", params,
                                                         "float32", device), 6 * len(numel) + 4, 0.05))
    for passno, scales, feats in ((1, [8, 10], [8, 32]), (2, [9], [16])):
        for graph in ("uniform", "rmat"):
            params = {"graph": graph, "scale": scales, "features": feats,
                      "backend": ["scatter", "index_add", "segment", "csr", "pyg:gcn", "pyg:sage"],
                      "reduction": "sum", "edge_factor": 8}
            out.append(Section("gnn", passno, _study(f"gnn {graph} pass {passno}", "gnn", params, "float32", device),
                               len(scales) * len(feats) * 6, 0.1))
    for passno, batches in ((1, [1, 4, 16, 64]), (2, [2, 8, 32])):
        params = {"batch": batches, "d_model": 32, "d_ff": 128, "activation": "gelu"}
        out.append(Section("mlp", passno, _study(f"mlp d32 pass {passno}", "mlp", params, "float32", device),
                           len(batches), 0.05))
    for i, (tokens, experts, top_k) in enumerate(((16, 4, 1), (64, 8, 2), (32, 8, 1), (128, 4, 2))):
        params = {"tokens": [tokens], "experts": experts, "top_k": top_k, "d_model": 32, "d_ff": 64,
                  "routing": ["balanced", "zipf:1.4"], "dispatch": ["loop", "padded", "grouped"], "ffn": "swiglu"}
        out.append(Section("moe", 1 + i % 2, _study(f"moe T{tokens} E{experts} k{top_k}", "moe", params, "float32",
                                                    device), 6, 0.2))
    return out


# the fill-in's order: where a budget that runs out costs least last
PASS2_ORDER = ("moe", "mlp", "gnn raw", "optim", "gemm odd", "gemm narrow", "gemm ragged", "gemm nt", "gemm linear", "gnn pyg", "gnn", "gemm nn", "layers",
               "elementwise")


def sections(scale: str = "gpu", device: str | None = None) -> list[Section]:
    """The grid's sections, pass 1 first (`scale`: gpu, the full grid; cpu, its miniature)."""
    secs = gpu_sections(device or "cuda") if scale == "gpu" else cpu_sections(device or "cpu")
    rank = {n: i for i, n in enumerate(PASS2_ORDER)}
    return sorted(secs, key=lambda s: (s.passno, rank.get(s.name, len(rank)) if s.passno == 2 else 0))


def expected_seconds(secs: list[Section]) -> float:
    return sum(s.points * s.cost_s for s in secs)
