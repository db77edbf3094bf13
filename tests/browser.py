"""Headless Chromium for the HTML report tests (Playwright driving the system's chromium),
and a small PNG reader for screenshots."""

from __future__ import annotations

import os
import shutil
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from stenograph.html_report import CHROMIUM_FLAGS


def chromium_or_skip() -> tuple[Any, str]:
    """(playwright.sync_api, the chromium binary); a skip without them, a failure instead
    under ``STENOGRAPH_REQUIRE_EXTRAS=1`` (CI installs both)."""
    required = os.environ.get("STENOGRAPH_REQUIRE_EXTRAS") == "1"
    try:
        from playwright import sync_api
    except ImportError as exc:
        if required:
            raise
        pytest.skip(f"playwright is not installed (pip install 'stenograph[browser]'): {exc}")
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        if required:
            raise AssertionError("chromium is not installed (.ci/run installs it with apt-get)")
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    return sync_api, binary


@dataclass
class PageVisit:
    """What loading a page did: console errors, page errors, requests, a screenshot."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    screenshots: dict[str, bytes] = field(default_factory=dict)


def visit(page_file: Path, profile: Path, selectors: dict[str, str]) -> PageVisit:
    """Open ``page_file`` in a fresh profile at laptop width; screenshot each selector."""
    sync_api, binary = chromium_or_skip()
    seen = PageVisit()
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=binary,
            headless=True,
            args=list(CHROMIUM_FLAGS),
            viewport={"width": 1366, "height": 900},
        )
        try:
            page = context.new_page()
            page.on(
                "console",
                lambda m: seen.console_errors.append(m.text) if m.type == "error" else None,
            )
            page.on("pageerror", lambda e: seen.page_errors.append(str(e)))
            page.on("request", lambda r: seen.requests.append(r.url))
            page.goto(page_file.as_uri(), wait_until="load")
            page.wait_for_timeout(300)
            for name, selector in selectors.items():
                seen.screenshots[name] = page.locator(selector).first.screenshot()
        finally:
            context.close()
    return seen


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, chunks, header = 8, [], b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and interlace == 0 and color in (2, 6), "unsupported PNG"
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                guess = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + guess) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, rows


def coloured_share(data: bytes, channels: int = 3) -> float:
    """Share of the pixels that are clearly coloured (not white, grey or black)."""
    width, height, rows = png_pixels(data)
    step = len(rows[0]) // width
    coloured = 0
    for row in rows:
        for x in range(0, len(row), step):
            r, g, b = row[x], row[x + 1], row[x + 2]
            if max(r, g, b) - min(r, g, b) > 40:
                coloured += 1
    return coloured / (width * height)
