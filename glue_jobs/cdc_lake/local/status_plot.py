"""``cdc-lake status --plot``: each table's lag over the last day's commits, as a PNG (matplotlib, no display)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cdc_lake.ops.status import TableStatus


def plot_lags(found: Sequence[TableStatus], path: Path) -> None:
    """One line per table: at each commit, seconds from the oldest applied file's landing to the commit."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a server or in CI
    import matplotlib.pyplot as plt
    from matplotlib import dates

    figure, axes = plt.subplots(figsize=(10, 4.5), dpi=100)
    drawn = 0
    for status in found:
        points = [(dates.date2num(p.at), p.landed_lag_s) for p in status.lags if p.landed_lag_s is not None]
        if points:
            axes.plot([x for x, _ in points], [y for _, y in points], marker="o", label=status.table)
            drawn += 1
    if not drawn:
        axes.text(0.5, 0.5, "no commits in the last day", ha="center", va="center", transform=axes.transAxes)
    axes.set_title("cdc-lake: lag at each commit over the last day (oldest applied file's landing → commit)")
    axes.set_xlabel("commit time (UTC)")
    axes.set_ylabel("seconds")
    axes.xaxis_date()
    axes.grid(True, alpha=0.3)
    if drawn:
        axes.legend(loc="upper left", fontsize="small")
    figure.autofmt_xdate()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
