"""Level 3, generalised: predict the kernel time of op calls no profile measured.

An offline profile (`wlprof profile`, a coverage grid of short captures) is fitted into
a `Predictor` (`model.fit`): per op class, a physical base time (GEMMs by tiles and waves
over the SMs against their bytes, memory-bound ops by their bytes, index ops by their
index length and row width, each above a launch floor) and a correction learned from the
profiled calls nearest to the call in that class's coordinates. A step is the sum of its
predicted calls, and its back-to-back and single-call times add the host's launch gaps
and syncs (`steps`). `spec` lists a workload's op calls without a GPU; `scale` rewrites an
ingested step's shapes. The method and its limits: `docs/models.md`.
"""
