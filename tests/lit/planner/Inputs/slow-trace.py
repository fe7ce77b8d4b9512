"""Turns a simulated trace into a 'measured' one: every op of the names
given takes the launch, OVERHEAD and FACTOR times its roofline, the others
as simulated; a node marked "launch": 0 (it rode on its run's launch) has
neither launch nor overhead in its time.
usage: slow-trace.py SIM.json OUT.json LAUNCH_US FACTOR [--overhead US] OP..."""
import argparse
import json

parser = argparse.ArgumentParser()
parser.add_argument("sim")
parser.add_argument("out")
parser.add_argument("launch", type=float)
parser.add_argument("factor", type=float)
parser.add_argument("--overhead", type=float, default=0.0)
parser.add_argument("ops", nargs="+")
args = parser.parse_args()
slow = set(args.ops)
trace = json.load(open(args.sim))
events = trace["traceEvents"] if isinstance(trace, dict) else trace
for event in events:
    if event.get("ph") != "X":
        continue
    if event["name"] in slow:
        launched = event.get("args", {}).get("launch", 1) != 0
        paid = args.launch if launched else 0.0
        extra = args.overhead if launched else 0.0
        event["dur"] = paid + extra + args.factor * (event["dur"] - paid)
    event.setdefault("args", {})["instr"] = event["args"].pop("node", 0)
json.dump(trace, open(args.out, "w"))
