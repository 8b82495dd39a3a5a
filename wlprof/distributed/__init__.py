"""Distributed runs: ranks launched by wlprof or torchrun, one rendezvous, one merged run.

`world` (rank, size, process group, the store that names failed ranks), `launch`
(`--world-size N` on one host), `run` (one rank's part of a study), `child` (a launched
rank's entry point).
"""
