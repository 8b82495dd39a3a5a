"""Workload generators: each turns a parameter spec into sweep points and built steps."""

from wlprof.workloads.base import Built, Parsed, Point, Workload, get, names, register

__all__ = ["Built", "Parsed", "Point", "Workload", "get", "names", "register"]
