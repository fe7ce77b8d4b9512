"""Checks that `sharc compile --report=json` holds the figures the text
report prints, for a pipelined plan: every key the JSON had before the
pipeline object, in its order (with the stages' sends, transfer_bytes_by_axis),
then "pipeline" with each stage's memory,
the analytic bubble and, when simulated, the step, the bubble and each
stage's busy time. A JSON number must round to the text's digits.
usage: pipeline-json-matches-text.py TEXT JSON SCHEDULE CHUNKS"""
import json
import re
import sys

text_path, json_path, schedule, chunks = sys.argv[1:5]
text = open(text_path).read()
report = json.load(open(json_path))
failures = []


def near(what, value, shown, decimals):
    # The text rounds to `decimals` places: the JSON value (9 significant
    # digits) must lie within half a unit of that place of it.
    if abs(value - float(shown)) > 0.5 * 10 ** -decimals + 1e-9:
        failures.append("%s: json %r, text %s" % (what, value, shown))


keys = list(report)
expected = ["model", "mode", "world_size", "parameter_bytes",
            "optimizer_bytes", "master_bytes", "sharded_states", "sharded_params",
            "gradient_bytes",
            "gradient_slabs", "largest_slab_bytes", "activation_peak_bytes",
            "io_bytes", "cache_bytes", "workspace_bytes", "total_bytes", "peak_instruction",
            "peak_op", "peak_loc", "predicted_step_seconds",
            "comm_bytes_by_axis", "transfer_bytes_by_axis", "pipeline"]
if keys != expected:
    failures.append("keys %s, expected %s" % (keys, expected))
pipe = report["pipeline"]
if pipe["schedule"] != schedule or pipe["chunks"] != int(chunks):
    failures.append("schedule %s x%d" % (pipe["schedule"], pipe["chunks"]))

mib = 1 << 20
stage_lines = re.findall(
    r"stage (\d+): (\d+) instructions, parameters ([0-9.]+) MiB, optimizer "
    r"([0-9.]+) MiB, gradients ([0-9.]+) MiB, activations ([0-9.]+) MiB", text)
if len(stage_lines) != pipe["stages"] or \
        len(pipe["stage_memory"]) != pipe["stages"]:
    failures.append("%d stage lines, %d stages, %d stage_memory" % (
        len(stage_lines), pipe["stages"], len(pipe["stage_memory"])))
for line, stage in zip(stage_lines, pipe["stage_memory"]):
    s = int(line[0])
    if stage["stage"] != s or stage["instructions"] != int(line[1]):
        failures.append("stage %d: %r" % (s, stage))
    for key, shown in zip(["parameter_bytes", "optimizer_bytes",
                           "gradient_bytes", "activation_bytes"], line[2:]):
        near("stage %d %s" % (s, key), stage[key] / mib, shown, 2)

bubble = re.search(r"pipeline bubble: ([0-9.]+)% of the step \(analytic; "
                   r"(\d+) stages(?:, \d+ chunks a stage)?, (\d+) "
                   r"microbatches\), ([0-9.]+)% \(simulated", text)
if not bubble:
    failures.append("no simulated bubble line in the text")
else:
    near("analytic_bubble", pipe["analytic_bubble"] * 100, bubble.group(1), 1)
    if (pipe["stages"], pipe["microbatches"]) != \
            (int(bubble.group(2)), int(bubble.group(3))):
        failures.append("stages/microbatches %d/%d" % (
            pipe["stages"], pipe["microbatches"]))
    near("simulated_bubble", pipe["simulated_bubble"] * 100, bubble.group(4),
         1)
step = float(re.search(r"predicted step time: ([0-9.]+) ms", text).group(1))
near("simulated_step_seconds", pipe["simulated_step_seconds"] * 1e3, step, 3)
near("predicted_step_seconds", report["predicted_step_seconds"] * 1e3, step, 3)
busy_lines = re.findall(r"stage (\d+): compute busy ([0-9.]+) ms, idle "
                        r"([0-9.]+)%", text)
if len(busy_lines) != len(pipe["stage_busy_seconds"]):
    failures.append("%d busy lines, %d busy figures" % (
        len(busy_lines), len(pipe["stage_busy_seconds"])))
for (s, busy_ms, idle), busy in zip(busy_lines, pipe["stage_busy_seconds"]):
    near("stage %s busy" % s, busy * 1e3, busy_ms, 3)
    total = pipe["simulated_step_seconds"]
    near("stage %s idle" % s, 100 * max(0.0, total - busy) / total, idle, 1)

print("\n".join(failures) or "json matches the text: %d stages" %
      pipe["stages"])
sys.exit(1 if failures else 0)
