"""Atomic files: written to a temporary name in the same folder, then renamed into place."""

from __future__ import annotations

import functools
import os
import re
import tempfile
from pathlib import Path

from wlprof.memory import release


@functools.lru_cache(maxsize=1)
def _umask() -> int:
    """The process's umask (read once, by setting it and putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _temp(path: Path) -> tuple[int, str]:
    """A temporary file beside `path`, with the mode a plain `open` would give it (0644 under the usual
    umask 022): mkstemp creates 0600, which a rename would carry into place."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
    except BaseException:
        os.close(fd)
        Path(tmp).unlink(missing_ok=True)
        raise
    return fd, tmp


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    path = Path(path)
    fd, tmp = _temp(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


ROW_GROUP = 16_384  # rows converted to Arrow at a time (a last part under half of it joins the one before): a wide kernels row is ~1 KB there
# A table of this many rows or fewer (a point's steps row, its overlap rows) is written uncompressed:
# its pages hold a few values each, which zstd does not shrink, and a compressor per column costs
# more than the whole table's encoding. So is every column the frame lacks (written as nulls: a page
# of definition levels only), in a table of any size.
SMALL_TABLE = 64
WRITE_BUFFER = 1 << 20  # bytes of a Parquet file gathered before a write to the file


def atomic_write_parquet(path: Path, df, table: str) -> None:
    """Write DataFrame `df` as wlprof table `table`, converted and written one row group at a time
    (a million-row table never exists twice in memory), to a temporary name then renamed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from wlprof import schema

    fd, tmp = _temp(path)
    os.close(fd)
    arrow_schema = schema.arrow_schema(table)
    # dictionary pages for the string columns only: numbers rarely repeat, and hashing them costs
    # more than it saves (the files are smaller and written faster)
    strings = [f.name for f in arrow_schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    try:
        small = len(df) <= SMALL_TABLE
        compression = {f.name: "none" if small or f.name not in df.columns else "zstd" for f in arrow_schema}
        # through a buffer: the writer's every page and column chunk would be a write call of its own
        with pa.output_stream(tmp, buffer_size=WRITE_BUFFER) as sink, \
                pq.ParquetWriter(sink, arrow_schema, compression=compression, use_dictionary=strings) as writer:
            for part in schema.conformed(df, table, ROW_GROUP):
                writer.write_table(part)
                if len(df) > ROW_GROUP:
                    release(heap=False)  # each row group's Arrow copy; the heap's pages serve the next one
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def slug(text: str, limit: int = 48) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", str(text)).strip("-").lower()[:limit] or "x"


