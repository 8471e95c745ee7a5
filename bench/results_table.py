#!/usr/bin/env python3
"""Turns the JSON of several taskgroup_bench processes into the rows of
bench/README.md's "Current results" table: per workload, ours and each
baseline as a range over the processes (each process's median), the ratio
ours / baseline of every process, and in how many processes each target
held.

    results_table.py --commit abc1234 --machine A run1.json run2.json run3.json
"""
import argparse
import json
import sys


def fmt(x):
    if x >= 1000:
        return f"{x:,.0f}"
    if x >= 100:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def span(values):
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}-{fmt(hi)}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", required=True)
    ap.add_argument("--machine", required=True)
    ap.add_argument("runs", nargs="+", help="JSON files written by taskgroup_bench --json, one per process")
    a = ap.parse_args()
    runs = [json.load(open(p)) for p in a.runs]
    order = [w["id"] for w in runs[0]["workloads"]]
    by_id = {wid: [next(w for w in r["workloads"] if w["id"] == wid) for r in runs if any(
        w["id"] == wid for w in r["workloads"])] for wid in order}
    print("| workload | ours | baselines | ours / baseline, per process | target: held in | commit | machine |")
    print("|---|---|---|---|---|---|---|")
    for wid, ws in by_id.items():
        unit = ws[0]["unit"]
        # A contender left out of every process (--benchmark_filter) has
        # no figure: not listed.
        names = [c["name"] for c in ws[0]["contenders"]
                 if all(next(x for x in w["contenders"] if x["name"] == c["name"]).get("median") is not None
                        for w in ws)]
        med = {n: [next(c["median"] for c in w["contenders"] if c["name"] == n) for w in ws] for n in names}
        ours = f"{span(med['ours'])} {unit}" if "ours" in med else ""
        bases = "; ".join(f"{n} {span(med[n])}" for n in names if n != "ours")
        ratios = "; ".join(
            f"{n}: " + ", ".join(f"{next(c['ratio_ours_over_this'] for c in w['contenders'] if c['name'] == n):.3f}"
                                 for w in ws)
            for n in names if n != "ours" and all(
                "ratio_ours_over_this" in next(c for c in w["contenders"] if c["name"] == n) for w in ws))
        targets = []
        for i, t in enumerate(ws[0].get("targets", [])):
            held = sum(1 for w in ws if w["targets"][i]["holds"])
            targets.append(f"{t['text']}: {'**yes**' if held == len(ws) else '**NO**'}, {held} of {len(ws)}")
        print(f"| `{wid}` | {ours} | {bases} | {ratios} | {'; '.join(targets) or 'none'} | `{a.commit}` | {a.machine} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
