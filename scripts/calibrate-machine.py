#!/usr/bin/env python3
"""Fits a machine file's op_efficiency to a measured step.

The cost model (planner/CostModel.h) costs a compute op as launch_overhead
plus its roofline, max(flops / peak, bytes / bandwidth), divided by the op's
efficiency. This script sets each op's efficiency to the ratio of the
roofline time the model predicts for that op over a step to the time the
op took on the device, so that a machine file measured with
scripts/measure-machine.py (peaks, bandwidth, links) also knows how close
sharc's kernels come to them. Collectives keep the links' alpha-beta.

Inputs are one plan's simulated trace (`sharc compile PLAN... --machine
BASE --trace-sim SIM.json`, BASE without op_efficiency) and its measured
trace (`sharc-run PLAN --backend cuda --trace TRACE.json`). A traced step
brackets every instruction with CUDA events and launches eagerly, so it runs
longer than the step sharc-run --cuda-graph times; --step-ms (that graph
step) scales the measured op times so their sum on the compute stream is
that step.

    python3 scripts/calibrate-machine.py --machine BASE.yaml --sim SIM.json \\
        --trace TRACE.json [--step-ms 11.2] -o CALIBRATED.yaml
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--machine", required=True)
    parser.add_argument("--sim", required=True)
    parser.add_argument("--trace", required=True)
    parser.add_argument("--step-ms", type=float)
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()

    text = open(args.machine).read()
    if re.search(r"^op_efficiency:", text, re.M):
        sys.exit(f"{args.machine}: already calibrated (op_efficiency); "
                 "start from the measured file")
    launch = re.search(r"^launch_overhead:\s*([0-9.eE+-]+)", text, re.M)
    if not launch:
        sys.exit(f"{args.machine}: no launch_overhead")
    launch_us = float(launch.group(1)) * 1e6

    simulated = compute_times(args.sim, "node")
    measured = compute_times(args.trace, "instr")
    busy = sum(total for total, _, _ in measured.values())
    scale = args.step_ms * 1e3 / busy if args.step_ms else 1.0

    efficiency = {}
    print(f"{'op':<24}{'count':>6}{'model us':>11}{'measured us':>13}"
          f"{'efficiency':>12}")
    for op in sorted(simulated, key=lambda o: -measured.get(o, [0])[0]):
        sim_total, count, launches = simulated[op]
        if op not in measured or measured[op][1] != count:
            print(f"{op}: {count} simulated, "
                  f"{measured.get(op, [0, 0, 0])[1]} measured; left at 1",
                  file=sys.stderr)
            continue
        roofline = sim_total - launch_us * launches
        spent = measured[op][0] * scale - launch_us * launches
        if roofline <= 0:
            continue
        value = min(HIGHEST, max(LOWEST, roofline / max(spent, 1e-9)))
        efficiency[op] = value
        print(f"{op:<24}{count:>6}{sim_total:>11.1f}"
              f"{measured[op][0] * scale:>13.1f}{value:>12.3f}")

    entries = ", ".join(f"{op}: {value:.4g}"
                        for op, value in sorted(efficiency.items()))
    with open(args.output, "w") as out:
        out.write(text.rstrip("\n") + "\n")
        out.write("# fitted by scripts/calibrate-machine.py from "
                  f"{args.trace} (scale {scale:.3f})\n")
        out.write(f"op_efficiency: {{{entries}}}\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
