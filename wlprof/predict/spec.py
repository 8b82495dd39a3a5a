"""`--spec`: a workload's op calls at a configuration never run, listed without a GPU.

`parse_spec('moe tokens=4096 experts=32 top_k=2 routing=zipf:1.1')` is the workload and its
parameters (each value a TOML scalar or list, else a string). `record(spec)` builds the
workload's step and runs it once under torch.profiler on the CPU with every floating
tensor of more than `BIG` elements on the meta device (`MetaBig`): the index data a step
decides its shapes from (routing, graphs, expert counts) is real and small, the weights
and activations are shapes only, so a 45 GB MoE layer is listed in seconds in a few MB.
The recorded calls are the innermost non-view ops; names the CPU and meta kernels record
where CUDA launches another op are translated (`CUDA_NAMES`: index_select is CUDA's
gather). Each call carries its point's parameters and build facts, as a profiled run's do.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from wlprof.errors import InputError, Key, did_you_mean

_SPEC_KEY = "--spec"
BIG = 1 << 16  # floating tensors with more elements live on the meta device
# CPU/meta op -> the op CUDA launches for it, where they differ (torch 2.11 on the H200); CUDA's
# index_select runs as gather above INDEX_SELECT_MAX indices (16 stayed index_select, 128 did not)
INDEX_SELECT_MAX = 16
CUDA_NAMES = {"aten::index_select": "aten::gather", "aten::zero_": "aten::fill_", "aten::full": "aten::fill_",
              "aten::zeros": "aten::fill_", "aten::new_zeros": "aten::fill_", "aten::zeros_like": "aten::fill_",
              "aten::_sparse_addmm": "aten::addmm", "aten::mkldnn_convolution": "aten::cudnn_convolution",
              # the CPU's max_pool2d without gradients runs its own kernel; CUDA's calls max_pool2d_with_indices
              # with the same arguments
              "aten::max_pool2d": "aten::max_pool2d_with_indices"}


DTYPES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16",
          "float32": "float32", "fp32": "float32"}


@dataclass(frozen=True)
class Spec:
    workload: str
    params: dict[str, Any]
    text: str


def parse_spec(text: str, arg: str = "--spec") -> Spec:
    """'moe tokens=4096 experts=32 top_k=2 routing=zipf:1.1' -> Spec('moe', {...})."""
    import shlex

    from wlprof import workloads
    from wlprof.params import toml_value

    parts = shlex.split(text or "")
    if not parts:
        raise InputError(arg, "must name a workload and its parameters, e.g. 'moe tokens=4096 experts=32'", text)
    name = parts[0]
    if name not in workloads.names():
        raise InputError(arg, f"must start with a workload, one of {', '.join(workloads.names())}", name,
                         hint=did_you_mean(name, workloads.names()))
    params: dict[str, Any] = {}
    for p in parts[1:]:
        key, sep, raw = p.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise InputError(arg, "must be WORKLOAD KEY=VALUE ... (e.g. tokens=4096)", p)
        if key in params:
            raise InputError(arg, f"must give {key} once (a list is comma-separated: {key}=A,B)", text)
        params[key] = toml_value(raw)
    return Spec(name, params, text)


def _meta_mode():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten, tree_map

    meta = torch.device("meta")

    def is_big(shape, dtype) -> bool:
        return dtype is not None and dtype.is_floating_point and math.prod(shape) > BIG

    class MetaBig(TorchDispatchMode):
        """The CPU, except that large floating tensors are shapes only (the meta device)."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            flat, _ = tree_flatten((args, kwargs))
            tensors = [t for t in flat if isinstance(t, torch.Tensor)]
            if any(t.is_meta for t in tensors) and "sparse_c" in func.__name__:
                # a sparse tensor built from shapes only: real zeros for its values (the indices are real)
                def to_real(t):
                    return torch.zeros(t.shape, dtype=t.dtype) if isinstance(t, torch.Tensor) and t.is_meta else t

                args, kwargs = tree_map(to_real, (args, kwargs))
                if "device" in kwargs:
                    kwargs["device"] = torch.device("cpu")
                return func(*args, **kwargs)
            if any(t.is_meta for t in tensors):
                return on_meta(func, args, kwargs)
            if not tensors:  # a factory: new storage
                out = func(*args, **kwargs)
                outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
                if any(is_big(t.shape, t.dtype) for t in outs):
                    return tree_map(lambda t: torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=meta)
                                    if isinstance(t, torch.Tensor) else t, out)
                return out
            try:
                return func(*args, **kwargs)
            except (NotImplementedError, RuntimeError) as exc:
                if "not implemented for" not in str(exc):
                    raise
                return on_meta(func, args, kwargs)  # a dtype the CPU lacks (bf16 CSR SpMM): its shape

    def on_meta(func, args, kwargs):
        """`func` on the meta device: its output's shape without its data."""
        def to_meta(t):
            if not isinstance(t, torch.Tensor):
                return t
            if t.layout != torch.strided:
                # no meta kernels for sparse layouts: the dense shape gives the output (the
                # profiler recorded the call with its sparse input before this mode ran)
                return torch.empty(t.shape, dtype=t.dtype, device=meta)
            return t if t.is_meta else t.to(meta)

        args, kwargs = tree_map(to_meta, (args, kwargs))
        kwargs.pop("generator", None)
        if "device" in kwargs:  # a copy to the CPU stays a shape
            kwargs["device"] = meta
        try:
            return func(*args, **kwargs)
        except NotImplementedError:
            if func._schema.returns:
                raise
            return None  # an in-place op that returns nothing (a fused optimizer step): shapes stay as they are
        except RuntimeError as exc:
            if func._overloadpacket is not torch.ops.aten._grouped_mm or "BF16" not in str(exc):
                raise
            return _grouped_mm_output(exc, args, kwargs)

    return MetaBig


def _grouped_mm_output(exc: RuntimeError, args, kwargs):
    """`_grouped_mm`'s output on the meta device for a floating dtype other than bfloat16. torch's meta
    kernel checks the dtype of CUDA's one grouped kernel (bfloat16 only) and refuses the others, which
    CUDA (and the CPU) run as one mm per group into the same output; raises `exc` where this torch lacks
    the meta kernel's output rule."""
    try:
        from torch._meta_registrations import _create_grouped_mm_output_tensor
    except ImportError:
        raise exc from None
    offs = args[2] if len(args) > 2 else kwargs.get("offs")
    return _create_grouped_mm_output_tensor(args[0], args[1], offs, kwargs.get("out_dtype"))


def _fused_optimizers_on_meta():
    """torch.optim's fused steps accept parameters on the meta device (they refuse any device without a
    fused kernel before dispatch)."""
    import contextlib

    import torch.optim.optimizer as optimizer

    @contextlib.contextmanager
    def guard():
        supported = getattr(optimizer, "_get_fused_kernels_supported_devices", None)
        if supported is None:  # a torch without the check: nothing to widen
            yield
            return
        optimizer._get_fused_kernels_supported_devices = lambda: [*supported(), "meta"]
        try:
            yield
        finally:
            optimizer._get_fused_kernels_supported_devices = supported
    return guard()


def _factory_guard():
    """Factories with a size argument (randn, empty, zeros) allocate before the mode can move them:
    route the large floating ones to the meta device up front."""
    import contextlib

    import torch

    names = ("randn", "rand", "empty", "zeros", "ones", "full", "randint")
    originals = {n: getattr(torch, n) for n in names}

    def wrap(fn):
        def inner(*size, **kw):
            shape = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)) else size
            if fn is originals["full"]:
                shape = size[0]
            dtype = kw.get("dtype") or torch.get_default_dtype()
            try:
                n = math.prod(int(s) for s in shape)
            except (TypeError, ValueError):
                n = 0
            if dtype.is_floating_point and n > BIG:
                kw = {k: v for k, v in kw.items() if k != "generator"}
                kw["device"] = "meta"
            return fn(*size, **kw)

        return inner

    sparse = ("sparse_csr_tensor", "sparse_csc_tensor", "sparse_compressed_tensor", "sparse_coo_tensor")
    sparse_originals = {n: getattr(torch, n) for n in sparse}

    def real_parts(fn):
        """A sparse constructor checks its parts' devices before any dispatch: meta values become zeros."""
        def inner(*args, **kw):
            from torch.utils._python_dispatch import _disable_current_modes

            with _disable_current_modes():  # real zeros whatever their size (no meta mode, no guard)
                args = [originals["zeros"](a.shape, dtype=a.dtype) if isinstance(a, torch.Tensor) and a.is_meta
                        else a for a in args]
            return fn(*args, **kw)

        return inner

    @contextlib.contextmanager
    def guard():
        for n in names:
            setattr(torch, n, wrap(originals[n]))
        for n in sparse:
            setattr(torch, n, real_parts(sparse_originals[n]))
        try:
            yield
        finally:
            for n, f in {**originals, **sparse_originals}.items():
                setattr(torch, n, f)

    return guard()


def _guard_generators():
    """torch.Generator(device='meta') does not exist: a meta tensor's in-place draw takes none."""
    import contextlib

    import torch

    orig = torch.Tensor.normal_

    def normal_(self, *a, generator=None, **kw):
        if self.is_meta:
            return orig(self, *a, **kw)
        return orig(self, *a, generator=generator, **kw)

    @contextlib.contextmanager
    def guard():
        torch.Tensor.normal_ = normal_
        try:
            yield
        finally:
            torch.Tensor.normal_ = orig

    return guard()


def _tensors_report_cuda():
    """While a step is listed for a GPU, every tensor answers `is_cuda` True, so that the step's Python code
    takes the branches it takes on CUDA: PyG's `spmm(reduce='mean')` over a CSR adjacency divides a sparse
    mm's sums by the degrees there, where on the CPU it calls a CPU-only kernel that launches nothing."""
    import contextlib

    import torch

    @contextlib.contextmanager
    def guard():
        had = "is_cuda" in torch.Tensor.__dict__
        before = torch.Tensor.__dict__.get("is_cuda")
        torch.Tensor.is_cuda = property(lambda self: True)
        try:
            yield
        finally:
            if had:
                torch.Tensor.is_cuda = before
            else:
                del torch.Tensor.is_cuda

    return guard()


def record(spec: Spec, dtype: str | None = None, device_name: str = "spec",
           launching: frozenset[str] | None = None, device_memory: int | None = None,
           device_label: str = "the profiled GPU") -> pd.DataFrame:
    """The op calls of one step of every point of `spec`, as rows of an ops table (no durations); a point
    that would not fit in `device_memory` bytes (the profiled GPU's, where known) is refused, as `wlprof run`
    refuses it."""
    import contextlib
    import os
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from wlprof import workloads
    from wlprof.device import dtype_name
    from wlprof.params import parse_all
    from wlprof.stderr_filter import profiler_noise_filtered
    from wlprof.workloads.base import listing_for_another_device

    wl = workloads.get(spec.workload)
    if wl.unlistable:
        raise InputError(Key("spec", "store"), f"must name a workload whose step the meta device lists as CUDA "
                         f"launches it ({wl.name}: {wl.unlistable}; predict a trace of it with --trace)", spec.text)
    cpu = torch.device("cpu")
    params = dict(spec.params)
    given = params.pop("dtype", None)
    if given is not None and dtype is not None and DTYPES.get(str(given).lower()) != DTYPES.get(str(dtype).lower()):
        raise InputError("--dtype", f"must agree with {_SPEC_KEY}'s dtype ({given}), or be left out", dtype)
    name = str(given or dtype or "bfloat16")
    dt = DTYPES.get(name.lower())
    if dt is None:  # blamed on where the dtype was given: the spec's dtype= or --dtype
        raise InputError(_SPEC_KEY if given is not None else "--dtype",
                         f"{'dtype ' if given is not None else ''}must be one of {', '.join(DTYPES)}", name)
    dt = getattr(torch, dt)
    # the defaults a user means are the GPU's (d_model 4096, 64 experts), checked as on the CPU
    try:
        with listing_for_another_device():
            parsed = wl.spec(parse_all(wl.params, params, "cuda", wl.name), cpu, dt)
        points = wl.points(parsed.spec)
    except InputError as exc:  # named as the user wrote it: `--spec's batch`, not `--batch`
        raise exc.spelled(lambda k: f"{_SPEC_KEY}'s {k.name}") from None
    _check_host_memory(wl, points, spec.text)
    _check_device_memory(wl, points, dt, device_memory, device_label, spec.text)
    frames = []
    for i, point in enumerate(points):
        with torch.no_grad():
            wl.prepare(point, cpu)  # the index data for real: its sizes decide the step's calls
        with contextlib.ExitStack() as stack:
            stack.enter_context(listing_for_another_device())
            stack.enter_context(_factory_guard())
            stack.enter_context(_guard_generators())
            stack.enter_context(_fused_optimizers_on_meta())
            stack.enter_context(torch.no_grad())  # inference_mode bypasses the mode for copies
            stack.enter_context(_tensors_report_cuda())
            try:
                stack.enter_context(_meta_mode()())
                built = wl.build(point, cpu, dt)
                with profiler_noise_filtered(), profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                    with record_function("wlprof/step#0"):
                        built.step()
            except (RuntimeError, NotImplementedError, TypeError, ValueError) as exc:
                first = (str(exc).splitlines() or [""])[0]  # torch's reason, whole where it is short
                why = first if len(first) <= 300 else first[:300].rsplit(" ", 1)[0] + " ..."
                raise InputError(Key("spec", "store"), f"must be a configuration whose step can be listed on the "
                                 f"meta device (point '{point.variant}': {type(exc).__name__}: "
                                 f"{why})", spec.text) from None
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            ops = calls_of_trace(path, launching, built.tensor_lists)
        finally:
            os.unlink(path)
        ops = _without_host_step_reads(ops)
        ident = {"run_id": f"spec:{spec.workload}", "workload": wl.name, "variant": point.variant, "point": i,
                 "device_type": "cuda", "device_name": device_name, "dtype": dtype_name(dt)}
        for k, v in {**ident, **point.params, **built.facts}.items():
            ops[k] = [v] * len(ops) if isinstance(v, list) else v
        frames.append(ops)
    return pd.concat(frames, ignore_index=True)


def _check_host_memory(wl, points, text: str) -> None:
    """Refuse a spec whose real index data (a graph, drawn on this CPU) would not fit in host memory."""
    import torch

    from wlprof.study import MEMORY_SHARE, _free_memory

    free = _free_memory(torch.device("cpu"))
    if free is None:
        return
    for p in points:
        need = wl.prepare_bytes(p)
        if need > MEMORY_SHARE * free:
            raise InputError(Key("spec", "store"), f"must be a configuration whose index data fits in this "
                             f"machine's memory to be listed: point '{p.variant}' draws about "
                             f"{need / 2**30:,.1f} GiB on the CPU, more than {MEMORY_SHARE:.0%} of the "
                             f"{free / 2**30:,.1f} GiB free", text)


def _check_device_memory(wl, points, dt, memory: int | None, name: str, text: str) -> None:
    """Refuse a spec a point of which would not fit in the profiled GPU's memory (`wlprof run`'s rule, against
    the whole memory rather than what is free): its step could never run there."""
    from wlprof.study import MEMORY_SHARE

    if not memory:
        return
    for p in points:
        need = wl.estimate_bytes(p, dt)
        if need > MEMORY_SHARE * memory:
            raise InputError(Key("spec", "store"), f"must be a configuration that fits in the profiled GPU's "
                             f"memory: point '{p.variant}' needs about {need / 2**30:,.1f} GiB, more than "
                             f"{MEMORY_SHARE:.0%} of {name}'s {memory / 2**30:,.1f} GiB", text)


def _without_host_step_reads(ops: pd.DataFrame) -> pd.DataFrame:
    """`ops` without torch.optim's work on step counters it keeps on the host (the foreach and for-loop
    implementations without `capturable`), in an `Optimizer.step` region: their reads
    (`aten::_local_scalar_dense`) and their increment, `_foreach_add_(state_steps, tensor(1.0), alpha)` over
    0-d tensors with a 0-d tensor as `other` (on the device, fused or capturable, the increment takes a
    Scalar and launches a kernel). On a CUDA step neither launches anything, and the listing, which holds
    every small tensor on the CPU, cannot tell them from device work."""
    if ops.empty or "region" not in ops:
        return ops
    region = ops.region.astype(object).where(ops.region.notna(), "").map(str)
    in_step = region.str.startswith("Optimizer.step").to_numpy()
    host = (ops.op_name == "aten::_local_scalar_dense").to_numpy() & in_step
    adds = np.flatnonzero((ops.op_name == "aten::_foreach_add_").to_numpy() & in_step)
    for i in adds.tolist():
        host[i] = _host_counter_increment(ops.op_input_dims.iat[i], ops.op_input_types.iat[i])
    return ops[~host].reset_index(drop=True)


def _host_counter_increment(dims_json, types_json) -> bool:
    """Whether a `_foreach_add_` is torch.optim's increment of host-side step counters: a list of 0-d
    tensors, a 0-d tensor `other` and a Scalar alpha."""
    import json

    try:
        dims, types = json.loads(dims_json), json.loads(types_json)
    except (TypeError, ValueError):
        return False
    from wlprof.cost.dtypes import is_tensor_type

    return (len(types) == 3 and types[0] == "TensorList" and is_tensor_type(types[1]) and types[2] == "Scalar"
            and isinstance(dims[0], list) and bool(dims[0]) and all(d == [] for d in dims[0]) and dims[1] == [])


_CPP_TYPES = {"float32": "float", "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float64": "double",
              "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
              "bool": "bool"}
# ops that launch their own kernels on CUDA whatever the CPU or meta kernel nests under them: a
# call is the outermost op of these (or of the profile's launching ops) on its branch of the tree
LAUNCHING = frozenset("aten::" + n for n in (
    "mm addmm bmm baddbmm _grouped_mm mv addmv dot _scaled_mm gelu silu relu clamp_min mul add sub div "
    "exp leaky_relu where lt gt ge eq ne abs copy_ fill_ cat sum mean amax _softmax topk sort cumsum gather "
    "scatter_ scatter_add_ scatter_reduce_ index_add_ index_copy_ index index_put_ _index_put_impl_ "
    "nonzero segment_reduce floor_divide arange all _local_scalar_dense repeat_interleave "
    "_convert_indices_from_coo_to_csr bincount clamp "
    "threshold_backward gelu_backward silu_backward sigmoid_backward tanh_backward leaky_relu_backward "
    "hardtanh_backward _addmm_activation _transform_bias_rescale_qkv").split())
# the tensor-list ops of optimizers and AMP (every `_foreach_*`, the fused optimizers): each launches its
# multi-tensor-apply kernels on CUDA, whether or not the profile holds that op
LIST_LAUNCHING = ("aten::_foreach_", "aten::_amp_foreach_", "aten::_fused_adam", "aten::_fused_sgd",
                  "aten::_fused_adagrad")
# work an op does on the CPU only: its checks of its inputs' values, read back to the host, which on CUDA it
# leaves to a device assert (ATen's one_hot checks the class values' min and max on other devices, "for
# cuda, rely on device assert thrown by scatter"); these children and what runs under them are no calls
CPU_ONLY_CHILDREN = {"aten::one_hot": frozenset(("aten::aminmax", "aten::min", "aten::max", "aten::item",
                                                 "aten::_local_scalar_dense"))}
# formula families whose ops are device-generic kernels (TensorIterator and reduction kernels, pooling, norms,
# losses, optimizer updates, resampling, index ops, embedding bags): CUDA launches each under the name the
# CPU recorded, unless the name is a backend's own (`_BACKEND_NAME`)
GENERIC_FAMILIES = frozenset(("elementwise", "elementwise_extra", "activations", "reductions", "pooling", "norms",
                              "losses", "optimizers", "resampling", "indexing", "indexing_data", "rnn"))
_BACKEND_NAME = re.compile(r"cpu|mkl|nnpack|fbgemm|onednn|cudnn|miopen|_mps")


def launches_as_recorded(name: str) -> bool:
    """Whether CUDA launches an op under the name a CPU trace recorded it with: an op of a device-generic
    formula family (`aten::sqrt`, `aten::lerp_`, `aten::_softmax_backward_data`) that is not a dispatcher
    and whose name is no backend's own kernel (`mkldnn_max_pool2d`, `..._for_cpu`)."""
    from wlprof.cost import registry

    return (registry.formula_family(name) in GENERIC_FAMILIES and not registry.uses_children(name)
            and _BACKEND_NAME.search(name) is None)


# ops that dispatch to others on CUDA too when they take these shapes (one-argument where is nonzero)
_DESCEND = {"aten::where": lambda types: sum(1 for t in types if t and t not in ("Scalar", "")) == 1}


def calls_of_trace(path: str, launching: frozenset[str] | None = None, lists=()) -> pd.DataFrame:
    """The op calls of a CPU trace as CUDA launches them (one row each, in launch order): on every
    branch of the op tree the outermost op that launches kernels on CUDA (`LAUNCHING`, the names in
    `launching`, and a costed op torch declares a CUDA kernel of its own for: `cuda_ops`), else an op CUDA
    runs as another (`CUDA_NAMES`). `lists`: the workload's recorded
    list calls (`Built.tensor_lists`), for the tensor lists the profiler records as `[]`."""
    return calls_and_left_out(path, launching, lists)[0].drop(columns="trace_step")


def calls_and_left_out(path: str, launching: frozenset[str] | None = None,
                       lists=()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`calls_of_trace`, and the work it leaves out: the outermost ops with a cost formula on the
    branches where no call but fills, copies and the op's own auxiliary work is kept (`op_name`, `ts_us`),
    e.g. a CPU-only kernel such as `_scaled_dot_product_flash_attention_for_cpu`, which CUDA runs under
    another name. Both carry `trace_step`, the profiler step each op ran in (0 without step markers)."""
    import json

    from wlprof import pipeline
    from wlprof.cost import registry
    from wlprof.cost.tensor_lists import fill_declared
    from wlprof.predict.cuda_ops import cuda_kernel_ops
    from wlprof.trace.join import join

    names_ok = LAUNCHING | (launching or frozenset())
    cuda_ops = cuda_kernel_ops()
    trace = pipeline.read(path)
    joined = join(trace)
    table, ops, _ = fill_declared(joined.ops, trace.args_table, lists)
    names = ops.name.to_numpy(dtype=object)
    parent = ops.parent.to_numpy()
    args_ids = ops.args_id.to_numpy()

    def args(i):
        a = args_ids[i]
        return table[a] if a is not None and 0 <= a < len(table) else {}

    def dumps(v):
        return json.dumps(v, separators=(",", ":")) if v is not None else None

    def launches(n: str) -> bool:
        # the in-place form of an op that launches (div_ of div) launches as it does
        # and an op with a cost formula that torch declares a CUDA kernel of its own for (pow, a layer norm)
        return (n in names_ok or n in CUDA_NAMES or n in CPU_ATTENTION or (n.endswith("_") and n[:-1] in names_ok)
                or ((n.startswith(LIST_LAUNCHING) or n in cuda_ops) and registry.has_formula(n)))

    launch = np.array([launches(n) for n in names], dtype=bool)
    for i in np.flatnonzero(launch):
        test = _DESCEND.get(names[i])
        if test is not None and test(args(i).get("Input type", [])):
            launch[i] = False
    # outermost: no launching ancestor (parents precede children in the table); a CPU-only check is no call
    covered = np.zeros(len(ops), bool)
    keep = np.zeros(len(ops), bool)
    cpu_only = np.zeros(len(ops), bool)
    for i in range(len(ops)):
        p = parent[i]
        cpu_only[i] = p >= 0 and (cpu_only[p] or names[i] in CPU_ONLY_CHILDREN.get(names[p], ()))
        inherited = p >= 0 and (covered[p] or keep[p]) or cpu_only[i]
        covered[i] = inherited
        keep[i] = launch[i] and not inherited
    # a kept call at or below that does the work (not a fill or copy CUDA also runs as setup, nor an op
    # nested as its parent's own auxiliary work: the bias sum inside oneDNN's LSTM layer is not the layer)
    kept_below = keep & ~np.isin(np.array([CUDA_NAMES.get(n, n) for n in names], dtype=object),
                                 list(registry.SUPPORT_OPS))
    for i in range(len(ops) - 1, -1, -1):
        p = parent[i]
        if kept_below[i] and p >= 0 and not registry.is_aux_of(names[p], names[i]):
            kept_below[p] = True
    lost = np.zeros(len(ops), bool)  # outermost costed ops on branches with no kept call
    inside = np.zeros(len(ops), bool)  # at or below a lost op
    for i in range(len(ops)):
        p = parent[i]
        if p >= 0 and inside[p]:
            inside[i] = True
        elif not (covered[i] or keep[i] or kept_below[i] or cpu_only[i]) and registry.has_formula(names[i]):
            lost[i] = inside[i] = True
    # an outermost costed op of such a branch that CUDA launches as recorded (`launches_as_recorded`: a sqrt,
    # the single-tensor optimizer's lerp_) is a call there, not work left out; what the CPU ran under it
    # (its fills and copies) is its own work, no call
    as_recorded = lost & np.array([launches_as_recorded(n) or n == "aten::_convolution" for n in names], dtype=bool)
    under = np.zeros(len(ops), bool)
    for i in range(len(ops)):
        p = parent[i]
        under[i] = p >= 0 and (under[p] or as_recorded[p])
    keep = (keep & ~under) | as_recorded
    lost &= ~as_recorded
    steps = ops.step.to_numpy() if "step" in ops else np.zeros(len(ops), int)
    left_out = pd.DataFrame({"op_name": names[lost].astype(str), "ts_us": ops.ts_ns.to_numpy()[lost] / 1e3,
                             "trace_step": steps[lost]}, columns=["op_name", "ts_us", "trace_step"])
    rows = []
    for i in np.flatnonzero(keep):
        a = args(i)
        rows.append({"op_name": CUDA_NAMES.get(names[i], names[i]), "_as": names[i],
                     "op_input_dims": dumps(a.get("Input Dims")),
                     "op_input_types": dumps(a.get("Input type")), "op_input_strides": dumps(a.get("Input Strides")),
                     "op_concrete_inputs": dumps(a.get("Concrete Inputs")),
                     "region": ops.region.iat[i] if "region" in ops else None, "ts_us": ops.ts_ns.iat[i] / 1e3,
                     "trace_step": steps[i]})
    out = pd.DataFrame(rows, columns=["op_name", "_as", "op_input_dims", "op_input_types", "op_input_strides",
                                      "op_concrete_inputs", "region", "ts_us", "trace_step"])
    out["step"] = 0
    out["dur_us"] = np.nan
    out["kernel_count"] = 1
    out = _translate(_cudnn_convolutions(out.sort_values("ts_us", kind="stable")))
    out = _cpu_attention(out, names_ok)
    return out.drop(columns="_as").reset_index(drop=True), left_out


# the CPU's fused attention (SDPA's CPU kernel), forward and backward; CUDA runs it as another kernel
CPU_ATTENTION = ("aten::_scaled_dot_product_flash_attention_for_cpu",
                 "aten::_scaled_dot_product_flash_attention_for_cpu_backward")


def _cpu_attention(ops: pd.DataFrame, held: frozenset[str]) -> pd.DataFrame:
    """The CPU's fused attention as CUDA's SDPA runs it, by the kernel that launches: float32 through the
    memory-efficient kernel (flash and cuDNN take 16-bit inputs only), `_efficient_attention_forward(q, k,
    v, bias, cu_q, cu_k, max_q, max_k, dropout_p, custom_mask_type, compute_log_sumexp, scale, ...)` on
    [B, S, H, D] views of the [B, H, S, D] inputs; 16-bit inputs through cuDNN's `_cudnn_attention_forward`
    where the profile holds it (the backend torch picked where it was measured), else flash's
    `_flash_attention_forward` ([B, S, H, D]), or the memory-efficient kernel where a mask was given (flash
    takes none: SDPA's `can_use_flash_attention` refuses an attn_mask). The backward likewise. The attention
    mask, where one was given, is the bias; the log-sum-exp is kept where the step runs a backward (training)."""
    import json

    rows = np.flatnonzero(ops._as.isin(CPU_ATTENTION).to_numpy())
    if not len(rows):
        return ops
    training = bool((ops._as == CPU_ATTENTION[1]).any())
    cudnn = "aten::_cudnn_attention_forward" in held

    def sc(value):
        return [], "Scalar", [], value

    def arg(dims, ctype, strides, bshd):
        """One tensor argument, as a [B, S, H, D] view where `bshd` (the [B, H, S, D] one transposed)."""
        if bshd and len(dims) == 4:
            dims = [dims[0], dims[2], dims[1], dims[3]]
            strides = [strides[0], strides[2], strides[1], strides[3]] if len(strides) == 4 else []
        return dims, ctype, strides, ""

    for i in rows:
        try:
            dims, types = json.loads(ops.op_input_dims.iat[i]), json.loads(ops.op_input_types.iat[i])
            strides = json.loads(ops.op_input_strides.iat[i] or "null") or [[]] * len(dims)
            conc = json.loads(ops.op_concrete_inputs.iat[i] or "null") or [""] * len(dims)
            backward = ops._as.iat[i] == CPU_ATTENTION[1]
            # forward (q, k, v, dropout_p, is_causal, attn_mask, scale); backward (grad_out, q, k, v, out, lse,
            # dropout_p, is_causal, attn_mask, scale)
            tensors, mask_at, dropout, causal = (6, 8, conc[6], conc[7]) if backward else (3, 5, conc[3], conc[4])
            four = (0, 1, 2, 3, 4) if backward else (0, 1, 2)
            if any(len(dims[j]) != 4 for j in four):
                continue
            mask = (dims[mask_at], types[mask_at], strides[mask_at] or [], "")
        except (TypeError, ValueError, IndexError):
            continue
        sixteen = types[0] in ("c10::BFloat16", "c10::Half")
        kind = "cudnn" if sixteen and cudnn else "flash" if sixteen and not mask[0] else "efficient"
        ts = [arg(dims[j], types[j], strides[j] or [], kind != "cudnn") for j in range(tensors)]
        bias = mask if mask[0] else ([], "", [], "")
        none, false, unset = ([], "", [], ""), sc("False"), sc("")
        lse, p, c = sc("True" if training else "False"), sc(dropout), sc(causal)
        mask_type = sc("1" if causal == "True" else "0")  # the efficient kernel's custom_mask_type: causal
        if not backward:
            q, k, v = ts
            name, args = {
                "efficient": ("aten::_efficient_attention_forward",
                              [q, k, v, bias, none, none, none, none, p, mask_type, lse, none]),
                "cudnn": ("aten::_cudnn_attention_forward",
                          [q, k, v, bias, none, none, unset, unset, lse, p, c, false, none]),
                "flash": ("aten::_flash_attention_forward", [q, k, v, none, none, unset, unset, p, c, false, none]),
            }[kind]
        else:
            g, q, k, v, o, m = ts
            name, args = {
                "efficient": ("aten::_efficient_attention_backward",
                              [g, q, k, v, bias, o, none, none, none, none, m, p, none, none, mask_type, false, none]),
                "cudnn": ("aten::_cudnn_attention_backward",
                          [g, q, k, v, o, m, none, none, bias, none, none, unset, unset, p, c, none]),
                "flash": ("aten::_flash_attention_backward",
                          [g, q, k, v, o, m, none, none, unset, unset, p, c, none, none, none]),
            }[kind]
        ops.iat[i, ops.columns.get_loc("op_name")] = name
        for col, j in (("op_input_dims", 0), ("op_input_types", 1), ("op_input_strides", 2),
                       ("op_concrete_inputs", 3)):
            ops.iat[i, ops.columns.get_loc(col)] = json.dumps([a[j] for a in args], separators=(",", ":"))
    return ops


def _conv_out(size: int, kernel: int, pad: int, stride: int, dilation: int) -> int:
    return (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1


def _cudnn_convolutions(ops: pd.DataFrame) -> pd.DataFrame:
    """oneDNN's convolution, `mkldnn_convolution(x, w, bias?, padding, stride, dilation, groups)`, and a
    `_convolution` whose CPU kernel has no op of its own (a transposed one), as CUDA's `_convolution` runs them:
    `cudnn_convolution(x, w, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32)` or
    `cudnn_convolution_transpose(x, w, padding, output_padding, stride, dilation, groups, ...)`, then, with a
    bias, `add_(out, bias viewed [1, C_out, 1, ...])` (ATen's Convolution.cpp). The output [N, C_out, *spatial]
    follows the input's layout (channels-last or not)."""
    import json

    def dump(v):
        return json.dumps(v, separators=(",", ":"))

    rows = np.flatnonzero(ops._as.isin(["aten::mkldnn_convolution", "aten::_convolution"]).to_numpy())
    if not len(rows):
        return ops
    extra = []
    for i in rows:
        try:
            dims, types = json.loads(ops.op_input_dims.iat[i]), json.loads(ops.op_input_types.iat[i])
            strides = json.loads(ops.op_input_strides.iat[i] or "null") or [[]] * len(dims)
            conc = json.loads(ops.op_concrete_inputs.iat[i] or "null") or [""] * len(dims)
            x, w, b = dims[0], dims[1], dims[2]
            if ops._as.iat[i] == "aten::_convolution":
                # _convolution(x, w, bias?, stride, padding, dilation, transposed, output_padding, groups, ...):
                # the CPU kernel under it has no op of its own (a transposed convolution through oneDNN)
                stride, pad, dil, opad = (json.loads(conc[j]) for j in (3, 4, 5, 7))
                transposed, groups = conc[6] == "True", conc[8]
                # as recorded: padding, output_padding, stride, dilation (transposed); padding, stride, dilation
                lists = [conc[4], conc[7], conc[3], conc[5]] if transposed else [conc[4], conc[3], conc[5]]
            else:
                pad, stride, dil = (json.loads(conc[j]) for j in (3, 4, 5))
                transposed, groups, opad = False, conc[6], []
                lists = [conc[3], conc[4], conc[5]]
            n = len(x) - 2
            if transposed:  # w [C_in, C_out / groups, *kernel]
                c_out = w[1] * int(groups)
                spatial = [(x[2 + j] - 1) * stride[j] - 2 * pad[j] + dil[j] * (w[2 + j] - 1) + opad[j] + 1
                           for j in range(n)]
            else:
                c_out = w[0]
                spatial = [_conv_out(x[2 + j], w[2 + j], pad[j], stride[j], dil[j]) for j in range(n)]
        except (TypeError, ValueError, IndexError, KeyError):
            continue
        # cudnn_convolution(x, w, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32), and
        # cudnn_convolution_transpose with output_padding after padding
        ops.iat[i, ops.columns.get_loc("op_name")] = ("aten::cudnn_convolution_transpose" if transposed
                                                      else "aten::cudnn_convolution")
        cols = {"op_input_dims": [x, w, *[[] for _ in lists], [], [], [], []],
                "op_input_types": [types[0], types[1], *["ScalarList"] * len(lists), "Scalar", "Scalar", "Scalar",
                                   "Scalar"],
                "op_input_strides": [strides[0], strides[1], *[[] for _ in lists], [], [], [], []],
                "op_concrete_inputs": ["", "", *lists, groups, "False", "False", "True"]}
        for col, v in cols.items():
            ops.iat[i, ops.columns.get_loc(col)] = dump(v)
        if not b:  # no bias: nothing added
            continue
        out = [x[0], c_out, *spatial]
        last = len(strides[0]) == len(x) and strides[0][1] == 1 and x[1] > 1  # channels-last input
        order = [0, *range(2, len(out)), 1] if last else list(range(len(out)))
        ost = [0] * len(out)
        acc = 1
        for j in reversed(order):
            ost[j] = acc
            acc *= out[j]
        view = [1, c_out, *([1] * len(spatial))]
        add = ops.iloc[i].copy()
        add["op_name"], add["_as"] = "aten::add_", "aten::add_"
        add["op_input_dims"] = dump([out, view, []])
        add["op_input_types"] = dump([types[0], types[2], "Scalar"])
        add["op_input_strides"] = dump([ost, [c_out, *([1] * (len(view) - 1))], []])
        add["op_concrete_inputs"] = dump(["", "", "1"])
        add["ts_us"] = ops.ts_us.iat[i] + 1e-3  # right after its convolution
        extra.append(add)
    if extra:
        ops = pd.concat([ops, pd.DataFrame(extra)], ignore_index=True).sort_values("ts_us", kind="stable")
    return ops.reset_index(drop=True)


def _translate(ops: pd.DataFrame) -> pd.DataFrame:
    """Rewrite calls whose CUDA launch records other inputs: index_select(x [N, F], 0, idx [E]) runs as
    gather(x, 0, idx expanded to [E, F], out [E, F])."""
    import json

    from wlprof.cost.dtypes import SCALAR_TYPE_CODES

    def put(i, col, value):
        ops.iat[i, ops.columns.get_loc(col)] = json.dumps(value, separators=(",", ":"))

    for i in np.flatnonzero((ops.op_name == "aten::fill_").to_numpy()):  # zero_(x), full(size) as fill_(x, v)
        try:
            dims, types = json.loads(ops.op_input_dims.iat[i]), json.loads(ops.op_input_types.iat[i])
            conc = json.loads(ops.op_concrete_inputs.iat[i] or "[]")
        except (TypeError, ValueError):
            continue
        was = ops._as.iat[i]
        if was in ("aten::full", "aten::zeros", "aten::new_zeros", "aten::zeros_like"):  # a new tensor, filled
            try:
                if was == "aten::zeros_like":
                    size, ctype, value = dims[0], types[0], "0"
                elif was == "aten::new_zeros":
                    size, ctype, value = json.loads(conc[1]), types[0], "0"
                else:
                    at = 2 if was == "aten::full" else 1
                    size = json.loads(conc[0])
                    code = int(conc[at]) if len(conc) > at and conc[at] not in ("", None) else 6
                    ctype = _CPP_TYPES.get(SCALAR_TYPE_CODES.get(code, "float32"), "float")
                    value = conc[1] if was == "aten::full" else "0"
            except (TypeError, ValueError, IndexError):
                continue
            strides = [math.prod(size[j + 1:]) for j in range(len(size))]
            put(i, "op_input_dims", [size, []])
            put(i, "op_input_types", [ctype, "Scalar"])
            put(i, "op_input_strides", [strides, []])
            put(i, "op_concrete_inputs", ["", value])
            continue
        if len(dims) == 1:
            ops.iat[i, ops.columns.get_loc("op_input_dims")] = json.dumps([dims[0], []], separators=(",", ":"))
            ops.iat[i, ops.columns.get_loc("op_input_types")] = json.dumps([types[0], "Scalar"], separators=(",", ":"))
            strides = json.loads(ops.op_input_strides.iat[i] or "[[]]")
            ops.iat[i, ops.columns.get_loc("op_input_strides")] = json.dumps([strides[0], []], separators=(",", ":"))
            ops.iat[i, ops.columns.get_loc("op_concrete_inputs")] = json.dumps(["", "0"], separators=(",", ":"))
    rows = ops.op_name == "aten::gather"
    for i in np.flatnonzero(rows.to_numpy()):
        try:
            dims = json.loads(ops.op_input_dims.iat[i])
            types = json.loads(ops.op_input_types.iat[i])
        except (TypeError, ValueError):
            continue
        if len(dims) != 3 or len(dims[0]) < 1 or len(dims[2]) != 1:  # already gather's own signature
            continue
        if dims[2][0] <= INDEX_SELECT_MAX:  # a few indices: CUDA keeps index_select
            ops.iat[i, ops.columns.get_loc("op_name")] = "aten::index_select"
            continue
        x, idx = dims[0], dims[2][0]
        out = [idx, *x[1:]]
        width = [1] * (len(x) - 1)
        ops.iat[i, ops.columns.get_loc("op_input_dims")] = json.dumps([x, [], out, [], out], separators=(",", ":"))
        xs = [math.prod(x[j + 1:]) for j in range(len(x))]
        ostr = [math.prod(out[j + 1:]) for j in range(len(out))]
        ops.iat[i, ops.columns.get_loc("op_input_strides")] = json.dumps(
            [xs, [], [1, *[0 for _ in width]], [], ostr], separators=(",", ":"))
        ops.iat[i, ops.columns.get_loc("op_input_types")] = json.dumps(
            [types[0], types[1] if len(types) > 1 else "Scalar", types[2], "Scalar", types[0]], separators=(",", ":"))
        ops.iat[i, ops.columns.get_loc("op_concrete_inputs")] = json.dumps(["", "0", "", "False", ""],
                                                                           separators=(",", ":"))
    return ops
