#!/usr/bin/env python3
"""Summarises a step trace from `sharc-run PLAN --trace t.json`.

Per rank: the step's span (first start to last end over every stream), each
stream's busy time (the union of its instructions' intervals), how much of
the communication stream's busy time ran while the compute stream was busy
too (hidden), and the overlap ratio the speed issue states its goal in:
span / max(stream busy) (1.0: the step is as long as its busiest stream;
the goal is at most 1.10). Then the ops that take the most time; with
--locs N, the N model-file locations (the YAML line each instruction came
from) that take the most, summed over their instructions; with --instrs N,
the N longest instructions, each with its rank, index and location. A
plan compiled with recompute adds the time its re-run instructions took.

    python3 scripts/trace-summary.py t.json [--top 12] [--locs N] [--instrs N]
"""
import argparse
import collections
import json
import sys


def union(intervals):
    """Sorted, merged (start, end) intervals."""
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def length(intervals):
    return sum(end - start for start, end in intervals)


def intersection(a, b):
    """Total length of the overlap of two merged interval lists."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        low, high = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, high - low)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--locs", type=int, default=0,
                        help="list the N locations that take the most time")
    parser.add_argument("--instrs", type=int, default=0,
                        help="list the N longest instructions")
    args = parser.parse_args()
    try:
        with open(args.trace) as f:
            trace = json.load(f)
    except (OSError, ValueError) as error:
        sys.exit(f"trace-summary: {args.trace}: {error}")
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    threads = {}
    spans = collections.defaultdict(list)  # (pid, tid) -> intervals
    by_op = collections.defaultdict(lambda: [0, 0.0])
    by_loc = collections.defaultdict(lambda: [0, 0.0])
    instrs = []  # (duration, rank, instruction, op, location)
    rerun = collections.defaultdict(lambda: [0, 0.0])  # policy -> count, us
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e.get("ph") == "X":
            spans[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
            op = by_op[e["name"]]
            op[0] += 1
            op[1] += e["dur"]
            loc = e.get("args", {}).get("loc", "?")
            at = by_loc[loc]
            at[0] += 1
            at[1] += e["dur"]
            instrs.append((e["dur"], e["pid"], e.get("args", {}).get("instr"),
                           e["name"], loc))
            policy = e.get("args", {}).get("recompute")
            if policy:
                rerun[policy][0] += 1
                rerun[policy][1] += e["dur"]
    if not spans:
        sys.exit(f"trace-summary: {args.trace}: no instruction spans")
    for pid in sorted({pid for pid, _ in spans}):
        streams = {tid: union(iv) for (p, tid), iv in spans.items() if p == pid}
        start = min(iv[0][0] for iv in streams.values())
        end = max(iv[-1][1] for iv in streams.values())
        busy = {tid: length(iv) for tid, iv in streams.items()}
        print(f"rank {pid}: step span {(end - start) / 1e3:.3f} ms")
        for tid in sorted(streams):
            name = threads.get((pid, tid), f"stream {tid}")
            print(f"  {name:<14} busy {busy[tid] / 1e3:8.3f} ms "
                  f"({100 * busy[tid] / (end - start):5.1f}% of the span)")
        if len(streams) > 1:
            compute = streams[min(streams)]
            for tid in sorted(streams)[1:]:
                hidden = intersection(compute, streams[tid])
                name = threads.get((pid, tid), f"stream {tid}")
                share = 100 * hidden / busy[tid] if busy[tid] else 0.0
                print(f"  {name} hidden under compute: {hidden / 1e3:.3f} ms "
                      f"({share:.1f}%)")
        print(f"  overlap ratio (span / busiest stream): "
              f"{(end - start) / max(busy.values()):.3f}")
    total = sum(t for _, t in by_op.values())
    print(f"ops by time (all ranks and streams, {total / 1e3:.3f} ms):")
    for name, (count, t) in sorted(by_op.items(), key=lambda kv: -kv[1][1])[
            :args.top]:
        print(f"  {name:<24} {count:5d} x  {t / 1e3:9.3f} ms "
              f"{100 * t / total:5.1f}%")
    if rerun:
        # What the plan's recompute runs again (its instructions' args).
        count = sum(c for c, _ in rerun.values())
        spent = sum(t for _, t in rerun.values())
        parts = ", ".join(f"{policy} {c} x {t / 1e3:.3f} ms"
                          for policy, (c, t) in sorted(rerun.items()))
        print(f"recompute: {count} instructions, {spent / 1e3:.3f} ms "
              f"({100 * spent / total:.1f}% of the ops' time): {parts}")
    if args.locs > 0:
        print("locations by time:")
        for loc, (count, t) in sorted(by_loc.items(),
                                      key=lambda kv: -kv[1][1])[:args.locs]:
            print(f"  {loc:<40} {count:5d} x  {t / 1e3:9.3f} ms "
                  f"{100 * t / total:5.1f}%")
    if args.instrs > 0:
        print("longest instructions:")
        for dur, rank, index, name, loc in sorted(
                instrs, key=lambda x: -x[0])[:args.instrs]:
            print(f"  {dur / 1e3:9.3f} ms  rank {rank} instr {index} "
                  f"{name} at {loc}")


if __name__ == "__main__":
    main()
