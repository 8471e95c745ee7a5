"""`run --trace FILE`: Chrome trace-event JSON with a process per node, a
thread per task and complete events for tasks, steps, nets, report runs,
the waits before retries and offloaded ops (on the compute threads), with
the run's W3C trace and span ids."""
import collections
import re

from cli_support import Cli, OK, RUN_FAILED


def load(cli, plan, *extra, expect=OK):
    path = cli.temp(plan.split("/")[-1] + ".trace.json")
    p = cli.run("run", "-q", plan, "--trace", path, *extra)
    cli.check_exit(p, expect, f"run --trace {plan}")
    with open(path, encoding="utf-8") as f:
        return cli.json_of(f.read(), f"trace of {plan}")


def structure(cli, trace, what):
    """Checks the file's shape; returns (processes, threads, spans)."""
    cli.check(isinstance(trace, dict) and trace.get("displayTimeUnit") == "ms", f"{what}: displayTimeUnit ms")
    events = trace.get("traceEvents", [])
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e["name"] == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    for e in spans:
        ok = (e["cat"] in ("task", "step", "net", "report", "retry", "offload") and e["ts"] >= 0 and e["dur"] >= 0
              and (e["pid"], e["tid"]) in threads)
        if not cli.check(ok, f"{what}: well-formed span", e):
            break
    # Complete events on one thread must nest.
    by_thread = collections.defaultdict(list)
    for e in spans:
        by_thread[(e["pid"], e["tid"])].append(e)
    for key, evs in by_thread.items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        nested = True
        for e in evs:
            end = e["ts"] + e["dur"]
            while stack and stack[-1] <= e["ts"] + 1e-6:
                stack.pop()
            if stack and end > stack[-1] + 1e-6:
                nested = False
            stack.append(end)
        cli.check(nested, f"{what}: spans on thread {threads.get(key)} nest")
    return processes, threads, spans


cli = Cli()

# The seed: a process per node, a thread per task on its node's process.
trace = load(cli, cli.shipped("seed.json"))
processes, threads, spans = structure(cli, trace, "seed")
cli.check(sorted(processes.values()) == ["local", "n1", "n2"], "seed: one process per node", processes)
by_name = {v: k for k, v in processes.items()}
for task, node in [("local/s1", "local"), ("local/s2", "local"), ("n2/s3", "n2"), ("n1/s4", "n1"),
                   ("n2/s5", "n2")]:
    tids = [k for k, v in threads.items() if v == task]
    cli.check(len(tids) == 1 and tids[0][0] == by_name.get(node), f"seed: thread {task} in process {node}", tids)
    task_spans = [e for e in spans if e["cat"] == "task" and e["name"] == task]
    cli.check(len(task_spans) == 1 and (task_spans[0]["pid"], task_spans[0]["tid"]) == tids[0],
              f"seed: one task span for {task} on its thread", task_spans)
node_threads = [k for k, v in threads.items() if v == "node"]
cli.check(len(node_threads) == 3, "seed: a 'node' thread per node", node_threads)
init = [e for e in spans if e["cat"] == "net" and e["name"] == "make_mailbox"]
cli.check(len(init) == 2 and all(threads[(e["pid"], e["tid"])] == "node" for e in init),
          "seed: local init nets on the node threads of local and n2", init)
s1 = [e for e in spans if e["cat"] == "task" and e["name"] == "local/s1"]
cli.check(s1 and s1[0]["dur"] >= 90_000, "seed: s1 lasts its 100 ms sleep (dur in microseconds)", s1)

# The pipeline: steps with iterations, nets, report runs.
trace = load(cli, cli.shipped("pipeline.json"), "--threads", "2")
processes, threads, spans = structure(cli, trace, "pipeline")
cli.check(list(processes.values()) == ["local"], "pipeline: one process", processes)
count = collections.Counter((e["cat"], e["name"]) for e in spans)
cli.check(count[("task", "local/produce")] == 1 and count[("task", "local/consume")] == 1, "pipeline: task spans",
          count)
produce = [e for e in spans if e["cat"] == "step" and e["name"] == "produce"]
cli.check(len(produce) == 2 and all(e["args"].get("iterations") == 20 for e in produce),
          "pipeline: the produce step ran in 2 instances of 20 iterations", produce)
cli.check(all("iterations" in e["args"] for e in spans if e["cat"] == "step"), "pipeline: every step has iterations")
cli.check(count[("net", "produce_one")] == 40, "pipeline: 40 produce_one net runs", count[("net", "produce_one")])
cli.check(count[("net", "accumulate")] == 40, "pipeline: 40 accumulate net runs", count[("net", "accumulate")])
cli.check(count[("net", "take")] == 43, "pipeline: 40 items + 3 end-of-queue Dequeues", count[("net", "take")])
reports = [e for e in spans if e["cat"] == "report" and e["name"] == "progress"]
cli.check(len(reports) >= 2, "pipeline: the report step ran periodically and at the end", len(reports))
cli.check(all(threads[(e["pid"], e["tid"])] == "node" for e in reports), "pipeline: group reports on 'node'")
cli.check(count[("net", "show_progress")] == len(reports), "pipeline: a show_progress net per report run")
cli.check(any(e["cat"] == "step" and e["name"] == "local:init" for e in spans), "pipeline: the node's local init")

# A failure: failed spans carry the error.
trace = load(cli, cli.shipped("fails.json"), expect=RUN_FAILED)
processes, threads, spans = structure(cli, trace, "fails")
failed = [e for e in spans if "error" in e["args"]]
names = {(e["cat"], e["name"]) for e in failed}
for key in [("task", "worker/train"), ("step", "check"), ("step", "train"), ("net", "check"),
            ("task", "local/wait"), ("net", "wait")]:
    cli.check(key in names, f"fails: span {key} carries its error", names)

# Retries: each wait before a task's or a step's next attempt is a span of
# category "retry" on the task's thread, named after the attempt it leads
# to, carrying the error it follows.
trace = load(cli, cli.shipped("retry.json"))
processes, threads, spans = structure(cli, trace, "retry")
waits = sorted(e["name"] for e in spans if e["cat"] == "retry")
cli.check(waits == ["retry ask (attempt 2 of 2)", "retry local/fetch (attempt 2 of 3)",
                    "retry local/fetch (attempt 3 of 3)"], "retry: one span per wait", waits)
for e in spans:
    if e["cat"] == "retry":
        cli.check("fails" in e.get("args", {}).get("error", ""), "retry: a wait carries the error it follows", e)

# Offloaded ops: spans of category "offload" named after the op, on the
# threads of a "compute" process, each a child of its task's span.
trace = load(cli, cli.plan("hash.json"))
processes, threads, spans = structure(cli, trace, "hash")
by_name = {v: k for k, v in processes.items()}
cli.check(sorted(processes.values()) == ["compute", "local"], "hash: the node's process and compute's", processes)
offloaded = [e for e in spans if e["cat"] == "offload"]
task_span = {e["name"]: e for e in spans if e["cat"] == "task"}
cli.check(sorted(e["name"] for e in offloaded) == ["Hash", "Hash"], "hash: a span per offloaded op", offloaded)
for e in offloaded:
    parent = task_span.get(e["args"].get("task"), {})
    cli.check(e["pid"] == by_name.get("compute") and threads[(e["pid"], e["tid"])].startswith("compute thread ")
              and e["args"].get("task") == "local/hash"
              and e["args"].get("parent_span_id") == parent.get("args", {}).get("span_id")
              and parent["ts"] <= e["ts"] and e["ts"] + e["dur"] <= parent["ts"] + parent["dur"] + 1e-3,
              "hash: an offloaded op on a compute thread, inside and under its task's span", e)

# W3C trace context: the file names the run's trace (the one given with
# --trace-parent) and the run's own span; every span has an id of its own,
# a task's parent is the run's span, the other spans' their task's (the
# node's own work: the run's span).
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
for plan, extra in [("seed.json", ["--trace-parent", f"00-{TRACE_ID}-00f067aa0ba902b7-01"]),
                    ("pipeline.json", ["--threads", "2"])]:
    trace = load(cli, cli.shipped(plan), *extra)
    processes, threads, spans = structure(cli, trace, f"ids {plan}")
    other = trace.get("otherData", {})
    hex_id = re.compile("[0-9a-f]{16}")
    trace_id = other.get("trace_id", "")
    cli.check(re.fullmatch("[0-9a-f]{32}", trace_id) and trace_id != "0" * 32, f"ids {plan}: a trace id", other)
    if extra[0] == "--trace-parent":
        cli.check(trace_id == TRACE_ID, f"ids {plan}: the trace given", other)
    run_span = other.get("run_span_id", "")
    cli.check(hex_id.fullmatch(run_span) and run_span not in ("0" * 16, "00f067aa0ba902b7"),
              f"ids {plan}: the run's span, its own", other)
    ids = [e["args"].get("span_id", "") for e in spans]
    cli.check(all(hex_id.fullmatch(i) for i in ids) and len(set(ids + [run_span])) == len(ids) + 1,
              f"ids {plan}: every span has an id of its own", ids)
    task_span = {e["name"]: e["args"]["span_id"] for e in spans if e["cat"] == "task"}
    for e in spans:
        task = e["args"].get("task", "")
        want = run_span if e["cat"] == "task" or not task else task_span.get(task)
        if not cli.check(e["args"].get("parent_span_id") == want, f"ids {plan}: the parent of a span", e):
            break

cli.done()
