"""Figures (matplotlib, PNG): drawing only; every number comes from wlprof.analysis."""
