#!/usr/bin/env python3
"""Plot a `sharc-run --log` CSV as an SVG line chart (standard library only).

usage: scripts/plot-training.py [LABEL=]LOG.csv [[LABEL=]LOG2.csv ...] OUT.svg

The top panel has the training loss per step (a line) and the validation
loss at each evaluation (a dashed line through markers); the bottom panel,
when the log has them, the tokens/s per step. The log may belong to a run
still going on: every finished step is in it (sharc-run flushes each row).
The columns are in docs/data.md. Several logs share the axes, one color a
run, named by LABEL (the file's name without .csv by default): sharc's run
beside scripts/torch-twin-train.py's, say.
"""
import csv
import math
import os
import sys
from xml.sax.saxutils import escape

WIDTH, LEFT, RIGHT = 760, 78, 20
TOP, LOSS_H, GAP, RATE_H, BOTTOM = 44, 300, 56, 130, 46
COLORS = {"train loss": "#1f77b4", "val loss": "#d62728",
          "tokens/s": "#2ca02c"}
# One color a run when several logs share a chart.
RUN_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
              "#8c564b"]


def read_log(path):
    """(train, val, rate): lists of (step, value) from the log's rows."""
    train, val, rate = [], [], []
    with open(path, newline="") as f:
        rows = csv.DictReader(f)
        missing = {"step", "kind", "loss", "val_loss"} - set(
            rows.fieldnames or [])
        if missing:
            sys.exit(f"plot-training: error: {path}: not a sharc-run --log "
                     f"file (no column {', '.join(sorted(missing))})")
        for row in rows:
            try:
                step = float(row["step"])
                if row["kind"] == "train" and row["loss"]:
                    train.append((step, float(row["loss"])))
                    if row.get("tokens_per_s"):
                        rate.append((step, float(row["tokens_per_s"])))
                elif row["kind"] == "val" and row["val_loss"]:
                    val.append((step, float(row["val_loss"])))
            except (TypeError, ValueError):
                # A row cut short by a run that is still writing it.
                continue
    finite = lambda points: [p for p in points if math.isfinite(p[1])]
    return finite(train), finite(val), finite(rate)


def nice_ticks(lo, hi, count=5, whole=False):
    """Round tick values (1, 2 or 5 times a power of ten) covering lo..hi;
    whole numbers only when `whole` (steps)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0]
    if hi <= lo:  # one step, or a flat line: widen around it
        pad = max(abs(lo) * 0.05, 0.5)
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    if whole:
        step = max(step, 1)
    first = math.floor(lo / step) * step
    ticks, k = [], 0
    while not ticks or ticks[-1] < hi - 1e-9 * step:
        ticks.append(first + k * step)
        k += 1
    return ticks


def label(value):
    return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.3g}"


class Panel:
    """One plot area: maps data to pixels and draws axes, grid and lines."""

    def __init__(self, out, top, height, xticks, values, ylabel):
        self.out, self.top, self.height = out, top, height
        self.xticks, self.yticks = xticks, nice_ticks(min(values),
                                                      max(values))
        self.width = WIDTH - LEFT - RIGHT
        self.ylabel = ylabel

    def x(self, step):
        lo, hi = self.xticks[0], self.xticks[-1]
        return LEFT + (step - lo) / (hi - lo) * self.width

    def y(self, value):
        lo, hi = self.yticks[0], self.yticks[-1]
        return self.top + self.height - (value - lo) / (hi - lo) * self.height

    def axes(self):
        w = self.out.append
        bottom = self.top + self.height
        for t in self.yticks:
            w(f'<line x1="{LEFT}" y1="{self.y(t):.1f}" x2="{LEFT + self.width}"'
              f' y2="{self.y(t):.1f}" stroke="#ddd"/>')
            w(f'<text x="{LEFT - 6}" y="{self.y(t) + 4:.1f}" '
              f'text-anchor="end">{label(t)}</text>')
        for t in self.xticks:
            w(f'<line x1="{self.x(t):.1f}" y1="{bottom}" x2="{self.x(t):.1f}"'
              f' y2="{bottom + 5}" stroke="#333"/>')
            w(f'<text x="{self.x(t):.1f}" y="{bottom + 18}" '
              f'text-anchor="middle">{label(t)}</text>')
        w(f'<rect x="{LEFT}" y="{self.top}" width="{self.width}" '
          f'height="{self.height}" fill="none" stroke="#333"/>')
        w(f'<text x="{LEFT + self.width / 2}" y="{bottom + 36}" '
          f'text-anchor="middle">step</text>')
        mid = self.top + self.height / 2
        w(f'<text x="18" y="{mid}" text-anchor="middle" '
          f'transform="rotate(-90 18 {mid})">{escape(self.ylabel)}</text>')

    def series(self, name, points, color, dashed=False, markers=False):
        """One polyline per series; markers where points are sparse."""
        coords = " ".join(f"{self.x(s):.1f},{self.y(v):.1f}"
                          for s, v in points)
        dash = ' stroke-dasharray="5,4"' if dashed else ""
        self.out.append(
            f'<polyline class="series" data-series="{name}" points="{coords}"'
            f' fill="none" stroke="{color}" stroke-width="1.8"{dash}/>')
        if markers or len(points) == 1:
            for s, v in points:
                self.out.append(f'<circle cx="{self.x(s):.1f}" '
                                f'cy="{self.y(v):.1f}" r="3.5" fill="{color}"/>')


def legend(out, top, entries):
    """entries: (name, color, dashed). Upper right: a falling loss leaves
    that corner empty."""
    box = max(120, 40 + 7 * max(len(name) for name, _, _ in entries))
    x = WIDTH - RIGHT - box
    out.append(f'<rect x="{x - 8}" y="{top + 6}" width="{box}" '
               f'height="{18 * len(entries) + 4}" fill="white" '
               f'fill-opacity="0.85" stroke="#ccc"/>')
    for i, (name, color, dashed) in enumerate(entries):
        y = top + 16 + 18 * i
        dash = ' stroke-dasharray="5,4"' if dashed else ""
        out.append(f'<line x1="{x}" y1="{y}" x2="{x + 24}" y2="{y}" '
                   f'stroke="{color}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{x + 30}" y="{y + 4}">{escape(name)}</text>')


def plot(runs, svg_path):
    """runs: (label, log path); one log plots as it always has, several
    share the axes with a color a run and the label before each name."""
    logs = []
    for label, path in runs:
        try:
            train, val, rate = read_log(path)
        except (OSError, UnicodeDecodeError, csv.Error) as error:
            sys.exit(f"plot-training: error: {path}: {error}")
        if not train and not val:
            sys.exit(f"plot-training: error: {path}: no training or "
                     "validation rows yet")
        logs.append((label, train, val, rate))
    every = [p for _, train, val, rate in logs for p in train + val + rate]
    steps = [s for s, _ in every]
    xticks = nice_ticks(min(steps), max(steps), whole=True)
    rates = [v for *_, rate in logs for _, v in rate]
    height = TOP + LOSS_H + (GAP + RATE_H if rates else 0) + BOTTOM
    title = " vs ".join(os.path.basename(path) for _, path in runs)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
           f'height="{height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
           f'<text x="{WIDTH / 2}" y="24" text-anchor="middle" '
           f'font-size="15">Training loss: {escape(title)}</text>']
    losses = [v for _, train, val, _ in logs for _, v in train + val]
    loss = Panel(out, TOP, LOSS_H, xticks, losses, "loss")
    loss.axes()
    speed = None
    if rates:
        speed = Panel(out, TOP + LOSS_H + GAP, RATE_H, xticks, rates,
                      "tokens/s")
        speed.axes()
    entries = []
    for i, (label, train, val, rate) in enumerate(logs):
        def name(kind):
            return f"{label} {kind}" if len(logs) > 1 else kind

        def color(kind):
            return RUN_COLORS[i % len(RUN_COLORS)] if len(logs) > 1 \
                else COLORS[kind]
        if train:
            loss.series(name("train loss"), train, color("train loss"))
            entries.append((name("train loss"), color("train loss"), False))
        if val:
            loss.series(name("val loss"), val, color("val loss"),
                        dashed=True, markers=True)
            entries.append((name("val loss"), color("val loss"), True))
        if rate:
            speed.series(name("tokens/s"), rate, color("tokens/s"))
            entries.append((name("tokens/s"), color("tokens/s"), False))
    legend(out, TOP, entries)
    out.append("</svg>")
    tmp = svg_path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(out) + "\n")
    os.replace(tmp, svg_path)


def main(argv):
    if len(argv) < 3 or argv[1] in ("-h", "--help"):
        sys.exit("usage: plot-training.py [LABEL=]LOG.csv "
                 "[[LABEL=]LOG2.csv ...] OUT.svg")
    runs = []
    for arg in argv[1:-1]:
        label, sep, path = arg.partition("=")
        if not sep or not label or os.path.exists(arg):
            label, path = os.path.basename(arg).removesuffix(".csv"), arg
        runs.append((label, path))
    try:
        plot(runs, argv[-1])
    except OSError as error:
        sys.exit(f"plot-training: error: {argv[-1]}: {error}")


if __name__ == "__main__":
    main(sys.argv)
