"""wlprof's own exceptions.

Every error a user can cause names the argument, the rule it broke and the value it
got. Library code names arguments by their key (`Key("top_k")`); the command line
spells them as the user wrote them (`--top-k` on `wlprof run`, `params.top_k` in a
study file) when it prints the message.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any


class WlprofError(Exception):
    """Base class of every error wlprof raises on purpose."""


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C that stopped a command, with what it left behind (`detail`: "nothing was written to
    traces/") for the message the command line prints."""

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True)
class Key:
    """An argument named by its key; `section` says where it lives: params, study or capture."""

    name: str
    section: str = "params"

    def __str__(self) -> str:
        return self.name


Spelling = Callable[[Key], str]
Rule = "str | tuple[str | Key, ...]"


def _render(rule, spell: Spelling) -> str:
    if isinstance(rule, tuple):
        return "".join(spell(p) if isinstance(p, Key) else str(p) for p in rule)
    return str(rule)


class InputError(WlprofError, ValueError):
    """A user-supplied value broke a rule: `--top-k must be at most --experts (4) (got 8)`.

    `arg` is the argument as spelled, or a `Key`; `rule` (and `hint`) a string, or a tuple of
    strings and Keys (other arguments the rule names).
    """

    def __init__(self, arg: str | Key, rule, value: Any, hint=None):
        self.arg = arg
        self.rule = rule
        self.value = value
        self.hint = hint
        super().__init__(self.message(str))

    def message(self, spell: Spelling) -> str:
        arg = spell(self.arg) if isinstance(self.arg, Key) else self.arg
        got = "not given" if self.value is None else f"got {shown(self.value)}"  # an absent value, not Python's None
        text = f"{arg} {_render(self.rule, spell)} ({got})"
        return f"{text}; {_render(self.hint, spell)}" if self.hint else text

    def __reduce__(self):  # pickled with its own arguments (raised in a worker process)
        return (type(self), (self.arg, self.rule, self.value, self.hint))

    def spelled(self, spell: Spelling) -> InputError:
        """The same error with its keys spelled for the user (`--top-k`, `params.top_k`)."""
        arg = spell(self.arg) if isinstance(self.arg, Key) else self.arg
        hint = None if self.hint is None else _render(self.hint, spell)
        return InputError(arg, _render(self.rule, spell), self.value, hint)

    def rule_text(self, spell: Spelling = str) -> str:
        return _render(self.rule, spell)

    @property
    def key(self) -> str | None:
        return self.arg.name if isinstance(self.arg, Key) else None


def shown(value: Any, top: bool = True) -> str:
    """A value as a user would type it: a string in quotes (where it stands alone, or where its bounds
    matter in a list: empty, a comma or a space at an end), a list as comma-separated items, a bool as
    true or false, a number as written (`1e3` where the text it came from is kept)."""
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict, str)) and getattr(value, "ndim", 0) == 0:
        value = value.item()  # a numpy scalar
    elif hasattr(value, "tolist") and not isinstance(value, (list, tuple, dict, str)):
        value = value.tolist()  # a numpy array
    text = getattr(value, "text", None)
    if isinstance(text, str):  # a number that keeps the text it was parsed from (`params.Written`)
        return text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return ", ".join(shown(v, top=False) for v in items) if items else "(empty)"
    if isinstance(value, dict):
        return ", ".join(f"{k}={shown(v, top=False)}" for k, v in value.items()) if value else "(empty)"
    if isinstance(value, (str, PurePath)):
        s = str(value)
        if top or not s or s != s.strip() or "," in s:
            return f'"{s}"' if "'" in s else f"'{s}'"
        return s
    return str(value)


def did_you_mean(value: str, choices: Iterable[str]) -> str | None:
    """'did you mean X?' for the closest of `choices`, or None when nothing is close."""
    choices = [str(c) for c in choices]
    close = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.6)
    if not close and str(value).strip():  # the start of exactly one choice ('balanced' of 'balanced 8x8x8')
        close = [c for c in choices if c.lower().startswith(str(value).strip().lower())]
        close = close if len(close) == 1 else []
    return f"did you mean {close[0]!r}?" if close else None


class TraceFormatError(WlprofError, ValueError):
    """A trace file could not be read as a torch.profiler Chrome trace."""

    def __init__(self, path: str, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}")

    def __reduce__(self):
        return (type(self), (self.path, self.problem))


class StoreError(WlprofError):
    """The traces folder or a run in it cannot be used as asked."""


class SchemaVersionError(StoreError):
    """A file was written by an incompatible schema version."""
