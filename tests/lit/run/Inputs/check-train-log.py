"""Checks a `sharc-run --log` CSV against the same run's console output.

usage: check-train-log.py LOG.csv CONSOLE.txt TRAIN_ROWS VAL_ROWS

Every train row's loss, lr and grad_norm, printed as the console prints
them, is the console's step line of that step; every val row's val_loss is
the console's `eval step` line and val_ppl its exp to 6 digits. Prints "ok" or exits 1.
"""
import csv
import math
import re
import sys

log_path, console_path, want_train, want_val = sys.argv[1:5]
console = open(console_path).read()
steps = {int(m[1]): m.groups()[1:] for m in re.finditer(
    r"^step +(\d+)  loss (\S+)(?:  lr (\S+))?(?:  grad_norm (\S+))?  time",
    console, re.M)}
evals = [(int(m[1]), m[2]) for m in re.finditer(
    r"^eval step +(\d+)  val loss (\S+)", console, re.M)]
rows = list(csv.DictReader(open(log_path, newline="")))
train = [r for r in rows if r["kind"] == "train"]
val = [r for r in rows if r["kind"] == "val"]
problems = []
if len(train) != int(want_train) or len(val) != int(want_val):
    problems.append(f"{len(train)} train and {len(val)} val rows, expected "
                    f"{want_train} and {want_val}")
if sorted(steps) != [int(r["step"]) for r in train]:
    problems.append(f"train steps {[r['step'] for r in train]}, console "
                    f"{sorted(steps)}")
for r in train:
    loss, lr, grad_norm = steps.get(int(r["step"]), (None, None, None))
    logged = ("%.5f" % float(r["loss"]),
              "%.3e" % float(r["lr"]) if r["lr"] else None,
              "%.4g" % float(r["grad_norm"]) if r["grad_norm"] else None)
    if logged != (loss, lr, grad_norm):
        problems.append(f"step {r['step']}: log {logged}, console "
                        f"{(loss, lr, grad_norm)}")
    if not (float(r["tokens_per_s"]) > 0 and float(r["step_s"]) > 0 and
            float(r["elapsed_s"]) >= float(r["step_s"])):
        problems.append(f"step {r['step']}: timings {r}")
    if r["val_loss"] or r["val_ppl"]:
        problems.append(f"step {r['step']}: a train row with a val loss")
logged_evals = [(int(r["step"]), "%.5f" % float(r["val_loss"])) for r in val]
if logged_evals != evals:
    problems.append(f"evaluations: log {logged_evals}, console {evals}")
for r in val:
    if "%.6g" % math.exp(float(r["val_loss"])) != r["val_ppl"]:
        problems.append(f"val step {r['step']}: ppl {r['val_ppl']} is not "
                        f"exp({r['val_loss']})")
    if r["loss"] or r["lr"] or r["tokens_per_s"]:
        problems.append(f"val step {r['step']}: a val row with train numbers")
if problems:
    sys.exit("\n".join(problems))
print("ok")
