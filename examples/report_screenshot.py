"""Regenerate docs/report-demo.png, the README's picture of `replay --html`: the bundled
demo transcript only, in headless Chromium (needs the `browser` extra and chromium).

    .venv/bin/python examples/report_screenshot.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "demo-session.jsonl"
OUT = ROOT / "docs" / "report-demo.png"


def main() -> None:
    from playwright.sync_api import sync_playwright

    from stenograph.html_report import CHROMIUM_FLAGS

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        sys.exit("chromium is not installed")
    with tempfile.TemporaryDirectory() as folder:
        page_file = Path(folder) / "report.html"
        subprocess.run(  # relative paths: the picture names no folder of this machine
            [
                sys.executable,
                "-m",
                "stenograph",
                "replay",
                str(DEMO.relative_to(ROOT)),
                "--state-dir",
                folder,
                "--html",
                str(page_file),
            ],
            check=True,
            capture_output=True,
            cwd=ROOT,
        )
        with sync_playwright() as playwright:
            context = playwright.chromium.launch_persistent_context(
                str(Path(folder) / "profile"),
                executable_path=binary,
                headless=True,
                args=list(CHROMIUM_FLAGS),
                viewport={"width": 1040, "height": 1300},
            )
            page = context.new_page()
            page.goto(page_file.as_uri(), wait_until="load")
            OUT.parent.mkdir(exist_ok=True)
            page.screenshot(path=str(OUT), clip={"x": 0, "y": 0, "width": 1040, "height": 1300})
            context.close()
    print(f"{OUT} ({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
