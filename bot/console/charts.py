"""Bar charts as geometry for the SVG the templates draw (no script, no library): pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 640
HEIGHT = 180
_TOP = 10
_BOTTOM = 24  # room for the labels under the bars
_LEFT = 4
_WIDEST = 48  # a bar is never wider, however few there are


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str  # under the bar (some are left blank when there are many)
    title: str  # the bar's exact figure, shown on hover and read by screen readers
    value: float


@dataclass(frozen=True, slots=True)
class Chart:
    bars: tuple[Bar, ...]
    total: float
    peak: float
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def baseline(self) -> float:
        return self.height - _BOTTOM


def bar_chart(points: Sequence[tuple[str, float]], unit: str = "", digits: int = 0) -> Chart:
    """One bar per (label, value), scaled to the largest; at most ~12 labels are written."""
    peak = max((value for _, value in points), default=0.0)
    room = HEIGHT - _TOP - _BOTTOM
    step = (WIDTH - _LEFT) / max(len(points), 1)
    every = max(1, -(-len(points) // 12))
    bars = []
    for index, (label, value) in enumerate(points):
        tall = room * value / peak if peak > 0 else 0.0
        bars.append(
            Bar(
                x=round(_LEFT + index * step + step * 0.1, 2),
                y=round(HEIGHT - _BOTTOM - tall, 2),
                width=round(min(step * 0.8, _WIDEST), 2),
                height=round(tall, 2),
                label=label if index % every == 0 else "",
                title=f"{label}: {value:,.{digits}f}{unit}",
                value=value,
            )
        )
    return Chart(tuple(bars), total=sum(value for _, value in points), peak=peak)


def percentile(values: Sequence[float], share: float) -> float | None:
    """The nearest-rank percentile (`share` in 0..1) of `values`; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = min(max(math.ceil(share * len(ordered)), 1), len(ordered))
    return ordered[rank - 1]
