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

# Two ranks for the demo plan (one node: rank 1 only takes part).
p = launch("run", "-q", cli.shipped("pipeline.json"), np=2)
cli.check_exit(p, OK, "mpirun -np 2 run pipeline.json")
cli.check("local/consume  total" in p.stdout, "pipeline.json: the total is printed", p.stdout)

cli.done()
