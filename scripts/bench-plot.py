#!/usr/bin/env python3
# bench-plot.py - the original benchmark's two-panel plot from sharc bench's CSV
#
#   scripts/bench-plot.py CSV PLOT.png [--kind memory|throughput]
#
# The layout of the original (seed-system.md, 3.8): 1x2 panels, 13x5 inches,
# 160 dpi, baseline ddp when present, else the first mode.
#  - throughput: bars of tokens/s (K/M axis) and bars of % of the baseline;
#  - memory, scanning seq_len: lines of peak MiB and step ms against seq_len;
#  - memory, scanning layers (or nothing): bars of peak % of the baseline and
#    step time % of the baseline, x labels with the parameter count.
# Peak memory is planned_peak_mib (every byte the plan allocates per rank,
# the like-for-like of the original's allocator peak). Bar width 0.8 / modes,
# dashed line at 100%, y limit max x 1.18, x labels rotated 30 degrees.
# Without matplotlib it says so and exits 0: the plot is optional.
import argparse
import csv
import math
import sys


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def params_text(count):
    if count >= 1e9:
        return "%.1fB" % (count / 1e9)
    return "%.0fM" % (count / 1e6)


def tokens_axis(value, _pos=None):
    if value >= 1e6:
        return "%.1fM" % (value / 1e6)
    return "%.0fK" % (value / 1e3)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("csv")
    parser.add_argument("plot")
    parser.add_argument("--kind", choices=["memory", "throughput"])
    args = parser.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        print("bench-plot: matplotlib is not installed; skipped the plot "
              "(pip install matplotlib, then: %s %s %s)"
              % (sys.argv[0], args.csv, args.plot))
        return 0
    with open(args.csv, newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        print("bench-plot: %s has no rows; skipped the plot" % args.csv)
        return 0
    kind = args.kind or ("throughput" if all(
        r["batch_policy"] == "fixed_global" for r in rows) else "memory")
    scaling = rows[0]["scaling"]
    modes, labels = [], {}
    for r in rows:
        if r["mode"] not in modes:
            modes.append(r["mode"])
            labels[r["mode"]] = r["label"]
    baseline = "ddp" if "ddp" in modes else modes[0]
    key = "seq_len" if scaling == "sequence" else "layers"
    points = []
    for r in rows:
        if int(r[key]) not in points:
            points.append(int(r[key]))
    cell = {(int(r[key]), r["mode"]): r for r in rows}

    def value(point, mode, column):
        r = cell.get((point, mode))
        return number(r[column]) if r and r["status"] == "ok" else math.nan

    def percent(point, mode, column):
        base = value(point, baseline, column)
        return 100 * value(point, mode, column) / base if base > 0 else math.nan

    fig, axes = plt.subplots(1, 2, figsize=(13, 5), dpi=160)
    if kind == "memory" and scaling == "sequence":
        for mode in modes:
            for ax, column in zip(axes, ["planned_peak_mib", "time_ms"]):
                ax.plot(points, [value(p, mode, column) for p in points],
                        marker="o", label=labels[mode])
        axes[0].set_ylabel("planned peak per rank (MiB)")
        axes[1].set_ylabel("step time (ms)")
        for ax in axes:
            ax.set_xlabel("seq_len")
            ax.legend(fontsize=7)
    else:
        if kind == "throughput":
            panels = [("tokens_per_second", False, "tokens/s"),
                      ("tokens_per_second", True, "% of " + labels[baseline])]
        else:
            panels = [("planned_peak_mib", True, "planned peak, % of " +
                       labels[baseline]),
                      ("time_ms", True, "step time, % of " + labels[baseline])]
        width = 0.8 / len(modes)
        if key == "layers":
            params = {int(r["layers"]): number(r["params"]) for r in rows}
            ticks = ["%d (%s)" % (p, params_text(params[p])) for p in points]
        else:
            ticks = [str(p) for p in points]
        for ax, (column, relative, ylabel) in zip(axes, panels):
            top = 0
            for m, mode in enumerate(modes):
                heights = [(percent if relative else value)(p, mode, column)
                           for p in points]
                xs = [i - 0.4 + width * (m + 0.5) for i in range(len(points))]
                ax.bar(xs, heights, width, label=labels[mode])
                finite = [h for h in heights if not math.isnan(h)]
                top = max([top] + finite)
            if relative:
                ax.axhline(100, linestyle="--", color="gray", linewidth=1)
            elif kind == "throughput":
                ax.yaxis.set_major_formatter(FuncFormatter(tokens_axis))
            ax.set_ylim(0, (top or 1) * 1.18)
            ax.set_xticks(range(len(points)))
            ax.set_xticklabels(ticks, rotation=30)
            ax.set_xlabel(key)
            ax.set_ylabel(ylabel)
            ax.legend(fontsize=7)
    fig.suptitle("sharc bench: %s, scanning %s" % (kind, key))
    fig.tight_layout()
    fig.savefig(args.plot)
    print("saved plot: %s" % args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
