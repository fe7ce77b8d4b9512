"""Compares the planned peak per rank of two `sharc bench` CSVs, mode by
mode: prints "MODE: recompute below kept" when the first's is lower, else
"MODE: FIRST >= SECOND" (tests/lit/run/bench-recompute.yaml)."""
import csv
import sys


def peaks(path):
    with open(path, newline="") as f:
        return {row["mode"]: float(row["planned_peak_mib"]) for row in csv.DictReader(f)}


full, kept = peaks(sys.argv[1]), peaks(sys.argv[2])
for mode in kept:
    if full[mode] < kept[mode]:
        print(f"{mode}: recompute below kept")
    else:
        print(f"{mode}: {full[mode]} >= {kept[mode]}")
