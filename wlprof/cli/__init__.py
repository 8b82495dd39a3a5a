"""The command line: one module per command, thin over library functions that return data."""
