"""`run --metrics FILE`: the session's metrics at the end of the run, in
Prometheus' text format or, for a FILE ending in .json, as JSON; counted
as the run's --json report says; an unwritable FILE is a usage error
before anything runs."""
import json
import re

from cli_support import Cli, OK, RUN_FAILED, USAGE

SAMPLE = re.compile(r'^(taskgroup_[a-z_]+)(?:\{([^}]*)\})? (\S+)$')
LABEL = re.compile(r'([a-z_]+)="((?:[^"\\]|\\.)*)"')


def parse(cli, text, what):
    """{(name, frozenset(labels)): value} of a text exposition; checks that
    each sample follows a # TYPE of its metric."""
    samples = {}
    typed = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if line.startswith("# HELP ") or not line:
            continue
        m = SAMPLE.match(line)
        if not cli.check(m is not None, f"{what}: a sample line", line):
            continue
        name, labels, value = m.groups()
        family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in typed else name
        cli.check(family in typed, f"{what}: {name} has a # TYPE", line)
        samples[(name, frozenset(LABEL.findall(labels or "")))] = float(value)
    return samples


def plan_name(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("name", "")


def run_with_metrics(cli, plan, file_name, *extra, expect=OK):
    path = cli.temp(file_name)
    p = cli.run("run", "-q", "--json", plan, "--metrics", path, *extra)
    cli.check_exit(p, expect, f"run --metrics {plan}")
    with open(path, encoding="utf-8") as f:
        return f.read(), cli.json_of(p.stdout, f"--json of {plan}") if p.stdout.strip() else None


cli = Cli()

# Prometheus text: a run that retries; its tasks and retries as counted.
plan = cli.shipped("retry.json")
group = plan_name(plan)
text, _ = run_with_metrics(cli, plan, "retry.prom")
samples = parse(cli, text, "retry")
runs = {o: samples.get(("taskgroup_runs_total", frozenset({("group", group), ("outcome", o)}))) for o in
        ("succeeded", "failed", "cancelled", "timed_out", "overloaded")}
cli.check(runs == {"succeeded": 1, "failed": 0, "cancelled": 0, "timed_out": 0, "overloaded": 0},
          "retry: one run, succeeded", runs)
retried = samples.get(("taskgroup_attempts_retried_total", frozenset({("group", group)})))
cli.check(retried == 3, "retry: the task's two retries and the step's one", retried)
count = samples.get(("taskgroup_run_latency_seconds_count", frozenset({("group", group)})))
inf = samples.get(("taskgroup_run_latency_seconds_bucket", frozenset({("group", group), ("le", "+Inf")})))
cli.check(count == 1 and inf == 1, "retry: the run's latency counted once", (count, inf))
cli.check(samples.get(("taskgroup_runs_in_flight", frozenset())) == 0, "retry: nothing in flight at the end")

# JSON: a failing run; tasks by outcome as the --json report has them.
plan = cli.shipped("fails.json")
text, report = run_with_metrics(cli, plan, "fails.json", expect=RUN_FAILED)
doc = cli.json_of(text, "fails: the metrics' JSON")
groups = {g["group"]: g for g in doc.get("groups", [])}
g = groups.get(plan_name(plan))
if cli.check(g is not None, "fails: the group's label", list(groups)):
    cli.check(g["runs"] == {"succeeded": 0, "failed": 1, "cancelled": 0, "timed_out": 0, "overloaded": 0},
              "fails: one run, failed", g["runs"])
    tasks = sum(g["tasks"].values())
    cli.check(tasks >= 2 and g["tasks"]["failed"] >= 1, "fails: its tasks counted, one failed", g["tasks"])
    began = g["task_duration"]["count"]
    cli.check(g["tasks"]["failed"] <= began <= tasks - g["tasks"]["not_run"],
              "fails: a duration per task that began", g["task_duration"])
    cli.check(len(g["run_latency"]["buckets"]) == 28 and g["run_latency"]["buckets"][-1]["le_seconds"] == "+Inf",
              "fails: 28 buckets, the last +Inf", g["run_latency"]["buckets"][-1:])

# Offloaded ops: counted with their waits.
plan = cli.shipped("offload.json")
text, _ = run_with_metrics(cli, plan, "offload.prom", "--threads", "2")
samples = parse(cli, text, "offload")
label = frozenset({("group", plan_name(plan))})
ops = samples.get(("taskgroup_offloaded_ops_total", label), 0)
waits = samples.get(("taskgroup_offload_wait_seconds_count", label))
cli.check(ops >= 1 and waits == ops, "offload: offloaded ops counted with their waits", (ops, waits))

# An unwritable file: a usage error, and nothing runs.
p = cli.run("run", "-q", cli.shipped("seed.json"), "--metrics", cli.temp("no/such/dir/m.prom"))
cli.check_exit(p, USAGE, "run --metrics into a missing folder")
cli.check("cannot write metrics file" in p.stderr, "the error names the metrics file", p.stderr)

cli.done()
