#!/usr/bin/env python3
"""Fits a machine file's op_efficiency (and op_overhead) to measured steps.

The cost model (planner/CostModel.h) costs a compute op as launch_overhead
plus op_overhead[op] plus its roofline, max(flops / peak, bytes /
bandwidth), divided by op_efficiency[op]. This script fits both per op, so
that a machine file measured with scripts/measure-machine.py (peaks,
bandwidth, links) also knows how close sharc's kernels come to them.
Collectives keep the links' alpha-beta.

Each point is one plan's simulated trace (`sharc compile PLAN... --machine
BASE --trace-sim SIM.json`, BASE without op_efficiency) and its measured
trace (`sharc-run PLAN --backend cuda --trace TRACE.json`). A traced step
brackets every instruction with CUDA events and launches eagerly, so it runs
longer than the step sharc-run --cuda-graph times; a point's STEP_MS (that
graph step) scales its measured op times so their sum on the compute stream
is that step (0 keeps them as traced).

With one point, each op's efficiency is its roofline time over its measured
time, and op_overhead stays 0. With several (of different sizes), each op's
measured time net of launches, over the points, is fitted as
overhead x launches + roofline / efficiency, by least squares on the
relative error; an op whose fit would want a negative overhead gets 0 and
the efficiency alone.

    python3 scripts/calibrate-machine.py --machine BASE.yaml \\
        --sim SIM.json --trace TRACE.json [--step-ms 11.2] -o CAL.yaml
    python3 scripts/calibrate-machine.py --machine BASE.yaml \\
        --point SIM1.json TRACE1.json 10.2 --point SIM2.json TRACE2.json 5.9 \\
        [--point ...] -o CAL.yaml
"""
import argparse
import collections
import json
import re
import sys

# Efficiency is clamped to what the machine reader accepts (0, 4].
LOWEST, HIGHEST = 0.05, 4.0


def compute_times(path, key):
    """Per op name: [total microseconds, count, launches] of rank 0's
    compute ops; a simulated node marked "launch": 0 rode on the launch of
    its run of updates (one launch per run, as the runtime groups them)."""
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    totals = collections.defaultdict(lambda: [0.0, 0, 0])
    for event in events:
        if event.get("ph") != "X" or event.get("pid", 0) != 0:
            continue
        if event.get("cat") != "compute" or key not in event.get("args", {}):
            continue
        total = totals[event["name"]]
        total[0] += event["dur"]
        total[1] += 1
        total[2] += 0 if event["args"].get("launch", 1) == 0 else 1
    return totals


def fit_op(rows):
    """(overhead us, efficiency) for rows of (launches, roofline us,
    measured us net of launches): weighted least squares on the relative
    error of overhead x launches + roofline / efficiency."""
    if len(rows) > 1:
        a11 = sum((n / m) ** 2 for n, r, m in rows)
        a12 = sum(n * r / m ** 2 for n, r, m in rows)
        a22 = sum((r / m) ** 2 for n, r, m in rows)
        b1 = sum(n / m for n, r, m in rows)
        b2 = sum(r / m for n, r, m in rows)
        det = a11 * a22 - a12 * a12
        if abs(det) > 1e-12 * a11 * a22:
            overhead = (b1 * a22 - b2 * a12) / det
            inverse = (a11 * b2 - a12 * b1) / det
            if overhead >= 0 and inverse > 0:
                return overhead, 1.0 / inverse
    inverse = sum(r / m for n, r, m in rows) / sum((r / m) ** 2
                                                    for n, r, m in rows)
    return 0.0, 1.0 / inverse


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--machine", required=True)
    parser.add_argument("--sim")
    parser.add_argument("--trace")
    parser.add_argument("--step-ms", type=float)
    parser.add_argument("--point", nargs=3, action="append", default=[],
                        metavar=("SIM", "TRACE", "STEP_MS"))
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    points = [(sim, trace, float(step)) for sim, trace, step in args.point]
    if args.sim or args.trace:
        if not (args.sim and args.trace):
            sys.exit("calibrate-machine: --sim and --trace go together")
        points.append((args.sim, args.trace, args.step_ms))
    if not points:
        sys.exit("calibrate-machine: give --sim and --trace, or --point")

    text = open(args.machine).read()
    if re.search(r"^op_(efficiency|overhead):", text, re.M):
        sys.exit(f"{args.machine}: already calibrated (op_efficiency or "
                 "op_overhead); "
                 "start from the measured file")
    launch = re.search(r"^launch_overhead:\s*([0-9.eE+-]+)", text, re.M)
    if not launch:
        sys.exit(f"{args.machine}: no launch_overhead")
    launch_us = float(launch.group(1)) * 1e6

    # op -> [(launches, roofline us, measured us net of launches)]
    rows = collections.defaultdict(list)
    scales = []
    for sim, trace, step_ms in points:
        simulated = compute_times(sim, "node")
        measured = compute_times(trace, "instr")
        busy = sum(total for total, _, _ in measured.values())
        scale = step_ms * 1e3 / busy if step_ms else 1.0
        scales.append(scale)
        for op, (sim_total, count, launches) in simulated.items():
            if op not in measured or measured[op][1] != count:
                print(f"{op}: {count} simulated, "
                      f"{measured.get(op, [0, 0, 0])[1]} measured in "
                      f"{trace}; left out", file=sys.stderr)
                continue
            roofline = sim_total - launch_us * launches
            if roofline <= 0:
                continue
            rows[op].append((launches, roofline,
                             measured[op][0] * scale - launch_us * launches))

    efficiency, overhead = {}, {}
    print(f"{'op':<24}{'points':>7}{'overhead us':>13}{'efficiency':>12}")
    for op in sorted(rows):
        if any(m <= 0 for _, _, m in rows[op]):
            print(f"{op}: measured within its launches; left at 1",
                  file=sys.stderr)
            continue
        fixed, value = fit_op(rows[op])
        efficiency[op] = min(HIGHEST, max(LOWEST, value))
        # Below a nanosecond is the fit's rounding, not an overhead.
        if fixed > 1e-3:
            overhead[op] = fixed
        print(f"{op:<24}{len(rows[op]):>7}{fixed:>13.2f}"
              f"{efficiency[op]:>12.3f}")

    entries = ", ".join(f"{op}: {value:.4g}"
                        for op, value in sorted(efficiency.items()))
    with open(args.output, "w") as out:
        out.write(text.rstrip("\n") + "\n")
        sources = ", ".join(f"{trace} (scale {scale:.3f})"
                            for (_, trace, _), scale in zip(points, scales))
        out.write(f"# fitted by scripts/calibrate-machine.py from {sources}\n")
        out.write(f"op_efficiency: {{{entries}}}\n")
        if overhead:
            fixed = ", ".join(f"{op}: {value * 1e-6:.4g}"
                              for op, value in sorted(overhead.items()))
            out.write(f"op_overhead: {{{fixed}}}\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
