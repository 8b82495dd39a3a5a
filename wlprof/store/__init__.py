"""The trace store: run folders of Parquet tables, Chrome traces and a manifest, written atomically."""
