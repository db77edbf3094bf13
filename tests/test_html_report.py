"""replay --html: one offline file, opened in real headless Chromium: no console error, no
network request, the charts drawn."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from browser import coloured_share, png_pixels, visit
from conftest import DEMO, ROOT

from stenograph.html_report import render
from stenograph.replay import replay

CHARTS = {
    "context": "#chart-context svg",
    "cache": "#chart-cache-with-preset svg",
    "cost": "#chart-cost svg",
}
SCREENSHOT = ROOT / "docs" / "report-demo.png"


def html_of(transcript: Path, tmp_path: Path) -> Path:
    out = tmp_path / "report.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "stenograph",
            "replay",
            str(transcript),
            "--state-dir",
            str(tmp_path / "state"),
            "--html",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr
    return out


def assert_offline(text: str) -> None:
    """Nothing the page could load: no URL, no script, no external stylesheet or image."""
    assert not re.search(r"https?://|<script|<link|<img|<iframe|url\(|@import|src=", text)


def assert_opens_clean(page: Path, tmp_path: Path) -> dict[str, bytes]:
    seen = visit(page, tmp_path / "profile", CHARTS)
    assert seen.console_errors == [] and seen.page_errors == []
    assert seen.requests == [page.as_uri()]
    for name, shot in seen.screenshots.items():
        width, height, _ = png_pixels(shot)
        assert width > 600 and height > 150, name
        assert coloured_share(shot) > 0.005, f"the {name} chart draws nothing"
    return seen.screenshots


def test_demo_report_is_offline_and_drawn(tmp_path):
    page = html_of(DEMO, tmp_path)
    text = page.read_text()
    assert_offline(text)
    for part in (
        "Context size per call",
        "Prompt cache per call",
        "Cumulative cost",
        "Final notes",
        "Warnings",
        "memorize before call 7",
        "model call",
        "tokens",
    ):
        assert part in text
    assert "# Session Title" in text  # the notes, escaped into the page
    assert_opens_clean(page, tmp_path)


def test_long_development_transcript_report(shared_data, tmp_path):
    path = shared_data / "daaain-claude-code-log" / "real_projects"
    (transcript,) = path.glob("-Users-dain-workspace-claude-code-log-sample/37f83ec9-*.jsonl")
    page = html_of(transcript, tmp_path)
    assert_offline(page.read_text())
    assert_opens_clean(page, tmp_path)


def test_a_blank_chart_would_be_caught(tmp_path):
    """The pixel check fails on a chart area with nothing drawn."""
    report = replay(DEMO, "inactivity-only", None).to_json()
    empty = render({**report, "economics": None}, [{"tokens_full": 0, "tokens_sent": 0}], None)
    page = tmp_path / "empty.html"
    page.write_text(empty)
    seen = visit(page, tmp_path / "profile", {"context": CHARTS["context"]})
    assert coloured_share(seen.screenshots["context"]) < 0.005


def test_page_text_is_escaped():
    report = replay(DEMO, "inactivity-only", None).to_json()
    report["warnings"] = ["<script>alert(1)</script>"]
    page = render(report, [{"tokens_full": 1, "tokens_sent": 1}], "<b>notes</b>")
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;" in page


def test_readme_screenshot_is_a_small_png_of_the_demo():
    data = SCREENSHOT.read_bytes()
    width, height, _ = png_pixels(data)
    assert 600 <= width <= 1600 and height >= 300
    assert len(data) < 250_000
    assert "docs/report-demo.png" in (ROOT / "README.md").read_text()
