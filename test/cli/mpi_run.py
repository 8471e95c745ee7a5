"""`mpirun -np 3 taskgroup run PLAN`: nodes spread over the ranks; rank 0
alone prints progress, outputs and errors; every rank exits with the run's
status. Needs MPIRUN in the environment (set by tools/meson.build)."""
import os
import shutil
import subprocess
import time

from cli_support import Cli, OK, RUN_FAILED, USAGE

cli = Cli()
mpirun = os.environ.get("MPIRUN") or shutil.which("mpirun")
if not mpirun:
    print("SKIP: mpirun not found")
    raise SystemExit(77)


def launch(*args, np=3, timeout=90):
    cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "--timeout", "60", "-np", str(np), cli.exe, *args]
    env = dict(os.environ)
    env.pop("TERM", None)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


# The seed plan over three ranks: one outputs table, from rank 0.
p = launch("run", cli.shipped("seed.json"))
cli.check_exit(p, OK, "mpirun run seed.json")
cli.check(p.stdout.count("task      blob    value") == 1, "seed.json: one outputs table", p.stdout)
for line in ["local/s1  note    from s1 on local", "n1/s4     note    from s4 on n1", "n2/s5     s5_got  from s3 on n2"]:
    cli.check(line in p.stdout, f"seed.json: output line {line!r}", p.stdout)
cli.check(p.stderr.count("task n1/s4 finished (succeeded") == 1, "seed.json: progress from rank 0 only, "
          "remote tasks included", p.stderr)

# --json: one object on stdout, every task of every rank.
p = launch("run", "--json", "-q", cli.shipped("seed.json"))
cli.check_exit(p, OK, "mpirun run --json seed.json")
doc = cli.json_of(p.stdout, "mpirun --json")
if doc is not None:
    cli.check(sorted(doc) == ["local/s1", "local/s2", "n1/s4", "n2/s3", "n2/s5"], "--json: every task", sorted(doc))
    cli.check(doc.get("n2/s5") == {"s5_got": "from s3 on n2"}, "--json: a remote output decoded", doc.get("n2/s5"))
cli.check(p.stderr == "", "-q: nothing on stderr from any rank", p.stderr)

# A failing plan: one error line (rank 0's), non-zero exit, the sleeper
# on another rank cancelled at once.
start = time.monotonic()
p = launch("run", cli.shipped("fails.json"))
elapsed = time.monotonic() - start
cli.check(p.returncode != OK, "mpirun run fails.json: non-zero exit", p.returncode)
cli.check(p.stderr.count("checksum mismatch (this plan fails on purpose)") == 1, "fails.json: one error line",
          p.stderr)
cli.check('taskgroup: rank 0: task "worker/train" (node "worker"): train/check/net "check" op #1 (Fail)' in p.stderr,
          "fails.json: the error names rank, node, task, step path, net and op", p.stderr)
cli.check(p.stdout == "", "fails.json: no results on stdout", p.stdout)
cli.check(elapsed < 20, "fails.json: the failure cancels the sleeper on the other rank", f"{elapsed:.1f} s")

# Feeds over three ranks: rank 0's reach the node on rank 1 (every rank
# passes them; rank 0's are read). A feed error: exit 2, one message.
plan = cli.shipped("inputs.json")
p = launch("run", "--json", "-q", plan, "--input", "n1/x=4", "--input", "n2/scale=1.5", "--input", 'n2/label="four"')
cli.check_exit(p, OK, "mpirun run inputs.json --input ...")
doc = cli.json_of(p.stdout, "mpirun inputs.json")
cli.check(doc == {"n1/triple": {"y": 12}, "n2/double": {"z": 3.0}}, "--input: feeds reach every rank", doc)
p = launch("run", "-q", plan, "--input", 'n1/x="four"', "--input", "n2/scale=1")
cli.check(p.returncode == USAGE, "mpirun run with a bad feed: exit 2", (p.returncode, p.stderr))
cli.check(p.stderr.count('feed "n1/x": expected int64, got string') == 1, "bad feed: one message", p.stderr)

# A plan error is the same on every rank: exit 2, one message.
p = launch("run", cli.temp("missing.json"))
cli.check(p.returncode == USAGE, "mpirun run on a missing plan: exit 2", (p.returncode, p.stderr))
cli.check(p.stderr.count("cannot open plan file") == 1, "missing plan: one message", p.stderr)

# --mpi without a launcher: a job of one rank runs everything.
p = cli.run("run", "--mpi", "-q", cli.shipped("seed.json"))
cli.check_exit(p, OK, "run --mpi seed.json without mpirun")
cli.check("n2/s5     s5_got  from s3 on n2" in p.stdout, "--mpi alone: outputs", p.stdout)

# The MPI session's polling and grace from the command line.
p = launch("run", "-q", "--poll-max", "50", "--grace", "0.5", cli.shipped("seed.json"))
cli.check_exit(p, OK, "mpirun run --poll-max 50 --grace 0.5 seed.json")
cli.check("n2/s5     s5_got  from s3 on n2" in p.stdout, "--poll-max/--grace: outputs", p.stdout)
for bad in [["--poll-max", "0"], ["--poll-max", "x"], ["--grace", "0"], ["--grace", "-1"]]:
    p = cli.run("run", "--mpi", *bad, cli.shipped("seed.json"))
    cli.check_exit(p, USAGE, f"run --mpi {' '.join(bad)}")
    cli.check(bad[0] in p.stderr and p.stderr.startswith("taskgroup: "), f"{' '.join(bad)}: names the option",
              p.stderr)

# --trace under mpirun: a file per rank (FILE, then .rank<r> before the
# extension), one trace and one run span; rank 0's file holds its
# estimates of the other ranks' clocks (on one host each within half its
# round trip of the truth, 0); merge-traces makes them one file where each
# task is a span of the rank that ran it.
trace = cli.temp("mpi.trace.json")
p = launch("run", "-q", cli.shipped("seed.json"), "--trace", trace)
cli.check_exit(p, OK, "mpirun run --trace seed.json")
paths = [trace] + [trace.replace(".json", f".rank{r}.json") for r in (1, 2)]
files = []
for r, path in enumerate(paths):
    if not cli.check(os.path.exists(path), f"--trace: rank {r} wrote {os.path.basename(path)}"):
        continue
    with open(path, encoding="utf-8") as f:
        files.append(cli.json_of(f.read(), f"trace of rank {r}"))
if len(files) == 3 and all(files):
    other = [f["otherData"] for f in files]
    cli.check([o.get("rank") for o in other] == [0, 1, 2], "--trace: each file names its rank", other)
    cli.check(len({o["trace_id"] for o in other}) == 1 and len({o["run_span_id"] for o in other}) == 1,
              "--trace: one trace and one run span on every rank", other)
    clocks = {c["rank"]: c for c in other[0].get("rank_clocks", [])}
    cli.check(sorted(clocks) == [1, 2], "--trace: rank 0 estimated both ranks' clocks", other[0])
    for c in clocks.values():
        cli.check(c["round_trip_ns"] >= 0 and abs(c["offset_ns"]) <= c["round_trip_ns"] / 2 + 1000,
                  "--trace: one host's clock estimate is within half its round trip of 0", c)
    ran = {}  # task -> the rank that ran it
    for r, f in enumerate(files[1:], start=1):
        for e in f["traceEvents"]:
            if e.get("ph") == "X" and e["cat"] == "task":
                ran[e["name"]] = r
    p = cli.run("merge-traces", *paths)
    cli.check_exit(p, OK, "merge-traces of the three ranks' files")
    merged = cli.json_of(p.stdout, "merged trace")
    if merged:
        procs = {e["pid"]: e["args"]["name"] for e in merged["traceEvents"]
                 if e.get("ph") == "M" and e["name"] == "process_name"}
        tasks = [e for e in merged["traceEvents"] if e.get("ph") == "X" and e["cat"] == "task"]
        cli.check(sorted(e["name"] for e in tasks) == ["local/s1", "local/s2", "n1/s4", "n2/s3", "n2/s5"],
                  "merged: every task once", [e["name"] for e in tasks])
        for e in tasks:
            node, rank = e["args"]["node"], ran.get(e["name"], 0)
            cli.check(procs.get(e["pid"]) == f"{node} (rank {rank})", "merged: a task on its rank's node", e)
            cli.check(e["args"]["parent_span_id"] == other[0]["run_span_id"], "merged: under the run's span", e)
        cli.check(merged["otherData"]["trace_id"] == other[0]["trace_id"], "merged: the run's trace id")
    p = cli.run("merge-traces", paths[1], paths[2])
    cli.check_exit(p, USAGE, "merge-traces without rank 0's file")
    cli.check("no trace file of rank 0" in p.stderr, "merge-traces without rank 0: says so", p.stderr)
p = cli.run("merge-traces", cli.temp("no-such-trace.json"))
cli.check_exit(p, USAGE, "merge-traces of a missing file")
cli.check("cannot read trace file" in p.stderr, "merge-traces of a missing file: names it", p.stderr)

# Two ranks for the demo plan (one node: rank 1 only takes part).
p = launch("run", "-q", cli.shipped("pipeline.json"), np=2)
cli.check_exit(p, OK, "mpirun -np 2 run pipeline.json")
cli.check("local/consume  total" in p.stdout, "pipeline.json: the total is printed", p.stdout)

cli.done()
