"""benchmarks/mutation.py's bookkeeping, on a hand-written mutants tree: each mutant's change, the key that
names it by its function and change, and which explanation a survivor gets."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import mutation  # noqa: E402

MUTATED = '''
def x_f__mutmut_orig(a):
    b = a + 1
    return b


def x_f__mutmut_1(a):
    b = a - 1
    return b


def x_f__mutmut_2(a):
    b = a + 1
    return None


def x_f__mutmut_3(a):
    b = a - 1
    return b


def x_g__mutmut_orig(a=1):
    return a


def x_g__mutmut_1(a=2):
    return a


class C:
    def xǁCǁm__mutmut_orig(self):
        return 1

    def xǁCǁm__mutmut_1(self):
        return 2
'''


def _tree(tmp_path):
    (tmp_path / "mutants" / "pkg").mkdir(parents=True)
    (tmp_path / "mutants" / "pkg" / "mod.py").write_text(MUTATED)
    return tmp_path


def test_each_mutant_is_described_by_the_lines_it_changes(tmp_path):
    names = ["pkg.mod.x_f__mutmut_1", "pkg.mod.x_f__mutmut_2", "pkg.mod.x_g__mutmut_1", "pkg.mod.xǁCǁm__mutmut_1",
             "pkg.mod.x_h__mutmut_1", "pkg.other.x_f__mutmut_1"]
    changes = mutation.mutant_changes(_tree(tmp_path), names)
    # a signature's change is shown under the function's own name, not mutmut's
    assert changes == {"pkg.mod.x_f__mutmut_1": "b = a + 1 -> b = a - 1",
                       "pkg.mod.x_f__mutmut_2": "return b -> return None",
                       "pkg.mod.x_g__mutmut_1": "def g(a=1): -> def g(a=2):",
                       "pkg.mod.xǁCǁm__mutmut_1": "return 1 -> return 2"}  # no function, no module: left out
    assert mutation.content_key("pkg.mod.xǁCǁm__mutmut_1", "return 1 -> return 2") == "pkg.mod.C.m: return 1 -> return 2"
    assert mutation.content_key("pkg.mod.x_f__mutmut_9", None) is None


def test_a_survivor_is_explained_by_name_by_change_or_by_glob_and_an_ambiguous_change_by_name_only(tmp_path):
    names = ["pkg.mod.x_f__mutmut_1", "pkg.mod.x_f__mutmut_2", "pkg.mod.x_f__mutmut_3", "pkg.mod.xǁCǁm__mutmut_1"]
    keys = mutation.unique_keys(names, mutation.mutant_changes(_tree(tmp_path), names))
    # mutants 1 and 3 of f make the same change: neither can be named by it
    assert keys == {"pkg.mod.x_f__mutmut_1": None, "pkg.mod.x_f__mutmut_2": "pkg.mod.f: return b -> return None",
                    "pkg.mod.x_f__mutmut_3": None, "pkg.mod.xǁCǁm__mutmut_1": "pkg.mod.C.m: return 1 -> return 2"}
    why = {"pkg.mod.f: return b -> return None": "by change", "pkg.mod.f: b = a + 1 -> b = a - 1": "ambiguous",
           "pkg.mod.x_f__mutmut_3": "by name", "pkg.mod.xǁCǁ*": "by glob"}
    got = {n: mutation.reason(why, n, keys[n]) for n in names}
    assert got == {"pkg.mod.x_f__mutmut_1": None, "pkg.mod.x_f__mutmut_2": "by change",
                   "pkg.mod.x_f__mutmut_3": "by name", "pkg.mod.xǁCǁm__mutmut_1": "by glob"}
