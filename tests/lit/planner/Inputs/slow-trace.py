"""Turns a simulated trace into a 'measured' one: every op of the names
given takes the launch plus FACTOR times its roofline, the others as
simulated; a node marked "launch": 0 (it rode on its run's launch) has no
launch in its time. usage: slow-trace.py SIM.json OUT.json LAUNCH_US FACTOR
OP..."""
import json
import sys

sim, out, launch, factor = sys.argv[1], sys.argv[2], float(sys.argv[3]), \
    float(sys.argv[4])
slow = set(sys.argv[5:])
trace = json.load(open(sim))
events = trace["traceEvents"] if isinstance(trace, dict) else trace
for event in events:
    if event.get("ph") != "X":
        continue
    if event["name"] in slow:
        paid = 0.0 if event.get("args", {}).get("launch", 1) == 0 else launch
        event["dur"] = paid + factor * (event["dur"] - paid)
    event.setdefault("args", {})["instr"] = event["args"].pop("node", 0)
json.dump(trace, open(out, "w"))
