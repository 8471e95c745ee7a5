"""The HTTP example's GET /metrics, read by a real Prometheus parser.

Run by Meson as `python3 http_metrics.py <06_http_server binary>`, with a
python3 that has Debian's python3-prometheus-client (scripts/setup.sh
installs it). Starts the server with `--max-in-flight 1 --max-queued 0`
on 127.0.0.1 (port 0), sends a known mix drawn from a seed (printed):
good /sum requests, bad ones (400: no run), runs that time out (504),
/health runs, and requests shed (503) while a slow run holds the one
place in flight; then scrapes /metrics, parses it with
`prometheus_client.parser.text_string_to_metric_families` and checks that
- the counters by group and outcome match what was sent (runs, and tasks:
  16 per /sum run, 1 per /health run);
- every histogram is well formed: buckets in ascending `le` ending at
  `+Inf`, cumulative counts never decreasing, the `+Inf` bucket equal to
  `_count`, a `_sum` that is not negative, and as many runs in the latency
  histogram as runs were admitted;
- the gauges are 0 once everything answered, and the Content-Type is the
  text format's;
- a request's `traceparent` puts its run in that trace (`traceresponse`
  names the same trace id and the run's own span); a malformed one is
  ignored, the run starting a trace of its own;
- GET /debug/runs (the server runs with `--debug-endpoints`) shows the
  slow run in flight: its trace id, group, phase and the Sleep each of its
  tasks waits on;
- with `--trace-every 2` one run in two wrote trace-<trace id>.json in the
  server's working directory, named by the trace it records; a server
  whose working directory takes no file (/proc) answers its sampled run
  all the same and says on stderr which file it could not write.
Exits 0 when every check passed, 1 otherwise.
"""
import asyncio
import json
import math
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile

from prometheus_client.parser import text_string_to_metric_families

from http_server import read_response  # the HTTP example's other test: one response reader

GUARD = 60.0  # seconds: any single response taking longer is a hang
TASKS = 16    # the /sum group's tasks

failures = 0
checks = 0


def check(cond, what, detail=None):
    global failures, checks
    checks += 1
    if not cond:
        failures += 1
        print(f"FAIL: {what}")
        if detail is not None:
            print(f"      {detail}")
    return cond


async def get(port, target, headers=""):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}\r\n".encode())
        return await asyncio.wait_for(read_response(reader), GUARD)
    finally:
        writer.close()


async def wait_in_flight(port, want):
    for _ in range(2000):
        _, _, body = await get(port, "/stats")
        if json.loads(body)["in_flight"] == want:
            return True
        await asyncio.sleep(0.01)
    return False


async def traffic(port, rng):
    """Sends the mix; returns what the metrics should count."""
    sent = {"good": 0, "bad": 0, "timed_out": 0, "shed": 0, "health": 0}
    kinds = ["good"] * rng.randint(3, 12) + ["bad"] * rng.randint(1, 5) + ["timed_out"] * rng.randint(1, 3) + \
        ["health"] * rng.randint(1, 4)
    rng.shuffle(kinds)
    for kind in kinds:
        if kind == "good":
            status, _, body = await get(port, f"/sum?n={rng.randint(0, 1000)}")
            check(status == 200, "a good request: 200", body)
        elif kind == "bad":
            status, _, body = await get(port, rng.choice(["/sum?n=-1", "/sum?bogus=1", "/sum"]))
            check(status == 400, "a bad request: 400", body)
        elif kind == "timed_out":
            status, _, body = await get(port, "/sum?n=1&sleep_ms=5000&timeout_ms=20")
            check(status == 504, "a slow request past its deadline: 504", body)
        else:
            status, _, body = await get(port, "/health")
            check(status == 200, "/health: 200", body)
        sent[kind] += 1
    # Shed: one slow run holds the only place; every /sum meanwhile is shed.
    trace_id = "%032x" % rng.randrange(1, 1 << 128)
    slow = asyncio.ensure_future(get(port, "/sum?n=2&sleep_ms=1500&timeout_ms=60000",
                                     f"traceparent: 00-{trace_id}-00f067aa0ba902b7-01\r\n"))
    check(await wait_in_flight(port, 1), "the slow run is in flight")
    await live_view(port, trace_id)
    for _ in range(rng.randint(1, 6)):
        status, headers, body = await get(port, "/sum?n=3")
        check(status == 503 and headers.get("retry-after") == "1", "a request past the limits: 503", body)
        sent["shed"] += 1
    status, _, body = await asyncio.wait_for(slow, GUARD)
    check(status == 200, "the slow run: 200", body)
    sent["good"] += 1
    check(await wait_in_flight(port, 0), "nothing in flight at the end")
    return sent


async def live_view(port, trace_id):
    """GET /debug/runs (--debug-endpoints) while the slow run sleeps: that
    run, in its trace, with the Sleep each of its 16 tasks waits on."""
    sleeping = []
    for _ in range(200):
        status, headers, body = await get(port, "/debug/runs")
        if not check(status == 200 and headers.get("content-type") == "application/json", "/debug/runs: 200 JSON",
                     f"{status} {body[:200]}"):
            return
        view = json.loads(body)
        runs = view.get("runs", [])
        sleeping = runs[0]["waiting"] if len(runs) == 1 else []
        if len(sleeping) == TASKS:
            break
        await asyncio.sleep(0.01)
    check(view.get("closed") is False and len(runs) == 1, "/debug/runs: the one run in flight", view)
    if not runs:
        return
    run = runs[0]
    check(run.get("trace_id") == trace_id and run.get("group") == "sum" and run.get("phase") == "running" and
          run.get("priority") == 0 and isinstance(run.get("age_us"), int) and run["age_us"] >= 0,
          "/debug/runs: the run's trace id, group, phase, priority and age", run)
    want = {f'task "n{k % 4}/t{k}" (node "n{k % 4}"): ' for k in range(TASKS)}
    check(len(sleeping) == TASKS and {line.split("work/")[0] for line in sleeping} == want and
          all('work/net "work" op #0 (Sleep): input #0 "sleep_ms": sleeping for ' in line for line in sleeping),
          "/debug/runs: each task names the Sleep it waits on", sleeping)


def samples_of(families):
    """{(sample name, frozenset of labels): value}, and the families by name."""
    out = {}
    by_name = {}
    for f in families:
        by_name[f.name] = f
        for s in f.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out, by_name


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())))


def check_histogram(family, what):
    """Every series of `family` well formed; returns {group: count}."""
    series = {}
    for s in family.samples:
        group = s.labels.get("group")
        entry = series.setdefault(group, {"buckets": [], "sum": None, "count": None})
        if s.name.endswith("_bucket"):
            le = s.labels["le"]
            entry["buckets"].append((math.inf if le == "+Inf" else float(le), s.value))
        elif s.name.endswith("_sum"):
            entry["sum"] = s.value
        elif s.name.endswith("_count"):
            entry["count"] = s.value
    counts = {}
    for group, e in series.items():
        les = [le for le, _ in e["buckets"]]
        values = [v for _, v in e["buckets"]]
        where = f"{what}{{group={group!r}}}"
        check(len(les) == 28, f"{where}: 28 buckets", les)
        check(les == sorted(les) and len(set(les)) == len(les), f"{where}: le ascending", les)
        check(les and les[-1] == math.inf, f"{where}: the last bucket is +Inf", les)
        check(all(a <= b for a, b in zip(values, values[1:])), f"{where}: cumulative counts", values)
        check(e["count"] is not None and values and values[-1] == e["count"], f"{where}: +Inf bucket == _count",
              (values[-1:] or None, e["count"]))
        check(e["sum"] is not None and e["sum"] >= 0, f"{where}: _sum not negative", e["sum"])
        counts[group] = e["count"]
    return counts


async def trace_context(port, rng):
    """A well-formed traceparent puts the run in the caller's trace; a
    malformed one is ignored. Either way traceresponse names the run's span."""
    trace_id = "%032x" % rng.randrange(1, 1 << 128)
    parent = "%016x" % rng.randrange(1, 1 << 64)
    status, headers, body = await get(port, "/sum?n=4", f"traceparent: 00-{trace_id}-{parent}-01\r\n")
    response = headers.get("traceresponse", "")
    fields = response.split("-")
    check(status == 200 and len(fields) == 4 and fields[0] == "00" and fields[1] == trace_id and
          len(fields[2]) == 16 and fields[2] != parent and fields[3] == "01",
          "traceparent: the answer's traceresponse names the same trace and the run's own span",
          f"{status} {response}")
    status, headers, body = await get(port, "/sum?n=4", "traceparent: 00-zz-not-a-trace\r\n")
    fields = headers.get("traceresponse", "").split("-")
    check(status == 200 and len(fields) == 4 and len(fields[1]) == 32 and fields[1] != "0" * 32,
          "a malformed traceparent is ignored: a fresh trace", f"{status} {headers}")
    return 2  # good /sum runs


async def scenario(port, rng):
    sent = await traffic(port, rng)
    sent["good"] += await trace_context(port, rng)
    status, headers, text = await get(port, "/metrics")
    check(status == 200, "/metrics: 200", text[:200])
    check(headers.get("content-type", "").startswith("text/plain; version=0.0.4"),
          "/metrics: the text format's Content-Type", headers.get("content-type"))
    samples, families = samples_of(text_string_to_metric_families(text))
    runs = "taskgroup_runs_total"
    admitted_sum = sent["good"] + sent["timed_out"]
    want = {("sum", "succeeded"): sent["good"], ("sum", "timed_out"): sent["timed_out"],
            ("sum", "overloaded"): sent["shed"], ("sum", "failed"): 0, ("sum", "cancelled"): 0,
            ("health", "succeeded"): sent["health"], ("health", "failed"): 0}
    for (group, outcome), n in want.items():
        got = value(samples, runs, group=group, outcome=outcome)
        check(got == n, f"runs_total{{group={group},outcome={outcome}}} == {n}", got)
    tasks = "taskgroup_tasks_total"
    check(value(samples, tasks, group="sum", outcome="succeeded") == TASKS * sent["good"],
          "tasks_total: every task of a good run succeeded", value(samples, tasks, group="sum", outcome="succeeded"))
    check(value(samples, tasks, group="sum", outcome="not_run") == TASKS * sent["shed"],
          "tasks_total: a shed run's tasks never ran", value(samples, tasks, group="sum", outcome="not_run"))
    check(value(samples, tasks, group="sum", outcome="cancelled") == TASKS * sent["timed_out"],
          "tasks_total: a timed-out run's tasks are cancelled", value(samples, tasks, group="sum", outcome="cancelled"))
    check(value(samples, tasks, group="health", outcome="succeeded") == sent["health"], "tasks_total: /health's")
    check(value(samples, "taskgroup_runs_in_flight") == 0, "runs_in_flight is 0 at the end")
    check(value(samples, "taskgroup_runs_queued") == 0, "runs_queued is 0 at the end")
    for name in ("run_latency_seconds", "queue_wait_seconds", "task_duration_seconds", "offload_wait_seconds"):
        family = families.get("taskgroup_" + name)
        if not check(family is not None and family.type == "histogram", f"{name}: a histogram"):
            continue
        counts = check_histogram(family, name)
        if name == "run_latency_seconds":
            check(counts.get("sum") == admitted_sum, f"run latency counts the admitted /sum runs ({admitted_sum})",
                  counts)
            check(counts.get("health") == sent["health"], "run latency counts the /health runs", counts)
    print(f"sent {sent}")
    return sent


def trace_files(folder, sent):
    """--trace-every 2: one /sum run in two (those that reached a run: good,
    timed out, shed) wrote trace-<trace id>.json, named by its trace."""
    runs = sent["good"] + sent["timed_out"] + sent["shed"]
    files = sorted(pathlib.Path(folder).glob("trace-*.json"))
    check(len(files) == (runs + 1) // 2, f"--trace-every 2: {(runs + 1) // 2} trace files for {runs} runs",
          [f.name for f in files])
    full = 0
    for f in files:
        trace = json.loads(f.read_text())
        other = trace.get("otherData", {})
        check(f.name == f"trace-{other.get('trace_id')}.json", "a trace file is named by its run's trace id",
              (f.name, other))
        spans = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
        tasks = [e for e in spans if e["cat"] == "task"]
        if len(tasks) == TASKS:
            full += 1
            check(all(e["args"]["parent_span_id"] == other.get("run_span_id") for e in tasks),
                  "a task span's parent is the run's span", tasks[:1])
    check(full >= 1, "a sampled run that ran has its 16 task spans", full)


def unwritable(binary):
    """--trace-every 1 in a folder that takes no file: the run is answered,
    the file's failure is said on stderr, the server exits cleanly."""
    server = subprocess.Popen([binary, "--port", "0", "--threads", "2", "--trace-every", "1"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/proc")
    try:
        first = server.stdout.readline()
        if check(first.startswith("listening on 127.0.0.1:"), "unwritable: the server prints its address", first):
            status, _, body = asyncio.run(asyncio.wait_for(get(int(first.rsplit(":", 1)[1]), "/sum?n=3"), GUARD))
            check(status == 200, "unwritable: the sampled run is answered", body)
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=GUARD)
        check(server.returncode == 0, "unwritable: SIGTERM: exit status 0", server.returncode)
        check("06_http_server: cannot write trace-" in err, "unwritable: the trace file's failure is on stderr", err)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def run():
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} HTTP_SERVER_BINARY")
    seed = random.randrange(1 << 32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    folder = tempfile.mkdtemp(prefix="http-traces-")
    server = subprocess.Popen([os.path.abspath(sys.argv[1]), "--port", "0", "--threads", "2", "--max-in-flight", "1",
                               "--max-queued", "0", "--debug-endpoints", "--trace-every", "2"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=folder)
    sent = None
    try:
        first = server.stdout.readline()
        if check(first.startswith("listening on 127.0.0.1:"), "the server prints its address", first):
            port = int(first.rsplit(":", 1)[1])
            try:
                sent = asyncio.run(scenario(port, rng))
            except (OSError, RuntimeError, asyncio.TimeoutError, ValueError) as e:
                check(False, "the client ran to its end", repr(e))
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=GUARD)
        check(server.returncode == 0, "SIGTERM: exit status 0", server.returncode)
        if sent is not None:
            trace_files(folder, sent)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        shutil.rmtree(folder, ignore_errors=True)
    unwritable(os.path.abspath(sys.argv[1]))
    print(f"{checks} checks, {failures} failed (seed {seed})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(run())
