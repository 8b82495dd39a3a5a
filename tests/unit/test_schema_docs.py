"""docs/columns.md is the page `python -m wlprof.schema_docs` writes from the schema, and says the dtypes
pandas really gives."""

from __future__ import annotations

from pathlib import Path

from wlprof import schema
from wlprof.schema_docs import columns_markdown, pandas_dtype

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_columns_page_is_up_to_date_with_the_schema():
    committed = (ROOT / "docs" / "columns.md").read_text(encoding="utf-8")
    assert committed == columns_markdown(), (
        "docs/columns.md is out of date: run `python -m wlprof.schema_docs docs/columns.md`")


def test_the_page_lists_every_column_with_the_dtype_pandas_reads_it_as():
    page = columns_markdown()
    for table in schema.TABLE_NAMES:
        read = schema.arrow_schema(table).empty_table().to_pandas()
        for c in schema.columns(table):
            assert f"| `{c.name}` |" in page, (table, c.name)
            got, said = str(read[c.name].dtype), pandas_dtype(c)
            # pandas 3 reads strings as `str`, pandas 2 as object; lists are object either way
            assert got == said or (said == "str" and got in ("str", "object")) or \
                (said == "object (arrays)" and got == "object"), (table, c.name, got, said)


def test_the_readme_links_the_page():
    assert "(docs/columns.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
