"""Analysis: pure functions from DataFrames to DataFrames. No printing, plotting or files."""
