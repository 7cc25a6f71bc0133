"""Charts as inline SVG, drawn here: no library, no script, nothing fetched.

:func:`timeline_chart` is where a run's time went: one lane per kind of work (the
program under capture, the stage queries, each reduction pass, the checks), one bar per
step at the time it ran, coloured by its phase. Steps that ran side by side overlap, so
the critical path is plain to see. Every bar carries its step as a tooltip
(``<title>``), escaped like all text on a page.
"""

from __future__ import annotations

from dataclasses import dataclass

from .document import Markup, esc, tag

#: Phase colours (colour-blind friendly, Okabe-Ito).
PHASES = {
    "warm-up": "#999999",
    "program": "#56B4E9",
    "stages": "#0072B2",
    "reduction": "#E69F00",
    "checks": "#009E73",
    "below the stage": "#CC79A7",
    "other": "#D55E00",
}


@dataclass(frozen=True)
class Bar:
    """One step on the timeline: its label, when it started and how long it took (seconds), its phase and lane."""

    label: str
    start: float
    seconds: float
    phase: str
    lane: str = ""


def timeline_chart(
    bars: list[Bar], *, width: int = 960, row: int = 18, gutter: int = 170, phases: dict[str, str] | None = None
) -> Markup:
    """A swimlane chart of ``bars`` against time: lanes in order of first use, an axis in seconds, a legend.

    ``phases`` names each phase's colour (default :data:`PHASES`); a phase it does not name is drawn as "other".
    """
    colours = PHASES if phases is None else phases
    if not bars:
        return tag("p", "No steps were timed.", class_="note")
    lanes = list(dict.fromkeys(b.lane or b.phase for b in bars))
    end = max(b.start + b.seconds for b in bars) or 1.0
    top, axis = 4, 22
    span = width - gutter - 10
    height = top + row * len(lanes) + axis
    scale = span / end
    parts = []
    for tick in _ticks(end):
        x = gutter + tick * scale
        parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{height - axis + 4}" stroke="#eaeef2"/>')
        parts.append(
            f'<text x="{x:.1f}" y="{height - 6}" font-size="11" text-anchor="middle" fill="#6e7781">{tick:g} s</text>'
        )
    for i, lane in enumerate(lanes):
        y = top + i * row
        parts.append(
            f'<text x="{gutter - 8}" y="{y + row - 5}" font-size="11" text-anchor="end" fill="#1f2328">{esc(_clip(lane, 26))}</text>'
        )
        parts.append(f'<line x1="{gutter}" y1="{y + row}" x2="{width - 10}" y2="{y + row}" stroke="#f0f2f4"/>')
    for bar in bars:
        x, y = gutter + bar.start * scale, top + lanes.index(bar.lane or bar.phase) * row
        w = max(bar.seconds * scale, 1.5)
        colour = colours.get(bar.phase, PHASES["other"])
        tip = esc(f"{bar.label}: {bar.seconds:.2f} s, from {bar.start:.2f} s")
        parts.append(
            f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{row - 6}" rx="2" fill="{colour}" fill-opacity="0.85" stroke="#fff" stroke-width="0.5"><title>{tip}</title></rect>'
        )
    svg = Markup(
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{esc(f'{len(bars)} steps over {end:.1f} s')}</title>{''.join(parts)}</svg>"
    )
    shown = [p for p in colours if any(b.phase == p for b in bars)]
    legend = tag("div", *(tag("span", tag("i", style=f"background:{colours[p]}"), p) for p in shown), class_="legend")
    return Markup(svg + legend)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _ticks(end: float) -> list[float]:
    """Round tick values from 0 to ``end``, about eight of them."""
    raw = end / 8
    step = next(
        s for s in (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600, float("inf")) if s >= raw
    )
    if step == float("inf"):
        step = raw
    ticks, t = [], 0.0
    while t <= end + 1e-9:
        ticks.append(round(t, 3))
        t += step
    return ticks
