"""The same collective on every rank: matched by order, clocks aligned, its start skew and the wait it caused.

A process group issues its collectives in one order on every rank, so the k-th collective
of a group on rank r is the k-th on every other rank of the group. Clocks: the ranks of
one host share one clock (offset 0); across hosts the offset of rank r is the median,
over matched collectives, of its end minus the reference rank's end (a collective's
ranks finish within its last transfer of each other, while they may start far apart).
P2P rows are listed but not matched: a send pairs with one peer's receive, which the
trace does not name. Conventions: `docs/overlap.md`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from wlprof import schema

WORK_KINDS = ("kernel", "comm")  # device kernels and gloo's work; the host op that enqueues is not the transfer
# the kernels columns a collectives table is made of (those a kernels table has)
COLLECTIVE_COLUMNS = tuple(dict.fromkeys(["kind", *(c.name for c in schema.columns("collectives"))]))


def collective_rows(kernels: pd.DataFrame) -> pd.DataFrame:
    """The rows that move a collective's or P2P op's data."""
    if "comm_class" not in kernels or kernels.empty:
        return kernels.iloc[0:0]
    mask = kernels.kind.isin(WORK_KINDS) & kernels.comm_class.isin(("collective", "p2p"))
    return kernels[mask]


def match(rows: pd.DataFrame, hosts: dict | None = None) -> pd.DataFrame:
    """The collectives table of one capture's ranks: `rows` are their collective rows (`collective_rows`),
    with a `rank` column; `hosts` maps rank -> host name where known (one host: one clock)."""
    if rows.empty:
        return rows.assign(seq=pd.Series(dtype="int64"))
    df = rows.copy()
    df["rank"] = df["rank"].fillna(0).astype(np.int64) if "rank" in df else 0
    df["_pg"] = df.process_group.fillna("?").astype(str) if "process_group" in df else "?"
    df = df.sort_values(["rank", "_pg", "ts_us"], kind="stable")
    df["seq"] = df.groupby(["rank", "_pg"]).cumcount().astype(np.int64)
    ranks = sorted(df["rank"].unique())
    ref = ranks[0]
    coll = df[df.comm_class == "collective"]
    # instances: (pg, seq) seen on more than one rank with one collective name
    key = ["_pg", "seq"]
    counts = coll.groupby(key)["rank"].transform("nunique")
    same = coll.assign(_name=coll["collective"].fillna("?")).groupby(key)["_name"].transform("nunique") == 1
    matched = coll[(counts > 1) & same]
    end = matched.ts_us + matched.dur_us
    offsets: dict[int, float] = {r: 0.0 for r in ranks}
    if len(ranks) == 1:
        method = "single rank"
    elif hosts and len({hosts.get(r) for r in ranks}) == 1 and None not in {hosts.get(r) for r in ranks}:
        method = "same host"
    elif len(matched):
        method = "collective ends"
        ends = matched.assign(_end=end).pivot_table(index=key, columns="rank", values="_end", aggfunc="first")
        for r in ranks:
            if r != ref and r in ends and ref in ends:
                d = (ends[r] - ends[ref]).dropna()
                offsets[r] = float(d.median()) if len(d) else 0.0
    else:
        method = "none: no collective to align by"
    df["clock_offset_us"] = df["rank"].map(offsets).astype(float)
    df["clock_method"] = method
    df["start_us"] = df.ts_us - df.clock_offset_us
    df["ranks_matched"] = 1
    df["arrival_skew_us"] = np.nan
    df["skew_wait_us"] = np.nan
    df["straggler_rank"] = pd.array([pd.NA] * len(df), dtype="Int64")
    sel = df.index.isin(matched.index)
    if sel.any():
        m = df[sel]
        g = m.groupby(key)["start_us"]
        first, last = g.transform("min"), g.transform("max")
        idx_last = m.loc[g.idxmax().to_numpy()]
        straggler = idx_last.set_index(key)["rank"]
        df.loc[sel, "ranks_matched"] = m.groupby(key)["rank"].transform("nunique").to_numpy()
        df.loc[sel, "arrival_skew_us"] = (m.start_us - first).to_numpy()
        df.loc[sel, "skew_wait_us"] = (last - m.start_us).to_numpy()
        df.loc[sel, "straggler_rank"] = pd.MultiIndex.from_frame(m[key]).map(straggler).to_numpy()
    return df.drop(columns=["_pg"]).reset_index(drop=True)


def per_rank(table: pd.DataFrame) -> pd.DataFrame:
    """Per rank: collectives (and how many were matched across ranks), bytes, time, the wait skew caused
    and how often it was the straggler."""
    if table.empty:
        return pd.DataFrame(columns=["rank", "collectives", "matched", "comm_bytes", "dur_us", "skew_wait_us",
                                     "straggler_of", "busbw_gbps_median"])
    matched = table[table.ranks_matched > 1]
    g = table.groupby("rank")
    out = pd.DataFrame({
        "collectives": g.size(),
        "matched": matched.groupby("rank").size().reindex(g.size().index, fill_value=0),
        "comm_bytes": g.comm_bytes.sum(min_count=1),
        "dur_us": g.dur_us.sum(),
        "skew_wait_us": g.skew_wait_us.sum(min_count=1),
        "busbw_gbps_median": g.busbw_gbps.median(),
    })
    strag = matched.drop_duplicates(["process_group", "seq"]).straggler_rank.value_counts() if len(matched) else {}
    out["straggler_of"] = [int(strag.get(r, 0)) if len(matched) else 0 for r in out.index]
    return out.reset_index()
