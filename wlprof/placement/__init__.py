"""Latency-aware placement: put a mix of models on GPUs so that the slowest one is as fast as possible.

`wlprof place MIX.toml --gpus N` reads a mix (`mix`), costs each model's op calls (`costs`),
predicts each model's latency alone and co-located with others (`latency`: L0 FLOPs, L2 roofline,
L3 profile with measured co-location slowdown, and the oracle's measured groups), searches the
assignments (`search`: exhaustive for small mixes, greedy + local search beyond), and with
`--validate` runs each GPU's group concurrently on one device (`corun`) to measure the plans.
`docs/placement.md` describes the mix format, the planners, the searches and the measurement.
"""

from __future__ import annotations
