"""Format robustness: plausible rewrites of real traces, each ingested beside its original.

For every source trace (default: a sample of tests/fixtures' h200*, public and cpu_zoo* traces) this
writes variants a real file could plausibly have (other layouts, encodings, compressions, key orders,
id and time spellings, event orders and forms, extra or broken content), reads each as `wlprof ingest`
does (`pipeline.read(keep_events=False)` then `pipeline.costed`) and compares it with the original:

- `same`: the same kernel rows (name, op, FLOPs, bytes, join method, as a multiset), the same FLOPs and
  bytes sums and the same summed device time;
- `rows`: the same rows, FLOPs and bytes, the time allowed to differ (events without `dur`);
- `refuse:RE`: a TraceFormatError or InputError whose message names the file and matches RE.

Each verdict also tells whether the parser streamed the file or fell back to parsing it whole, and the
parse time ratio to the original's, measured side by side (alternating, best of `--repeat`).

    python benchmarks/trace_variants.py [SOURCES...] [--markdown OUT.md] [--big MB] [--repeat N]

`--big MB`: also scale the first source's events up to about MB megabytes (copies shifted in time and
ids) and time the layout variants of that file against it, where the fallback paths' cost shows.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import math
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FIX = ROOT / "tests" / "fixtures"
DEFAULT_SOURCES = [
    FIX / "h200_probe_ops.json.gz",
    FIX / "h200_training" / "transformer_eager.pt.trace.json.gz",
    FIX / "h200_zoo3" / sorted(p.name for p in (FIX / "h200_zoo3").glob("*.json.gz"))[0]
    if (FIX / "h200_zoo3").is_dir() else FIX / "h200_probe_ops.json.gz",
    FIX / "public" / "hta_2022_inference_capitalized.json.gz",
    FIX / "public" / "kineto_2021_gpu_metrics_col0.json.gz",
    FIX / "public" / "tracelens_mi300_bert_indent2.json.gz",
    FIX / "public" / "kineto_2020_resnet50_array.json.gz",
    FIX / "cpu_zoo5" / "gpt-train.json.gz",
    FIX / "cpu_zoo4" / sorted(p.name for p in (FIX / "cpu_zoo4").glob("*.json.gz"))[0]
    if (FIX / "cpu_zoo4").is_dir() else FIX / "cpu_zoo5" / "gpt-train.json.gz",
]
ID_KEYS = ("External id", "external id", "correlation")
DEVICE_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
SUFFIX = " \u27e8\u03bb\u6f22\u00e9\u27e9"  # non-ASCII added to names: ⟨λ漢é⟩


# ------------------------------------------------------------------ helpers on documents


def events_of(doc):
    return doc if isinstance(doc, list) else doc["traceEvents"]


def with_events(doc, events):
    if isinstance(doc, list):
        return events
    out = {k: v for k, v in doc.items() if k != "traceEvents"}
    out["traceEvents"] = events
    return out


def dumps(doc, **kw) -> bytes:
    kw.setdefault("ensure_ascii", False)
    return json.dumps(doc, **kw).encode("utf-8")


def kineto(doc) -> bytes:
    """Kineto's own layout: one event per line after a two-space indent, the list closed at that indent."""
    if isinstance(doc, list):
        return ("[\n" + ",\n".join("  " + json.dumps(e, ensure_ascii=False) for e in doc) + "\n]\n").encode()
    head = "".join(f'  "{k}": {json.dumps(v, ensure_ascii=False)},\n' for k, v in doc.items() if k != "traceEvents")
    body = ",\n".join("  " + json.dumps(e, ensure_ascii=False) for e in doc["traceEvents"])
    return ("{\n" + head + '  "traceEvents": [\n' + body + "\n  ]\n}\n").encode()


def map_events(doc, fn):
    """A copy of `doc` whose events are fn(copy of each event) (None drops it, a list adds several)."""
    out = []
    for e in events_of(doc):
        got = fn(copy.deepcopy(e)) if isinstance(e, dict) else e
        if got is None:
            continue
        out.extend(got if isinstance(got, list) else [got])
    return with_events(doc, out)


def map_ids(doc, fn):
    def one(e):
        a = e.get("args")
        if isinstance(a, dict):
            for k in ID_KEYS:
                if isinstance(a.get(k), int) and not isinstance(a.get(k), bool):
                    a[k] = fn(a[k])
        if e.get("ph") in ("s", "f", "t") and isinstance(e.get("id"), int):
            e["id"] = fn(e["id"])
        return e
    return map_events(doc, one)


def map_threads(doc, pid_fn, tid_fn):
    def one(e):
        if isinstance(e.get("pid"), int) and not isinstance(e.get("pid"), bool):
            e["pid"] = pid_fn(e["pid"], e)
        if isinstance(e.get("tid"), int) and not isinstance(e.get("tid"), bool):
            e["tid"] = tid_fn(e["tid"], e)
        return e
    return map_events(doc, one)


def rename(doc, cats):
    def one(e):
        if e.get("cat") in cats and isinstance(e.get("name"), str):
            e["name"] += SUFFIX
        return e
    return map_events(doc, one)


def to_begin_end(doc):
    """Every complete event of a host category as a B/E pair (the E at its end, args split between them)."""
    def one(e):
        if e.get("ph") != "X" or e.get("cat") in DEVICE_CATS or not isinstance(e.get("dur"), (int, float)):
            return e
        b = {k: v for k, v in e.items() if k != "dur"}
        b["ph"] = "B"
        end = {"ph": "E", "pid": e.get("pid"), "tid": e.get("tid"), "ts": e["ts"] + e["dur"]}
        return [b, end]
    out = map_events(doc, one)
    evs = events_of(out)
    # E events go where their time falls, as a writer that emits on exit puts them
    order = sorted(range(len(evs)), key=lambda i: (evs[i].get("ts") if isinstance(evs[i], dict) and isinstance(
        evs[i].get("ts"), (int, float)) else 0, 0 if isinstance(evs[i], dict) and evs[i].get("ph") == "E" else 1))
    return with_events(out, [evs[i] for i in order])


def ts_scientific(text: bytes) -> bytes:
    """Every numeric `ts` written in scientific notation, to the same double."""
    def sub(m):
        x = float(m.group(2))
        return m.group(1) + repr(x).encode() if "e" in repr(x) else m.group(1) + f"{x:.17e}".encode()
    return re.sub(rb'("ts":\s*)(-?\d+(?:\.\d+)?)', sub, text)


def gzip_members(data: bytes, n: int = 3) -> bytes:
    step = max(1, len(data) // n)
    return b"".join(gzip.compress(data[i:i + step]) for i in range(0, len(data), step))


def add_foreign(doc):
    evs = list(events_of(doc))
    t = next((e["ts"] for e in evs if isinstance(e, dict) and isinstance(e.get("ts"), (int, float))), 0)
    extra = [
        {"ph": "X", "cat": "my_tool", "name": "custom span", "pid": 1, "tid": 1, "ts": t, "dur": 5},
        {"ph": "Z", "cat": "cpu_op", "name": "aten::weird_phase", "pid": 1, "tid": 1, "ts": t},
        {"ph": "i", "cat": "cpu_instant_event", "name": "marker", "pid": 1, "tid": 1, "ts": t, "s": "t"},
        {"ph": "C", "name": "counter", "pid": 1, "ts": t, "args": {"value": 3}},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "gpu region", "pid": 0, "tid": 7, "ts": t, "dur": 1},
        {"ph": "X", "cat": "cuda_profiler_range", "name": "range", "pid": 1, "tid": 1, "ts": t, "dur": 1},
        {"ph": "n", "cat": "async", "name": "a", "id": 1, "pid": 1, "tid": 1, "ts": t},
    ]
    return with_events(doc, extra[:3] + evs + extra[3:])


def args_null(doc):
    """`args` null on events that carry none a reader needs, and removed on metadata and flows."""
    def one(e):
        if e.get("ph") in ("M", "s", "f"):
            e.pop("args", None) if e.get("ph") != "M" else None
            return e
        if "args" not in e:
            e["args"] = None
        elif e.get("cat") in ("python_function", "Trace", "overhead"):
            e["args"] = None
        return e
    return map_events(doc, one)


def drop_dur_some(doc, every=10):
    n = [0]

    def one(e):
        if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS:
            n[0] += 1
            if n[0] % every == 0:
                e.pop("dur", None)
        return e
    return map_events(doc, one)


def nan_args(doc):
    n = [0]

    def one(e):
        if e.get("ph") == "X" and isinstance(e.get("args"), dict):
            n[0] += 1
            if n[0] % 7 == 0:
                e["args"]["score"] = [math.nan, math.inf, -math.inf]
        return e
    return map_events(doc, one)


def long_line(doc):
    """One event with a 3 MB arg (a call stack written on one line)."""
    evs = list(events_of(doc))
    i = next((i for i, e in enumerate(evs) if isinstance(e, dict) and e.get("ph") == "X"), 0)
    e = copy.deepcopy(evs[i])
    e.setdefault("args", {})
    if isinstance(e["args"], dict):
        e["args"]["Call stack"] = ";".join(f"frame_{k}.py(12): fn_{k}" for k in range(120_000))
    evs[i] = e
    return with_events(doc, evs)


def big_meta_last(doc):
    """Top-level keys reversed, traceEvents last after a deviceProperties grown by thousands of other GPUs."""
    if isinstance(doc, list):
        return doc
    meta = {k: v for k, v in doc.items() if k != "traceEvents"}
    props = list(meta.get("deviceProperties") or [])
    filler = {"name": "Filler GPU", "totalGlobalMem": 1, "computeMajor": 1, "computeMinor": 0,
              "numSms": 1, "sharedMemPerBlock": 1, "note": "x" * 200}
    props += [{"id": 10_000 + k, **filler} for k in range(20_000)]
    out = dict(reversed(list(meta.items())))
    out["deviceProperties"] = props
    out["traceEvents"] = doc["traceEvents"]
    return out


def keys_reversed(doc):
    def one(e):
        if isinstance(e.get("args"), dict):
            e["args"] = dict(reversed(list(e["args"].items())))
        return dict(reversed(list(e.items())))
    d = map_events(doc, one)
    if isinstance(d, dict):
        d = {"traceEvents": d["traceEvents"], **{k: v for k, v in d.items() if k != "traceEvents"}}
    return d


def truncate(text: bytes) -> bytes:
    """Cut inside an event about 60% of the way in (after a `"name": ` so the cut is mid-event)."""
    at = text.find(b'"name"', int(len(text) * 0.6))
    return text[:at + 9] if at > 0 else text[: len(text) * 6 // 10]


# ------------------------------------------------------------------ variants


@dataclass
class Variant:
    name: str
    suffix: str  # ".json" or ".json.gz" (the file's name; its content is as given)
    data: bytes
    expect: str  # "same", "rows", "refuse:REGEX"
    names: dict = field(default_factory=dict)  # a kernel name in the variant -> the original's


def variants(text: bytes, doc) -> list[Variant]:
    """The rewrites of a trace (`text`: its gunzipped bytes, `doc`: its JSON)."""
    rng = random.Random(7)
    v: list[Variant] = []
    add = v.append
    for n in (1, 2, 4):
        add(Variant(f"indent {n}", ".json", dumps(doc, indent=n), "same"))
    add(Variant("indent tab", ".json", dumps(doc, indent="\t"), "same"))
    add(Variant("minified", ".json", dumps(doc, separators=(",", ":")), "same"))
    add(Variant("kineto layout", ".json", kineto(doc), "same"))
    add(Variant("CRLF", ".json", text.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"), "same"))
    add(Variant("CRLF minified-ish (indent 2)", ".json", dumps(doc, indent=2).replace(b"\n", b"\r\n"), "same"))
    add(Variant("UTF-8 BOM", ".json", b"\xef\xbb\xbf" + text, "same"))
    add(Variant("UTF-8 BOM gzip", ".json.gz", gzip.compress(b"\xef\xbb\xbf" + text), "same"))
    add(Variant("keys reversed, traceEvents first", ".json", kineto(keys_reversed(doc)), "same"))
    add(Variant("traceEvents last after 20k deviceProperties", ".json", kineto(big_meta_last(doc)), "same"))
    add(Variant("gzip, 3 members", ".json.gz", gzip_members(text), "same"))
    add(Variant(".json holding gzip", ".json", gzip.compress(text), "same"))
    add(Variant(".json.gz holding plain text", ".json.gz", text, "same"))
    names = {}
    for e in events_of(doc):
        if isinstance(e, dict) and e.get("cat") in DEVICE_CATS and isinstance(e.get("name"), str):
            names[e["name"] + SUFFIX] = e["name"]
    nonascii = rename(doc, DEVICE_CATS | {"user_annotation", "gpu_user_annotation", "python_function"})
    add(Variant("non-ASCII kernel/annotation names (UTF-8)", ".json", kineto(nonascii), "same", names))
    add(Variant("non-ASCII names as \\u escapes", ".json",
                json.dumps(nonascii, indent=1, ensure_ascii=True).encode(), "same", names))
    add(Variant("ids + 2^60 (beyond 2^53)", ".json", kineto(map_ids(doc, lambda x: x + (1 << 60))), "same"))
    add(Variant("ids + 2^63 (uint64)", ".json", kineto(map_ids(doc, lambda x: x + (1 << 63))), "same"))
    add(Variant("ids as floats", ".json", kineto(map_ids(doc, float)), "same"))
    add(Variant("ids negative", ".json", kineto(map_ids(doc, lambda x: -x - 100)), "same"))
    add(Variant("pids/tids negative", ".json",
                kineto(map_threads(doc, lambda p, e: -p - 5, lambda t, e: -t - 5)), "same"))
    add(Variant("pids/tids floats", ".json", kineto(map_threads(doc, lambda p, e: float(p), lambda t, e: float(t))),
                "same"))
    add(Variant("tids as strings ('stream 7', 'thread 3')", ".json", kineto(map_threads(
        doc, lambda p, e: p, lambda t, e: f"stream {t}" if e.get("cat") in DEVICE_CATS else f"thread {t}")), "same"))
    add(Variant("ts in scientific notation", ".json", ts_scientific(dumps(doc, indent=1)), "same"))
    add(Variant("ts as strings", ".json", kineto(map_events(doc, lambda e: {**e, "ts": str(e["ts"])} if isinstance(
        e.get("ts"), (int, float)) else e)), "same"))
    add(Variant("ts and dur as strings", ".json", kineto(map_events(doc, lambda e: {
        **e, **{k: str(e[k]) for k in ("ts", "dur") if isinstance(e.get(k), (int, float))}})), "same"))
    add(Variant("metadata events duplicated", ".json", kineto(map_events(
        doc, lambda e: [e, copy.deepcopy(e)] if e.get("ph") == "M" else e)), "same"))
    add(Variant("every event duplicated", ".json", kineto(map_events(doc, lambda e: [e, copy.deepcopy(e)])), "dup"))
    shuffled = list(events_of(doc))
    rng.shuffle(shuffled)
    add(Variant("events shuffled", ".json", kineto(with_events(doc, shuffled)), "same"))
    add(Variant("events reversed", ".json", kineto(with_events(doc, list(reversed(events_of(doc))))), "same"))
    add(Variant("host events as B/E pairs", ".json", kineto(to_begin_end(doc)), "same"))
    add(Variant("dur missing on every 10th device event", ".json", kineto(drop_dur_some(doc)), "rows"))
    add(Variant("args null or missing where unused", ".json", kineto(args_null(doc)), "same"))
    add(Variant("unknown categories and phases added", ".json", kineto(add_foreign(doc)), "same"))
    add(Variant("NaN/Infinity literals in args", ".json", kineto(nan_args(doc)), "same"))
    add(Variant("one 3 MB line (a call stack arg)", ".json", kineto(long_line(doc)), "same"))
    add(Variant("top-level array", ".json", kineto(events_of(doc)), "array"))
    add(Variant("truncated mid-event", ".json", truncate(text), r"refuse:truncated"))
    add(Variant("truncated mid-event, gzip", ".json.gz", gzip.compress(truncate(text)), r"refuse:truncated"))
    add(Variant("gzip cut short", ".json.gz", gzip.compress(text)[: len(gzip.compress(text)) * 2 // 3],
                r"refuse:gzip|truncated"))
    meta = {k: val for k, val in doc.items() if k != "traceEvents"} if isinstance(doc, dict) else {}
    add(Variant("empty traceEvents", ".json", kineto({**meta, "traceEvents": []}), r"refuse:no events|empty"))
    add(Variant("0 bytes", ".json", b"", r"refuse:empty"))
    add(Variant("whitespace only", ".json", b"  \n\r\n\t", r"refuse:empty"))
    return v


# ------------------------------------------------------------------ reading and comparing


def signature(path: Path, names: dict | None = None) -> dict:
    """What an ingest of `path` makes of it: its kernel rows as a multiset, FLOPs, bytes, time, joins."""
    from wlprof import pipeline

    trace = pipeline.read(path, keep_events=False)
    k = pipeline.costed(trace).kernels
    rename = names or {}
    rows = sorted((rename.get(str(n), str(n)), str(o), _f(f), _f(b), str(j)) for n, o, f, b, j in zip(
        k["name"], k["op_name"], k["flops"], k["bytes"], k["join_method"], strict=True))
    return {"rows": rows, "n": len(k), "flops": float(k.flops.sum()), "bytes": float(k["bytes"].sum()),
            "us": round(float(k.dur_us.sum()), 3), "joins": k.join_method.value_counts().to_dict(),
            "warnings": list(trace.warnings)}


def _f(x) -> float:
    return -1.0 if x != x else round(float(x), 6)  # unknown: -1 (sortable beside known values)


def streamed(path: Path) -> str:
    """'stream' where the chunked reader reads the file, else 'whole' (the fallback) or 'error'."""
    from wlprof.errors import TraceFormatError
    from wlprof.trace.parse import _NotStreamable, _stream_events

    try:
        for _ in _stream_events(path, lambda m: None):
            pass
        return "stream"
    except _NotStreamable:
        return "whole"
    except TraceFormatError:
        return "whole (stream error)"


def parse_seconds(path: Path) -> float:
    from wlprof.trace.parse import parse_events

    t0 = time.perf_counter()
    parse_events(path, keep_events=False)
    return time.perf_counter() - t0


def side_by_side(orig: Path, var: Path, repeat: int) -> float:
    """The variant's parse time over the original's, alternating, best of `repeat` each."""
    a, b = [], []
    for _ in range(repeat):
        a.append(parse_seconds(orig))
        b.append(parse_seconds(var))
    return min(b) / min(a)


@dataclass
class Result:
    source: str
    variant: str
    expect: str
    outcome: str  # "ok" / "refused: ..." / "crash: ..."
    verdict: str  # "same", "DIFF ...", "clear refusal", "UNCLEAR ..."
    path: str = ""
    ratio: float = float("nan")


def check(src: Path, v: Variant, ref: dict, work: Path, repeat: int, orig_file: Path) -> Result:
    from wlprof.errors import WlprofError

    p = work / (re.sub(r"[^A-Za-z0-9]+", "_", v.name).strip("_") + v.suffix)
    p.write_bytes(v.data)
    r = Result(src.name, v.name, v.expect, "", "")
    try:
        sig = signature(p, v.names)
    except WlprofError as exc:
        msg = str(exc).splitlines()[0]
        r.outcome = "refused: " + msg[:200]
        if v.expect.startswith("refuse:"):
            ok = re.search(v.expect[7:], msg, re.I) and p.name in msg
            r.verdict = "clear refusal" if ok else "**UNCLEAR refusal**"
        else:
            r.verdict = "**refused a trace**"
        return r
    except Exception as exc:  # noqa: BLE001  (a crash is the finding)
        r.outcome = f"crash: {type(exc).__name__}: {str(exc)[:160]}"
        r.verdict = "**crash**"
        return r
    r.outcome = "ok"
    r.path = streamed(p)
    if p.stat().st_size > 4 << 20 or r.path != "stream":
        r.ratio = side_by_side(orig_file, p, repeat)
    if v.expect.startswith("refuse:"):
        r.verdict = "**ingested a non-trace**"
        return r
    diffs = []
    if v.expect == "dup":
        # the same events twice: either deduplicated (the original's rows) or each row twice
        same = sig["rows"] == ref["rows"]
        twice = sig["rows"] == sorted(ref["rows"] * 2)
        r.verdict = "same (duplicates dropped)" if same else "rows twice" if twice else "**DIFF**"
        r.verdict += f"; {sig['n']} rows vs {ref['n']}"
        return r
    if v.expect == "rows":  # each op's cost is split over its kernels by their time: compare without it
        sig = {**sig, "rows": sorted((n, o, j) for n, o, _, _, j in sig["rows"])}
        ref = {**ref, "rows": sorted((n, o, j) for n, o, _, _, j in ref["rows"])}
    for key in ("n", "flops", "bytes", "rows") + (("us",) if v.expect in ("same", "array") else ()):
        a, b = sig[key], ref[key]
        eq = a == b if key != "flops" and key != "bytes" else (a == b or abs(a - b) <= 1e-9 * max(abs(b), 1))
        if not eq:
            diffs.append(key if key == "rows" else f"{key} {a} vs {b}")
    if sig["joins"] != ref["joins"]:
        diffs.append(f"joins {sig['joins']} vs {ref['joins']}")
    r.verdict = "same" if not diffs else "**DIFF** " + "; ".join(diffs)
    return r


def run(sources: list[Path], repeat: int, log=print) -> list[Result]:
    out: list[Result] = []
    for src in sources:
        text = src.read_bytes()
        if text[:2] == b"\x1f\x8b":
            text = gzip.decompress(text)
        doc = json.loads(text.decode("utf-8-sig"))
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            orig = work / "original.json"
            orig.write_bytes(text)
            ref = signature(orig)
            for v in variants(text, doc):
                r = check(src, v, ref, work, repeat, orig)
                out.append(r)
                log(f"{src.name} | {v.name} | {r.outcome[:90]} | {r.verdict} | {r.path} | {r.ratio:.2f}")
    return out


def scaled(text: bytes, doc, megabytes: float) -> bytes:
    """The trace's events copied until the file is about `megabytes`, each copy shifted past the last in time
    and in its ids (Kineto's layout)."""
    evs = [e for e in events_of(doc) if isinstance(e, dict)]
    ts = [e["ts"] for e in evs if isinstance(e.get("ts"), (int, float))]
    span = (max(ts) - min(ts) + 1000) if ts else 1000
    copies = max(1, int(megabytes * 1e6 / max(len(text), 1)))
    out = []
    for c in range(copies):
        def shift(x, c=c):
            return x + c * 10_000_000
        for e in evs:
            e2 = copy.deepcopy(e)
            if isinstance(e2.get("ts"), (int, float)) and e2.get("ph") != "M":
                e2["ts"] = round(e2["ts"] + c * span, 3)
            a = e2.get("args")
            if isinstance(a, dict):
                for k in ID_KEYS:
                    if isinstance(a.get(k), int):
                        a[k] = shift(a[k])
            if c and e2.get("ph") == "M":
                continue
            out.append(e2)
    return kineto(with_events(doc, out))


LAYOUT_VARIANTS = ("indent 1", "indent 2", "indent 4", "indent tab", "minified", "CRLF", "UTF-8 BOM",
                   "gzip, 3 members", ".json holding gzip", "traceEvents last after 20k deviceProperties",
                   "keys reversed, traceEvents first", "one 3 MB line (a call stack arg)", "top-level array",
                   "NaN/Infinity literals in args", "ts in scientific notation")


def run_big(src: Path, megabytes: float, repeat: int, log=print) -> list[Result]:
    text = src.read_bytes()
    if text[:2] == b"\x1f\x8b":
        text = gzip.decompress(text)
    big = scaled(text, json.loads(text.decode("utf-8-sig")), megabytes)
    doc = json.loads(big)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        orig = work / "original.json"
        orig.write_bytes(big)
        ref = signature(orig)
        name = f"{src.name} x{len(big) / 1e6:.0f} MB"
        for v in variants(big, doc):
            if v.name not in LAYOUT_VARIANTS:
                continue
            r = check(Path(name), v, ref, work, repeat, orig)
            if r.outcome == "ok" and r.ratio != r.ratio:
                r.ratio = side_by_side(orig, work / (re.sub(r"[^A-Za-z0-9]+", "_", v.name).strip("_") + v.suffix),
                                       repeat)
            out.append(r)
            log(f"{name} | {v.name} | {r.outcome[:90]} | {r.verdict} | {r.path} | {r.ratio:.2f}")
    return out


def _ingest_folder(folder: Path, store: Path) -> dict:
    """`wlprof ingest FOLDER` (the command's code, one process): rows, FLOPs, bytes by rank, and what it skipped."""
    import wlprof
    from wlprof.ingest import ingest, stop_workers

    try:
        result = ingest(folder, traces=store, jobs=1)
    finally:
        stop_workers()
    k = wlprof.load(store)
    return {"n": len(k), "flops": float(k.flops.sum()), "bytes": float(k["bytes"].sum()),
            "ranks": sorted(int(r) for r in k["rank"].unique()), "skipped": [Path(p).name for p in result.skipped]}


def run_folder(log=print) -> list[Result]:
    """A folder of two ranks (one re-saved with indent 4, one gzipped) beside JSON files that are not traces,
    against the folder of the two ranks alone; then the same folder with a third rank truncated."""
    from wlprof.errors import WlprofError

    ranks = sorted((FIX / "public" / "hta_2023_two_ranks").glob("*.json.gz"))
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        plain, mixed = work / "plain", work / "mixed"
        plain.mkdir()
        mixed.mkdir()
        for r in ranks:
            (plain / r.name).write_bytes(r.read_bytes())
        ref = _ingest_folder(plain, work / "s0")
        (mixed / "rank_0.json").write_bytes(dumps(json.loads(gzip.decompress(ranks[0].read_bytes())), indent=4))
        (mixed / "rank_1.json.gz").write_bytes(ranks[1].read_bytes())
        (mixed / "config.json").write_text(json.dumps({"model": "x", "batch": 8, "events": [1, 2]}))
        (mixed / "metrics.json").write_text(json.dumps([{"step": 1, "loss": 2.5}]))
        (mixed / "numbers.json").write_text("[1, 2, 3]")
        (mixed / "empty.json").write_bytes(b"")
        (mixed / "flops.json").write_bytes((FIX / "cpu_zoo5" / "gpt-train.flops.json").read_bytes())
        (mixed / "notes.txt").write_text("not json")
        r = Result("hta_2023_two_ranks/", "folder: 2 ranks + 5 non-trace JSON files", "same", "", "")
        try:
            got = _ingest_folder(mixed, work / "s1")
            r.outcome = f"ok, skipped {', '.join(got['skipped'])}"
            same = all(got[k] == ref[k] for k in ("n", "flops", "bytes", "ranks"))
            r.verdict = "same" if same else f"**DIFF** {got} vs {ref}"
        except WlprofError as exc:
            r.outcome, r.verdict = "refused: " + str(exc).splitlines()[0][:200], "**refused a trace**"
        out.append(r)
        log(f"{r.source} | {r.variant} | {r.outcome} | {r.verdict}")
        text = gzip.decompress(ranks[0].read_bytes())
        (mixed / "rank_2.json").write_bytes(truncate(text))
        store = work / "s2"
        r = Result("hta_2023_two_ranks/", "folder: the same + a truncated rank", "refuse:truncated", "", "")
        try:
            _ingest_folder(mixed, store)
            r.outcome, r.verdict = "ok", "**ingested a truncated rank**"
        except WlprofError as exc:
            msg = str(exc)
            left = [p for p in store.rglob("*") if p.is_file()] if store.exists() else []
            r.outcome = "refused: " + msg.replace("\n", " ")[:240]
            r.verdict = ("clear refusal" if "rank_2.json" in msg and re.search("truncated", msg) else
                         "**UNCLEAR refusal**") + ("" if not left else f", **{len(left)} files left in the store**")
        out.append(r)
        log(f"{r.source} | {r.variant} | {r.outcome} | {r.verdict}")
    return out


def render(results: list[Result]) -> str:
    lines = ["| source | variant | expect | outcome | verdict | reader | parse time / original |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        ratio = "" if r.ratio != r.ratio else f"{r.ratio:.2f}"
        outcome = r.outcome.replace("|", "\\|")
        lines.append(f"| {r.source} | {r.variant} | {r.expect} | {outcome} | {r.verdict} | {r.path} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sources", nargs="*", type=Path, help="trace files (default: a sample of tests/fixtures)")
    ap.add_argument("--markdown", type=Path, help="also write the table to this file")
    ap.add_argument("--big", type=float, default=0.0, help="also time layout variants of a ~MB copy of source 1")
    ap.add_argument("--repeat", type=int, default=3, help="timed parses per file for a ratio (best of)")
    a = ap.parse_args(argv)
    sources = a.sources or [p for p in DEFAULT_SOURCES if p.exists()]
    for s in sources:
        if not s.is_file():
            ap.error(f"SOURCES must be trace files (got {str(s)!r})")
    results = run(list(dict.fromkeys(sources)), a.repeat)
    if not a.sources:
        results += run_folder()
    if a.big > 0:
        results += run_big(sources[0], a.big, a.repeat)
    table = render(results)
    print(table)
    if a.markdown:
        a.markdown.write_text(table + "\n")
    bad = [r for r in results if r.verdict.startswith("**")]
    print(f"{len(results)} variants, {len(bad)} findings", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
