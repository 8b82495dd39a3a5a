"""The ATen ops that run a CUDA kernel of their own under their own name, read from the operator
declarations every torch wheel ships (torchgen's `native_functions.yaml`): an op one of whose overloads
registers a `CUDA` kernel, directly or through the out= overload it is structured on. A composite op
(CompositeImplicitAutograd, or a CompositeExplicitAutograd kernel that calls other ops) is not one of
them: on CUDA its work is recorded under the ops it calls."""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

_FUNC = re.compile(r"^- func: ([A-Za-z0-9_]+)(\.[A-Za-z0-9_]+)?\(")
_DELEGATE = re.compile(r"^  structured_delegate: ([A-Za-z0-9_.]+)")
_KEYS = re.compile(r"^    ([A-Za-z0-9_, ]+):")


def declarations() -> Path | None:
    """torchgen's native_functions.yaml, where the installed torch ships it; None elsewhere."""
    spec = importlib.util.find_spec("torchgen")
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root) / "packaged" / "ATen" / "native" / "native_functions.yaml"
        if path.is_file():
            return path
    return None


def parse(text: str) -> frozenset[str]:
    """'aten::NAME' for every op of `text` (native_functions.yaml) with a CUDA kernel of its own."""
    cuda: dict[str, bool] = {}  # full overload name -> registers a CUDA kernel
    delegate: dict[str, str] = {}
    name = None
    in_dispatch = False
    for line in text.splitlines():
        m = _FUNC.match(line)
        if m:
            name = m.group(1) + (m.group(2) or "")
            cuda.setdefault(name, False)
            in_dispatch = False
            continue
        if name is None:
            continue
        if line.startswith("  dispatch:"):
            in_dispatch = True
            continue
        if in_dispatch:
            k = _KEYS.match(line)
            if k:
                if "CUDA" in (key.strip() for key in k.group(1).split(",")):
                    cuda[name] = True
                continue
            in_dispatch = False
        d = _DELEGATE.match(line)
        if d:
            delegate[name] = d.group(1)
    return frozenset("aten::" + full.split(".")[0] for full, has in cuda.items()
                     if has or cuda.get(delegate.get(full, ""), False))


@functools.cache
def cuda_kernel_ops() -> frozenset[str]:
    """The ops with a CUDA kernel under their own name, per the installed torch's declarations (empty where
    torch ships none)."""
    path = declarations()
    return parse(path.read_text()) if path is not None else frozenset()
