"""Tables of a run's series and of run summaries, as text (console) and markdown (report)."""

from __future__ import annotations

import math

from rlvr.analysis.loaders import Run, count, table_series
from rlvr.metrics.keys import GENERATED_SAMPLES


def downsample(items: list, max_rows: int) -> list:
    """At most max_rows items, evenly spaced, always keeping the first and the last."""
    if max_rows < 2 or len(items) <= max_rows:
        return list(items)
    picks = sorted({round(i * (len(items) - 1) / (max_rows - 1)) for i in range(max_rows)})
    return [items[i] for i in picks]


def series_table(run: Run, max_rows: int = 20, keys=None) -> tuple[list[str], list[list]]:
    """(headers, rows): step, samples and `keys` (default: `table_series`) for each logged step, downsampled."""
    keys = table_series(run) if keys is None else keys
    headers = ["step", "samples", *keys]
    rows = [
        [count(row.get("step")), count(row.get(GENERATED_SAMPLES)), *(row.get(k) for k in keys)] for row in run.rows
    ]
    return headers, downsample(rows, max_rows)


def cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}" if math.isfinite(value) else str(value)
    return str(value)


def text_table(headers: list[str], rows: list[list]) -> str:
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda values: "  ".join(v.rjust(w) for v, w in zip(values, widths))
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, cells)])


def markdown_table(headers: list[str], rows: list[list]) -> str:
    escape = lambda v: cell(v).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(escape(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def summary_table(summary: list[dict]) -> tuple[list[str], list[list]]:
    headers = list(dict.fromkeys(key for row in summary for key in row))  # rows may differ (held-out columns)
    return headers, [[row.get(h) for h in headers] for row in summary]
