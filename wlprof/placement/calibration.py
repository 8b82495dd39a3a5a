"""Co-location calibration: each model's latency alone and in every pair, measured on the device.

A calibration is kept per model configuration (`Model.key`: device, workload, parameters,
dtype, layers), so a file written for one mix answers any other mix of the same
configurations (`wlprof place --coloc FILE`). It stores every sample.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from wlprof.errors import InputError
from wlprof.placement.latency import slowdowns

VERSION = 1


@dataclass
class Calibration:
    device: str
    alone: dict[str, list[float]] = field(default_factory=dict)  # config key -> latency samples (µs)
    # (k1, k2) sorted (k1 == k2 for two models of one configuration) -> (k1's samples, k2's samples)
    pairs: dict[tuple[str, str], tuple[list[float], list[float]]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # config key -> a model name it was measured as
    modes: dict[str, str] = field(default_factory=dict)  # config key -> graph / eager

    def missing(self, keys: Sequence[str]) -> tuple[list[str], list[tuple[str, str]]]:
        """(configurations never measured alone, pairs never measured) among `keys`."""
        alone = list(dict.fromkeys(k for k in keys if k not in self.alone))
        pairs = list(dict.fromkeys(pair_key(a, b) for a, b in itertools.combinations(keys, 2)
                                   if pair_key(a, b) not in self.pairs))
        return alone, pairs

    def put_pair(self, a: str, b: str, samples_a: list[float], samples_b: list[float]) -> None:
        self.pairs[pair_key(a, b)] = (samples_a, samples_b) if a <= b else (samples_b, samples_a)

    def rho(self, keys: Sequence[str]) -> np.ndarray:
        """The measured slowdown matrix over `keys` (NaN where a pair is missing)."""
        alone = {i: statistics.median(self.alone[k]) for i, k in enumerate(keys) if k in self.alone}
        pairs = {}
        for i, j in itertools.combinations(range(len(keys)), 2):
            a, b = keys[i], keys[j]
            p = self.pairs.get(pair_key(a, b))
            if p is None:
                continue
            first, second = (i, j) if a <= b else (j, i)
            pairs[frozenset((i, j))] = {first: statistics.median(p[0]), second: statistics.median(p[1])}
        return slowdowns(alone, pairs, len(keys))

    def alone_median(self, key: str) -> float | None:
        s = self.alone.get(key)
        return float(statistics.median(s)) if s else None

    def merge(self, other: Calibration) -> None:
        if other.device != self.device:
            return
        self.alone.update(other.alone)
        self.pairs.update(other.pairs)
        self.names.update(other.names)
        self.modes.update(other.modes)

    def to_dict(self) -> dict:
        return {"version": VERSION, "device": self.device, "names": self.names, "modes": self.modes,
                "alone": self.alone,
                "pairs": [{"keys": list(k), "samples": [list(v[0]), list(v[1])]} for k, v in sorted(self.pairs.items())]}

    @classmethod
    def from_dict(cls, d: dict) -> Calibration:
        c = cls(str(d["device"]), {k: list(map(float, v)) for k, v in d.get("alone", {}).items()})
        for p in d.get("pairs", []):
            a, b = p["keys"]
            c.put_pair(a, b, list(map(float, p["samples"][0])), list(map(float, p["samples"][1])))
        c.names = dict(d.get("names", {}))
        c.modes = dict(d.get("modes", {}))
        return c


def pair_key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def load(paths: Sequence[str | Path], device: str) -> Calibration:
    """Every calibration in `paths` (files, or folders holding coloc.json) measured on `device`, merged."""
    from wlprof import jsonio

    out = Calibration(device)
    for p in paths:
        p = Path(p)
        f = p / "coloc.json" if p.is_dir() else p
        if not f.is_file():
            raise InputError("--coloc", "must be a co-location calibration (coloc.json, or a folder holding one)",
                             str(p))
        try:
            c = Calibration.from_dict(jsonio.loads(f.read_bytes()))
        except KeyError as exc:
            raise InputError("--coloc", f"must be a readable coloc.json (it has no {exc} field)", str(f)) from None
        except (ValueError, TypeError) as exc:
            raise InputError("--coloc", f"must be a readable coloc.json ({exc})", str(f)) from None
        out.merge(c)
    return out


def save(c: Calibration, path: Path) -> None:
    from wlprof import jsonio
    from wlprof.store.atomic import atomic_write_bytes

    atomic_write_bytes(path, jsonio.dumps(c.to_dict(), indent=True))
