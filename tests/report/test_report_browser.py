"""Every committed report, opened in headless Chromium at 1400 x 900: every image decodes, every SVG chart is drawn
inside the viewport, no table is wider than it, and the verdict and the first results table (the claims) start in the
first screen: long notes above them (code amendments, errata, a suite's headline) are folded. Screenshots go to
build/screenshots/ (git-ignored)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.browser
WIDTH, HEIGHT = 1400, 900
REPORTS = sorted(REPO.glob("reports/*/report.html")) + sorted(REPO.glob("reports/*/*/report.html"))
PROBE = """<script>
window.addEventListener("load", () => {
  const images = [...document.images];
  const tables = [...document.querySelectorAll("table")];
  const verdict = document.getElementById("verdict");
  const probe = {
    width: window.innerWidth,
    height: window.innerHeight,
    images: images.length,
    broken: images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.alt),
    wide: tables.filter(t => t.getBoundingClientRect().right > window.innerWidth + 1)
                .map(t => (t.rows[0] ? t.rows[0].innerText : "").slice(0, 80)),
    pageWidth: document.documentElement.scrollWidth,
    verdictBottom: verdict ? verdict.getBoundingClientRect().bottom : null,
    firstTableTop: tables.length ? tables[0].getBoundingClientRect().top : null,
    folded: [...document.querySelectorAll("details")].filter(d => d.open).length,
    svgs: [...document.querySelectorAll("figure > svg")].map(s => {
      const r = s.getBoundingClientRect();
      return [r.width, r.height, r.right];
    }),
    emptyFigures: [...document.querySelectorAll("figure")].filter(f => !f.querySelector("img, svg")).length,
  };
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(probe);
  document.body.appendChild(pre);
});
</script>"""


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium on this machine (`.ci/run` installs Debian's chromium)")


def _run(browser: str, *args: str) -> str:
    cmd = [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}", *args]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.parametrize("report", REPORTS, ids=lambda p: str(p.relative_to(REPO / "reports")))
def test_report_reads_in_a_browser(report: Path, tmp_path: Path) -> None:
    browser = _chromium()
    page = tmp_path / "page.html"
    page.write_text(report.read_text().replace("</body>", PROBE + "</body>"))
    dom = _run(browser, "--virtual-time-budget=15000", "--dump-dom", page.as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, "the probe did not run"
    probe = json.loads(html.unescape(found.group(1)))
    assert probe["width"] == WIDTH, probe
    assert not probe["broken"], f"images that do not decode: {probe['broken']}"
    assert not probe["wide"], f"tables wider than {WIDTH} px: {probe['wide']}"
    assert probe["pageWidth"] <= WIDTH, probe
    assert probe["verdictBottom"] is not None and probe["verdictBottom"] <= HEIGHT, probe
    assert probe["firstTableTop"] is not None and probe["firstTableTop"] < probe["height"], probe  # results: 1st screen
    assert probe["folded"] == 0, probe  # folded notes start closed
    assert probe["emptyFigures"] == 0, probe  # every figure shows an image or a chart
    for width, height, right in probe["svgs"]:  # the SVG charts: drawn, and scaled into the page
        assert width > 0 and height > 0 and right <= WIDTH + 1, probe["svgs"]
    shots = REPO / "build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    name = str(report.relative_to(REPO / "reports")).replace("/", "_").removesuffix(".html") + ".png"
    _run(browser, f"--screenshot={shots / name}", report.as_uri())
    assert (shots / name).stat().st_size > 0
