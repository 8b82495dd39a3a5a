"""`wlprof report --out DIR` writes index.html: one self-contained page (figures embedded, the tables, every
run's provenance) that a real browser loads without console errors, every figure rendered.

The browser is Playwright driving Chromium (Debian's `chromium` package through `executable_path`; the
README says how to install it); without either, the browser test skips and the file checks still run.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from conftest import copy_h200_runs
from typer.testing import CliRunner

from wlprof.cli.main import app

pytestmark = pytest.mark.slow  # the module's fixture writes a whole report

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]


def chromium() -> str | None:
    for candidate in (os.environ.get("WLPROF_CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser"),
                      "/usr/bin/chromium"):
        if candidate and Path(candidate).exists():
            return candidate
    return None


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = copy_h200_runs(tmp_path_factory.mktemp("traces"))
    out = tmp_path_factory.mktemp("report")
    res = CliRunner().invoke(app, ["report", "--traces", str(root), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def test_index_html_is_self_contained(report):
    page = (report / "index.html").read_text()
    pngs = sorted(p.name for p in report.glob("*.png"))
    assert {"latency_vs_flops.png", "roofline.png", "tflops_vs_batch.png", "phases_moe.png", "backends_gnn.png",
            "timings.png"} <= set(pngs)
    assert page.count("data:image/png;base64,") == len(pngs)
    # nothing loaded from elsewhere: no src/href to another file or site
    assert not re.findall(r'(?:src|href)="(?!data:|#)[^"]*"', page)
    for needle in ("How well FLOPs explain latency", "Runs and provenance", "NVIDIA H200", "wlprof sweep",
                   "torch 2.11.0+cu130"):
        assert needle in page
    md = (report / "report.md").read_text()
    assert "e+" not in md and "e-1" not in md  # numbers without scientific notation


def test_index_html_renders_in_a_browser(report):
    exe = chromium()
    if exe is None:
        pytest.skip("no Chromium here (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install playwright)")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
            page.goto((report / "index.html").as_uri(), wait_until="load")
            images = page.evaluate("""() => Array.from(document.images).map(i => ({
                ok: i.complete && i.naturalWidth > 0, w: i.naturalWidth, shown: i.getBoundingClientRect().width}))""")
            tables = page.evaluate("() => document.querySelectorAll('table').length")
            title = page.title()
        finally:
            browser.close()
    assert not errors, errors
    assert len(images) == len(list(report.glob("*.png")))
    assert all(i["ok"] and i["w"] > 300 and i["shown"] > 300 for i in images), images
    assert tables >= 3 and "NVIDIA H200" in title
