"""Declared parameters: one place that parses, checks and defaults every workload input.

A workload lists its inputs as `Param`s (type, default, unit, bounds, choices, help).
The same declaration parses CLI flags and study-file values, builds the CLI options,
and words every refusal with the argument's key, the rule and the value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from wlprof.errors import InputError, Key, did_you_mean

INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class PerDevice:
    """A default that differs between a GPU and the CPU."""

    gpu: Any
    cpu: Any

    def get(self, device_type: str) -> Any:
        return self.gpu if device_type == "cuda" else self.cpu


@dataclass(frozen=True)
class Param:
    """One input of a workload. `many`: a sweep axis (comma-separated, or a TOML list).

    Integers default to `minimum=1` (a size); give `minimum=0` for counts and seeds.
    `item` parses one item of a custom syntax (a GEMM shape), `items` all of a `many`
    value's items together (where one item continues another); both raise InputError
    naming `key`.
    """

    name: str
    kind: str  # "int", "float", "str", "bool"
    help: str
    default: Any = None  # a value, a PerDevice, or None: absent unless given
    many: bool = False
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    unit: str = ""
    item: Callable[[Any, Key], Any] | None = None
    items: Callable[[list, Key], list] | None = None  # parses a `many` value's items together
    metavar: str | None = None

    def __post_init__(self):
        if self.kind not in ("int", "float", "str", "bool"):
            raise ValueError(f"Param.kind must be int, float, str or bool (got {self.kind!r})")

    @property
    def key(self) -> Key:
        return Key(self.name)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def low(self) -> float | None:
        if self.minimum is not None:
            return self.minimum
        return 1 if self.kind == "int" else None

    def high(self) -> float | None:
        if self.maximum is not None:
            return self.maximum
        return INT64_MAX if self.kind == "int" else None

    def default_for(self, device_type: str) -> Any:
        return self.default.get(device_type) if isinstance(self.default, PerDevice) else self.default

    def default_text(self) -> str | None:
        """The default as `--help` shows it."""
        d = self.default
        if d is None:
            return None
        if isinstance(d, PerDevice):
            g, c = show(d.gpu), show(d.cpu)
            return g if g == c else f"{g} on a GPU, {c} on the CPU"
        return show(d)

    def parse(self, value: Any) -> Any:
        """The checked value (a list when `many`), or an InputError naming this parameter."""
        if self.many:
            items = split(value)
            if not items:
                raise InputError(self.key, "must list at least one value", value)
            if isinstance(value, str) and "" in [x.strip() for x in value.split(",")][:-1]:
                raise InputError(self.key, "must not have an empty item between commas", value)
            parsed = self.items(items, self.key) if self.items is not None else [self._one(v) for v in items]
            self._refuse_repeats(items, parsed, value)
            return parsed
        if isinstance(value, (list, tuple)) or (isinstance(value, str) and len(split(value)) > 1):
            # '1,2' for a parameter that is not a sweep axis: say so rather than "must be a positive integer"
            raise InputError(self.key, "takes one value, not a list (it is not a sweep axis)", value)
        return self._one(value)

    def _refuse_repeats(self, items: list, parsed: list, value: Any) -> None:
        """An InputError naming this parameter and the first value given twice ('1,8,1'; 'zipf:1.5,zipf:1.50'):
        a sweep axis lists each point once."""
        for j, x in enumerate(parsed):
            i = next((i for i in range(j) if parsed[i] == x), None)
            if i is None:
                continue
            aligned = len(items) == len(parsed)
            a, b = (str(items[i]).strip(), str(items[j]).strip()) if aligned else (show(x), show(x))
            what = f"{a} is given more than once" if a == b else f"{a} and {b} are the same value"
            raise InputError(self.key, f"must not repeat a sweep point: {what}", value)

    def _one(self, value: Any) -> Any:
        if self.item is not None:
            return self.item(value, self.key)
        if self.kind == "bool":
            return parse_bool(value, self.key)
        if self.kind == "str":
            text = str(value).strip()
            if self.choices and text not in self.choices:
                raise InputError(self.key, f"must be one of {', '.join(self.choices)}", value,
                                 hint=did_you_mean(text, self.choices))
            return text
        low, high = self.low(), self.high()
        what = self.what()
        try:
            number = parse_int(value, self.key) if self.kind == "int" else parse_float(value, self.key)
        except InputError as exc:
            raise InputError(self.key, f"must be {what}", value, hint=exc.hint) from None
        if low is not None and number < low:
            raise InputError(self.key, f"must be {what}", value)
        if high is not None and number > high:
            raise InputError(self.key, f"must be at most {show(high)}", value)
        return number

    def what(self) -> str:
        """What a number of this parameter must be: 'a positive integer', 'an integer >= 0', 'a finite number'
        (inf and nan are refused)."""
        low = self.low()
        if self.kind == "int":
            return "a positive integer" if low == 1 else f"an integer >= {show(low)}" if low is not None \
                else "an integer"
        return f"a finite number >= {show(low)}" if low is not None else "a finite number"


class Written(float):
    """A float that keeps the text it was read from (`1e3`), for the messages that name it."""

    text: str

    def __new__(cls, text: str) -> Written:
        f = super().__new__(cls, text)
        f.text = text
        return f


def toml_loads(text: str) -> dict:
    """A TOML document, its floats as `Written` (an integer parameter given `1e3` is named so when refused)."""
    import tomllib

    return tomllib.loads(text, parse_float=Written)


def toml_value(raw: str) -> Any:
    """The value of `KEY=VALUE`'s right side as TOML reads it (a number, a list, a quoted string), else the
    text itself."""
    import tomllib

    try:
        return toml_loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        return raw.strip()


def show(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return ",".join(show(x) for x in v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, int) and v >= 1 << 20 and v & (v - 1) == 0:
        return f"2^{v.bit_length() - 1}"
    return str(v)


def split(value: Any) -> list:
    """'1,8,64' or [1, 8, 64] or 8 -> a list of items (blank items dropped)."""
    if isinstance(value, str):
        return [x.strip() for x in value.split(",") if x.strip()]
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def parse_int(value: Any, key: Key | str) -> int:
    """An integer from an int or its text in decimal digits ('+3', '-1'). Anything written as a float is
    refused, whole or not ('1e3', '8.0', 2.5, a TOML float), as are bools: an integer parameter takes an
    integer literal wherever it is given (a flag, a spec, a study file)."""
    if isinstance(value, bool):
        raise InputError(key, "must be an integer", value)
    if isinstance(value, int):
        return value
    text = getattr(value, "text", None) or str(value).strip()
    body = text[1:] if text[:1] in "+-" else text
    if not body.isdigit():
        raise InputError(key, "must be an integer", value, hint=written_in_digits(value))
    return int(text)


def written_in_digits(value: Any) -> str | None:
    """'write it in digits: 1000' for a whole number written as a float ('1e3', 1000.0), else None."""
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if isinstance(value, bool) or not math.isfinite(f) or not f.is_integer():
        return None
    return f"an integer is written in digits: {int(f)}"


def parse_float(value: Any, key: Key | str) -> float:
    if isinstance(value, bool):
        raise InputError(key, "must be a number", value)
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise InputError(key, "must be a number", value) from None
    if not math.isfinite(f):
        raise InputError(key, "must be a finite number", value)
    return f


def parse_bool(value: Any, key: Key | str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise InputError(key, "must be true or false", value)


@dataclass(frozen=True)
class Values:
    """Parsed parameters: every declared name (None where absent), and which ones the user gave."""

    values: Mapping[str, Any]
    given: frozenset[str]

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def get(self, name: str, default: Any = None) -> Any:
        v = self.values.get(name)
        return default if v is None else v


def parse_all(params: tuple[Param, ...], raw: Mapping[str, Any], device_type: str, what: str) -> Values:
    """Check `raw` against the declarations: unknown names refused (with the closest known one),
    defaults filled for `device_type`, every value parsed and bounded."""
    known = {p.name: p for p in params}
    for name in raw:
        if name not in known:
            raise InputError(Key(name), f"is not a parameter of the {what} workload (parameters: {', '.join(known)})",
                             raw[name], hint=did_you_mean(name, known))
    values, given = {}, set()
    for p in params:
        v = raw.get(p.name)
        if v is None:
            v = p.default_for(device_type)
        else:
            given.add(p.name)
        values[p.name] = None if v is None else p.parse(v)
    return Values(values, frozenset(given))
