"""wlprof's own exceptions.

Every error a user can cause names what was wrong: the argument, the rule it
broke and the value it got. The CLI turns these into a message and a non-zero
exit; library callers can catch `WlprofError`.
"""

from __future__ import annotations

from typing import Any


class WlprofError(Exception):
    """Base class of every error wlprof raises on purpose."""


class InputError(WlprofError, ValueError):
    """A user-supplied value broke a rule: `--top-k must be <= --experts (got 4)`."""

    def __init__(self, arg: str, rule: str, value: Any):
        self.arg = arg
        self.rule = rule
        self.value = value
        super().__init__(f"{arg} {rule} (got {value!r})")


class TraceFormatError(WlprofError, ValueError):
    """A trace file could not be read as a torch.profiler Chrome trace."""

    def __init__(self, path: str, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class StoreError(WlprofError):
    """The traces folder or a run in it cannot be used as asked."""


class SchemaVersionError(StoreError):
    """A file was written by an incompatible schema version."""
