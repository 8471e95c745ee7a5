"""Exit statuses: 0 ok, 1 run failed, 2 usage or plan error, 3 timeout, 4 results not written."""
import re
import os
import subprocess
import time

from cli_support import Cli, OK, RUN_FAILED, USAGE, TIMEOUT

cli = Cli()

for name in ["seed.json", "pipeline.json", "retry.json"]:
    p = cli.run("run", "-q", cli.shipped(name))
    cli.check_exit(p, OK, f"run {name}")
    cli.check(p.stderr == "", f"run -q {name}: nothing on stderr", repr(p.stderr))

# A failing plan: exit 1, one error line naming node, task, step path, net and op.
start = time.monotonic()
p = cli.run("run", cli.shipped("fails.json"))
elapsed = time.monotonic() - start
cli.check_exit(p, RUN_FAILED, "run fails.json")
expected = ('taskgroup: task "worker/train" (node "worker"): train/check/net "check" op #1 (Fail): '
            'checksum mismatch (this plan fails on purpose)\n')
cli.check(p.stderr.endswith(expected), "fails.json: the error names node, task, step path, net and op", repr(p.stderr))
cli.check(p.stdout == "", "fails.json: no results on stdout", repr(p.stdout))
cli.check(elapsed < 8, "fails.json: the failure cancels the 10 s sleeper at once", f"{elapsed:.1f} s")

# Gather: every task runs; the run still exits 1 and prints every failure.
p = cli.run("run", "--policy", "gather", "-q", cli.plan("gather.json"))
cli.check_exit(p, RUN_FAILED, "run --policy gather with a failing task")
cli.check("local/good  answer  42" in p.stdout, "gather: the good task's output is printed", p.stdout)
cli.check("n1/bad" in p.stdout and "(failed)" in p.stdout, "gather: the failed task is listed", p.stdout)
cli.check('taskgroup: task "n1/bad" (node "n1"): bad/net "bad" op #0 (Fail): bad on purpose' in p.stderr,
          "gather: the failure is on stderr", p.stderr)

# MPI-only options on a local run: a usage error saying so.
for opt in [["--poll-max", "100"], ["--grace", "2"]]:
    p = cli.run("run", *opt, cli.shipped("seed.json"))
    cli.check_exit(p, USAGE, f"run {' '.join(opt)} without MPI")
    cli.check("taskgroup: --poll-max and --grace apply to MPI runs only (under mpirun, or with --mpi)" in p.stderr,
              f"{opt[0]} without MPI: message", p.stderr)

# Plan errors.
p = cli.run("run", cli.temp("both.json", '{"taskgroup_plan": 1, "tasks": [{"step": {"nets": [], "substeps": []}}]}'))
cli.check_exit(p, USAGE, "run on an invalid plan")
cli.check('/tasks/0/step: both "nets" and "substeps"' in p.stderr, "invalid plan: JSON pointer in the error", p.stderr)
p = cli.run("run", cli.temp("missing.json"))
cli.check_exit(p, USAGE, "run on a missing file")
cli.check("cannot open plan file" in p.stderr and p.stderr.startswith("taskgroup: "), "missing file: message",
          p.stderr)
for sub in ["check", "graph", "fmt"]:
    p = cli.run(sub, cli.temp("both.json"))
    cli.check_exit(p, USAGE, f"{sub} on an invalid plan")
# A directory is not read; a file of no known size is not read past the
# limit (taskgroup::max_plan_size).
for sub in ["run", "check", "graph", "fmt"]:
    p = cli.run(sub, cli.tmp.name)
    cli.check_exit(p, USAGE, f"{sub} on a directory")
    cli.check(p.stderr == f'taskgroup: cannot read plan file "{cli.tmp.name}": it is a directory\n',
              f"{sub} on a directory: says so", p.stderr)
p = cli.run("check", "/dev/zero")
cli.check_exit(p, USAGE, "check /dev/zero")
cli.check(p.stderr == 'taskgroup: plan file "/dev/zero" holds more than 268435456 bytes '
          '(taskgroup::max_plan_size, 256 MiB)\n', "check /dev/zero: refused at the limit", p.stderr)

# Usage errors.
for args in [[], ["frobnicate"], ["run"], ["run", cli.shipped("seed.json"), "--policy", "sometimes"],
             ["run", cli.shipped("seed.json"), "--threads", "0"], ["run", cli.shipped("seed.json"), "--timeout", "-1"],
             ["run", cli.shipped("seed.json"), "--no-such-option"], ["check"]]:
    p = cli.run(*args)
    cli.check_exit(p, USAGE, f"usage error {args}")
    cli.check(p.stderr.startswith("taskgroup: ") and p.stdout == "", f"usage error {args}: message on stderr",
              (p.stdout, p.stderr))
# No command at all, or only an option that is not --help: says so, with the commands.
for args in [[], ["--json"]]:
    p = cli.run(*args)
    cli.check(p.stderr == "taskgroup: no command given; expected one of: run, check, graph, fmt, ops, merge-traces "
              "(taskgroup --help describes them)\n", f"{args}: no command, the commands named", p.stderr)
# A word that names no command says so, with the commands.
p = cli.run("bogus", cli.shipped("seed.json"))
cli.check_exit(p, USAGE, "an unknown command")
cli.check(p.stderr == 'taskgroup: unknown command "bogus"; expected one of: run, check, graph, fmt, ops, merge-traces\n',
          "an unknown command: named, with the commands", p.stderr)

# Numeric options: text, nan, infinities and numbers out of range are usage
# errors saying what the option takes.
SECONDS = "expected a number of seconds greater than 0"
THREADS = "expected a whole number from 1 to 1024"
POLL = "expected a whole number of microseconds from 1 to 10000000"
for opt, value, expected in [
        ("--timeout", "nan", SECONDS), ("--timeout", "inf", SECONDS), ("--timeout", "-inf", SECONDS),
        ("--timeout", "0", SECONDS), ("--timeout", "-1", SECONDS), ("--timeout", "abc", SECONDS),
        ("--timeout", "1e999", SECONDS), ("--timeout", "", SECONDS),
        ("--grace", "nan", SECONDS), ("--grace", "infinity", SECONDS), ("--grace", "0", SECONDS),
        ("--threads", "0", THREADS), ("--threads", "1025", THREADS), ("--threads", "1.5", THREADS),
        ("--threads", "nan", THREADS), ("--threads", "-1", THREADS), ("--threads", "two", THREADS),
        ("--poll-max", "0", POLL), ("--poll-max", "1e8", POLL), ("--poll-max", "nan", POLL),
        ("--poll-max", "2.5", POLL)]:
    p = cli.run("run", cli.shipped("seed.json"), opt, value)
    cli.check_exit(p, USAGE, f"run {opt} {value!r}")
    cli.check(f'taskgroup: {opt}: {expected}, got "{value}"\n' in p.stderr and p.stdout == "",
              f"run {opt} {value!r}: says what the option takes", p.stderr)
# A malformed --trace-parent is a usage error saying what is wrong, before
# anything runs.
for value, expected in [
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
         "must be 55 characters (00-<32 hex>-<16 hex>-<2 hex>), got 52"),
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", "has an all-zero trace id, which is invalid"),
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
         "has a character that is not lowercase hex in its trace id at offset 4")]:
    p = cli.run("run", cli.shipped("seed.json"), "--trace-parent", value)
    cli.check_exit(p, USAGE, f"run --trace-parent {value!r}")
    cli.check(p.stderr == f"taskgroup: --trace-parent {expected}\n" and p.stdout == "",
              f"run --trace-parent {value!r}: says what is wrong", p.stderr)
# Within the range: whole numbers may have an exponent; a timeout longer
# than 10^9 s waits 10^9 s.
for opt, value in [("--threads", "2"), ("--threads", "1e1"), ("--timeout", "1e300"), ("--timeout", "+30")]:
    p = cli.run("run", "-q", cli.shipped("seed.json"), opt, value)
    cli.check_exit(p, OK, f"run {opt} {value}")

p = cli.run("--help")
cli.check_exit(p, OK, "--help")
cli.check("run" in p.stdout and "check" in p.stdout and "graph" in p.stdout, "--help lists the subcommands", p.stdout)
cli.check("fmt" in p.stdout and "ops" in p.stdout and "merge-traces" in p.stdout, "--help lists fmt, ops and merge-traces",
          p.stdout)
p = cli.run("run", "--help")
cli.check_exit(p, OK, "run --help")
for opt in ["--threads", "--policy", "--timeout", "--trace", "--json", "--quiet"]:
    cli.check(opt in p.stdout, f"run --help shows {opt}", p.stdout)

# An unwritable trace file is a usage error, found before the run.
p = cli.run("run", cli.shipped("seed.json"), "--trace", os.path.join(cli.tmp.name, "no", "such", "dir", "t.json"))
cli.check_exit(p, USAGE, "run --trace into a missing directory")
cli.check("cannot write trace file" in p.stderr, "unwritable trace: message", p.stderr)

# Results that cannot be written (stdout on a full device): exit 4, with a
# message; a failed run keeps its status 1.
if os.path.exists("/dev/full"):
    for args, code in [(["check", cli.shipped("seed.json")], 4), (["fmt", cli.shipped("seed.json")], 4),
                       (["graph", cli.shipped("seed.json")], 4), (["ops"], 4), (["ops", "--json"], 4),
                       (["run", "-q", cli.shipped("seed.json")], 4),
                       (["run", "--json", cli.shipped("seed.json")], 4),
                       (["run", "-q", "--json", cli.shipped("fails.json")], 1)]:
        with open("/dev/full", "w") as full:
            p = subprocess.run([cli.exe] + args, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
        cli.check(p.returncode == code, f"{args} > /dev/full: exit {code}", (p.returncode, p.stderr))
        cli.check("taskgroup: cannot write the results to standard output: No space left on device\n" in p.stderr,
                  f"{args} > /dev/full: says so", p.stderr)

# A task's own step deadline is a failed task (exit 1), not the run's
# timeout (3), and its error says where the step was waiting.
p = cli.run("run", "-q", cli.plan("step_timeout.json"))
cli.check_exit(p, RUN_FAILED, "a step's own timeout")
cli.check(p.stderr == 'taskgroup: task "local/c" (node "local"): outer/inner: timed out after 300 ms; waiting then in '
          'outer/inner/net "take" op #0 (Dequeue): input #0 "q": cancelled while waiting for an item: the queue is '
          'empty (0 of 2, open); no producer left: no task of this node that has not ended can enqueue or close\n',
          "a step's own timeout: where it waited", p.stderr)

# Timeout: exit 3, quickly, with the timeout named.
start = time.monotonic()
p = cli.run("run", cli.plan("long_sleep.json"), "--timeout", "0.05", timeout=30)
elapsed = time.monotonic() - start
cli.check_exit(p, TIMEOUT, "run --timeout 0.05 on a long sleep")
cli.check("taskgroup: run timed out after 50 ms" in p.stderr, "timeout: message", p.stderr)
cli.check(elapsed < 10, "timeout: the command ends soon after the deadline", f"{elapsed:.1f} s")
p = cli.run("run", cli.plan("long_sleep.json"), "--timeout", "0.05", "--policy", "gather", "--threads", "2")
cli.check_exit(p, TIMEOUT, "run --timeout under gather with 2 threads")

# A run that cannot progress says where it waited: a consumer with no
# producer and no close names its Dequeue and the Dequeue's queue.
# The run joins the trace given, and its error names the trace.
TRACE_PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
p = cli.run("run", cli.plan("stuck_consumer.json"), "--timeout", "1", "--trace-parent", TRACE_PARENT, timeout=30)
cli.check_exit(p, TIMEOUT, "run --timeout 1 on a consumer without producer")
NO_PRODUCER = "; no producer left: no task of this node that has not ended can enqueue or close"
cli.check('taskgroup: run timed out after 1000 ms (trace 4bf92f3577b34da6a3ce929d0e0e4736); still running then: '
          'task "n/consumer" (node "n"): '
          'consume/net "take" op #0 (Dequeue): input #0 "jobs": cancelled while waiting for an item: '
          'the queue is empty (0 of 4, open)' + NO_PRODUCER + "\n" in p.stderr, "timeout: where the consumer waited",
          p.stderr)
# A producer that ended without closing the queue: the consumer's second
# Dequeue waits for ever, and says that no producer is left.
p = cli.run("run", cli.plan("forgot_close.json"), "--timeout", "1", timeout=30)
cli.check_exit(p, TIMEOUT, "run --timeout 1 on a producer that forgot to close")
cli.check('task "n/consumer" (node "n"): consume/net "take" op #0 (Dequeue): input #0 "jobs": cancelled while '
          'waiting for an item: the queue is empty (0 of 4, open)' + NO_PRODUCER + "\n" in p.stderr,
          "timeout: no producer left once the producer ended", p.stderr)
# Consumers in three concurrent instances: the task's error names where the
# first instance waited, and how many more were cancelled.
p = cli.run("run", cli.plan("stuck_consumers.json"), "--timeout", "0.5", timeout=30)
cli.check_exit(p, TIMEOUT, "run --timeout on consumers in three instances")
cli.check(re.search(r'task "n/consumer" \(node "n"\): n/consumer:parallel/instance [012]/n/consumer:instance/'
                    r'consume/net "take" op #0 \(Dequeue\): input #0 "jobs": cancelled while waiting for an item: '
                    r'the queue is empty \(0 of 4, open\)' + re.escape(NO_PRODUCER) +
                    r' \(and 2 more concurrent branches cancelled\)\n', p.stderr) is not None,
          "timeout: where concurrent instances waited", p.stderr)

cli.done()
