"""The replay as one self-contained HTML page: inline SVG charts drawn here (no script, no
external resource), the cost lines, the final notes and the warnings."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from .economics.prices import usd

# Okabe-Ito: distinguishable with the common colour-vision deficiencies
BLUE, ORANGE, GREEN, VERMILION, PURPLE, SKY, YELLOW, GREY = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#F0E442",
    "#6b6b6b",
)
WIDTH, HEIGHT = 960, 320
LEFT, RIGHT, TOP, BOTTOM = 78, 20, 16, 46
MARKERS = {"memorize": GREEN, "extraction": PURPLE, "compaction": VERMILION}
# Opening the page in headless Chromium, offline, in a fresh profile (tests, screenshot)
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)


@dataclass(frozen=True)
class Series:
    """One line or one bar layer: its legend name, colour and a value per call."""

    name: str
    color: str
    values: Sequence[float]


@dataclass(frozen=True)
class Marker:
    """A vertical line at a call, with what happened there (shown on hover)."""

    kind: str
    at: float
    label: str


def render(report: dict[str, Any], per_call: Sequence[dict[str, int]], notes: str | None) -> str:
    """The page for a replay report (``to_json()``), per-call token figures and the notes."""
    economics = report.get("economics") or {}
    markers = _markers(report)
    calls = len(per_call)
    sections = [
        _summary(report, economics),
        _figure(
            "context",
            "Context size per call",
            "Tokens of the request: the full history vs what the preset sent.",
            _line_chart(
                [
                    Series("full history", GREY, [c["tokens_full"] for c in per_call]),
                    Series("as sent", BLUE, [c["tokens_sent"] for c in per_call]),
                ],
                markers,
                "tokens",
                calls,
            ),
            [("full history", GREY), ("as sent", BLUE)] + _marker_legend(markers),
        ),
    ]
    for view, title in (("with_preset", "with the preset"), ("as_recorded", "as recorded")):
        rows = (economics.get(view) or {}).get("calls") or []
        if rows:
            layers = [
                Series("cache read", SKY, [r["cache_read"] for r in rows]),
                Series("cache write", ORANGE, [r["cache_write"] for r in rows]),
                Series("uncached", VERMILION, [r["uncached"] for r in rows]),
            ]
            sections.append(
                _figure(
                    f"cache-{view.replace('_', '-')}",
                    f"Prompt cache per call, {title}",
                    "Input tokens read from the cache, written to it, and sent uncached"
                    " (simulated).",
                    _bar_chart(layers, markers, "input tokens"),
                    [(s.name, s.color) for s in layers] + _marker_legend(markers),
                )
            )
    if economics:
        sections.append(_cost_figure(economics, markers))
    sections.append(_events(report))
    sections.append(_notes(report, notes))
    sections.append(_warnings(report))
    title = f"stenograph replay: {Path(str(report.get('transcript', ''))).name}"
    return PAGE.format(title=escape(title), body="\n".join(s for s in sections if s))


def write(
    path: str | Path, report: dict[str, Any], per_call: Sequence[dict[str, int]], notes: str | None
) -> None:
    """Write the page to ``path``."""
    Path(path).write_text(render(report, per_call, notes), encoding="utf-8")


# --- the charts ------------------------------------------------------------------------------


def _line_chart(series: list[Series], markers: list[Marker], y_label: str, calls: int) -> str:
    top = max((max(s.values, default=0) for s in series), default=0)
    scale = _Scale(calls, top)
    parts = [scale.axes(y_label), _marker_lines(markers, scale)]
    for s in series:
        points = " ".join(f"{scale.x(i):.1f},{scale.y(v):.1f}" for i, v in enumerate(s.values))
        parts.append(
            f'<polyline class="series" fill="none" stroke="{s.color}" stroke-width="2.5"'
            f' points="{points}"/>'
        )
        for i, v in enumerate(s.values):
            parts.append(
                f'<circle cx="{scale.x(i):.1f}" cy="{scale.y(v):.1f}" r="3" fill="{s.color}">'
                f"<title>call {i}: {escape(s.name)} {v:,.0f} {escape(y_label)}</title></circle>"
            )
    return _svg(parts)


def _bar_chart(layers: list[Series], markers: list[Marker], y_label: str) -> str:
    calls = len(layers[0].values)
    totals = [sum(layer.values[i] for layer in layers) for i in range(calls)]
    scale = _Scale(calls, max(totals, default=0))
    width = max(1.0, scale.step * 0.7)
    parts = [scale.axes(y_label), _marker_lines(markers, scale)]
    for i in range(calls):
        base = 0.0
        tip = "; ".join(f"{layer.name} {layer.values[i]:,.0f}" for layer in layers)
        for layer in layers:
            value = layer.values[i]
            if value > 0:
                y0, y1 = scale.y(base), scale.y(base + value)
                parts.append(
                    f'<rect class="bar" x="{scale.x(i) - width / 2:.1f}" y="{y1:.1f}"'
                    f' width="{width:.1f}" height="{max(0.5, y0 - y1):.1f}" fill="{layer.color}">'
                    f"<title>call {i}: {escape(tip)}</title></rect>"
                )
            base += value
    return _svg(parts)


def _cost_figure(economics: dict[str, Any], markers: list[Marker]) -> str:
    recorded = _cumulative(c["cost"] for c in economics["as_recorded"]["calls"])
    preset_calls = economics["with_preset"]["calls"]
    forks = economics["with_preset"].get("forks", {}).get("calls", [])
    fork_cost = [0.0] * len(preset_calls)
    for fork in forks:
        fork_cost[fork["index"]] += fork["cost"]
    preset = _cumulative(c["cost"] for c in preset_calls)
    series = [Series("as recorded", GREY, recorded), Series("with the preset", BLUE, preset)]
    if forks:
        total = _cumulative(c["cost"] + f for c, f in zip(preset_calls, fork_cost, strict=True))
        series.append(Series("with the preset, notes forks included", PURPLE, total))
    chart = _line_chart(series, markers, "US dollars", len(recorded))
    return _figure(
        "cost",
        "Cumulative cost",
        "Simulated prompt-cache cost, call by call, as recorded and with the preset.",
        chart,
        [(s.name, s.color) for s in series] + _marker_legend(markers),
    )


def _cumulative(values: Any) -> list[float]:
    out, total = [], 0.0
    for value in values:
        total += value
        out.append(total)
    return out


class _Scale:
    """Calls on x (one slot each), 0..a round maximum on y."""

    def __init__(self, calls: int, top: float) -> None:
        self.calls = max(calls, 1)
        self.ticks = _ticks(top)
        self.top = self.ticks[-1] or 1.0
        self.step = (WIDTH - LEFT - RIGHT) / self.calls

    def x(self, index: float) -> float:
        return LEFT + self.step * (index + 0.5)

    def y(self, value: float) -> float:
        return TOP + (HEIGHT - TOP - BOTTOM) * (1 - value / self.top)

    def axes(self, y_label: str) -> str:
        parts = []
        for tick in self.ticks:
            y = self.y(tick)
            parts.append(
                f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_short(tick)}</text>'
            )
        every = max(1, math.ceil(self.calls / 20))
        for i in range(0, self.calls, every):
            x, y = self.x(i), HEIGHT - BOTTOM + 16
            parts.append(f'<text x="{x:.1f}" y="{y}" text-anchor="middle">{i}</text>')
        bottom = HEIGHT - BOTTOM
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{bottom}" y2="{bottom}" class="axis"/>'
            f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{bottom}" class="axis"/>'
            f'<text x="{(LEFT + WIDTH - RIGHT) / 2:.0f}" y="{HEIGHT - 8}" text-anchor="middle"'
            f' class="label">model call</text>'
            f'<text transform="translate(16 {(TOP + bottom) / 2:.0f}) rotate(-90)"'
            f' text-anchor="middle" class="label">{escape(y_label)}</text>'
        )
        return "".join(parts)


def _ticks(top: float) -> list[float]:
    """0 and 4-6 round steps (1, 2 or 5 x 10^n) reaching ``top``."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / 5
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    count = math.ceil(top / step - 1e-9)
    return [step * i for i in range(count + 1)]


def _short(value: float) -> str:
    if value >= 1e6:
        return f"{value / 1e6:g}M"
    if value >= 1e3:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def _marker_lines(markers: list[Marker], scale: _Scale) -> str:
    parts = []
    for marker in markers:
        x = scale.x(marker.at)
        parts.append(
            f'<line class="marker" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}"'
            f' stroke="{MARKERS[marker.kind]}" stroke-width="6" stroke-opacity="0.35">'
            f"<title>{escape(marker.label)}</title></line>"
        )
    return "".join(parts)


def _svg(parts: list[str]) -> str:
    return f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img">' + "".join(parts) + "</svg>"


def _markers(report: dict[str, Any]) -> list[Marker]:
    out = [
        Marker(
            "memorize",
            e["before_assistant_index"],
            f"memorize before call {e['before_assistant_index']}: {e['entries']} entries after"
            f" a {e['gap_seconds']:,.0f} s pause, ~{e['tokens_saved']:,} tokens left out",
        )
        for e in report.get("memorize_events", [])
    ]
    out += [
        Marker(
            "extraction",
            e["after_assistant_index"],
            f"notes after call {e['after_assistant_index']}: {e['tokens']:,} tokens,"
            f" {e['tool_calls']} tool calls ({e['reason']}); {e['status']}",
        )
        for e in report.get("extractions", [])
    ]
    out += [
        Marker(
            "compaction",
            c["before_assistant_index"],
            f"compaction before call {c['before_assistant_index']}: {c['tokens_before']:,} ->"
            f" {c['tokens_after']:,} tokens, {c['kept_messages']} messages kept",
        )
        for c in report.get("compactions", [])
    ]
    return out


def _marker_legend(markers: list[Marker]) -> list[tuple[str, str]]:
    kinds = sorted({m.kind for m in markers}, key=list(MARKERS).index)
    return [(kind, MARKERS[kind]) for kind in kinds]


# --- the page --------------------------------------------------------------------------------


def _figure(name: str, title: str, caption: str, chart: str, legend: list[tuple[str, str]]) -> str:
    keys = "".join(
        f'<span class="key"><span class="swatch" style="background:{color}"></span>'
        f"{escape(name)}</span>"
        for name, color in legend
    )
    return (
        f'<section class="chart" id="chart-{name}"><h2>{escape(title)}</h2>'
        f'<p class="caption">{escape(caption)} Hover a point, a bar or a marker for its'
        " figures.</p>"
        f'<div class="legend">{keys}</div>{chart}</section>'
    )


def _summary(report: dict[str, Any], economics: dict[str, Any]) -> str:
    rows = [
        ("transcript", str(report.get("transcript", ""))),
        ("preset", str(report.get("preset", ""))),
        ("model calls", f"{report.get('calls', 0):,}"),
        ("tokens, full history", f"{report.get('tokens_full', 0):,}"),
        ("tokens, as sent", f"{report.get('tokens_sent', 0):,}"),
        ("entries memorized", f"{report.get('memorized_entries', 0):,}"),
        ("extractions", f"{len(report.get('extractions', [])):,}"),
    ]
    ttl = report.get("cache_ttl")
    if ttl:
        rows.append(("prompt-cache TTL detected", f"{ttl['ttl']} (from the {ttl['source']})"))
    if economics:
        recorded = economics["as_recorded"]["totals"]["cost"]
        preset = economics["with_preset"]["totals"]["cost"]
        rows += [
            (f"cost as recorded ({economics['cache_ttl']} cache)", usd(recorded)),
            ("cost with the preset", usd(preset)),
            ("saving", usd(recorded - preset)),
        ]
        forks = economics["with_preset"].get("forks", {})
        if forks.get("calls"):
            fork = forks["totals"]["cost"]
            rows += [
                (f"notes forks ({len(forks['calls'])} calls)", usd(fork)),
                ("saving, forks included", usd(recorded - preset - fork)),
            ]
    cells = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f'<section><h1>stenograph replay</h1><table class="summary">{cells}</table></section>'


def _events(report: dict[str, Any]) -> str:
    markers = _markers(report)
    if not markers:
        return ""
    items = "".join(
        f'<li><span class="swatch" style="background:{MARKERS[m.kind]}"></span>'
        f"{escape(m.label)}</li>"
        for m in sorted(markers, key=lambda m: m.at)
    )
    return f'<section><h2>What the handlers did</h2><ul class="events">{items}</ul></section>'


def _notes(report: dict[str, Any], notes: str | None) -> str:
    if notes is None:
        return ""
    where = escape(str(report.get("memory_file") or ""))
    return (
        f'<section><h2>Final notes</h2><p class="caption">{where}</p>'
        f'<pre class="notes">{escape(notes)}</pre></section>'
    )


def _warnings(report: dict[str, Any]) -> str:
    lines = list(report.get("warnings", []))
    lines += [
        f"handler {e['handler']} failed in {e['phase']}: {e['error']}"
        for e in report.get("handler_errors", [])
    ]
    lines += [
        f"request before call {v['before_assistant_index']}: {'; '.join(v['problems'])}"
        for v in report.get("request_violations", [])
    ]
    body = (
        "<ul>" + "".join(f"<li>{escape(str(line))}</li>" for line in lines) + "</ul>"
        if lines
        else "<p>none</p>"
    )
    return f"<section><h2>Warnings</h2>{body}</section>"


PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d1d1f;
  background: #fafafa; margin: 0; }}
main {{ max-width: 1000px; margin: 0 auto; padding: 16px 20px 48px; }}
h1 {{ font-size: 1.5em; margin: 0.4em 0; }}
h2 {{ font-size: 1.15em; margin: 1.2em 0 0.2em; }}
section {{ background: #fff; border: 1px solid #e3e3e3; border-radius: 8px; padding: 8px 16px;
  margin: 12px 0; }}
svg {{ width: 100%; height: auto; display: block; }}
svg text {{ font-size: 12px; fill: #444; }}
svg .label {{ font-size: 13px; fill: #222; }}
svg .grid {{ stroke: #e6e6e6; }}
svg .axis {{ stroke: #777; }}
.caption {{ color: #555; margin: 0 0 6px; font-size: 0.9em; }}
.legend {{ display: flex; flex-wrap: wrap; gap: 6px 16px; font-size: 0.9em; margin: 4px 0; }}
.swatch {{ display: inline-block; width: 12px; height: 12px; border-radius: 2px;
  margin-right: 6px; vertical-align: -1px; }}
table.summary th {{ text-align: left; font-weight: 500; padding: 2px 18px 2px 0; }}
pre.notes {{ white-space: pre-wrap; font-size: 0.85em; background: #f4f4f4; padding: 10px;
  border-radius: 6px; max-height: 520px; overflow: auto; }}
ul.events {{ list-style: none; padding-left: 0; }}
</style>
</head>
<body>
<main>
{body}
</main>
</body>
</html>
"""
