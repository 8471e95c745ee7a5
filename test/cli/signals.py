"""Ctrl-C: SIGINT cancels the run through the cancellation path; the
command exits 130 (SIGTERM: 143) soon after, without hanging. SIGUSR1 (or
SIGQUIT) prints where each running task waits, and the run goes on; before
the run's handler is in place, and in the other commands, they are ignored."""
import errno
import os
import select
import signal
import subprocess
import time

from cli_support import Cli, SIGINT_EXIT, SIGTERM_EXIT

cli = Cli()


def read_until(proc, limit, done):
    """Reads stderr for up to `limit` seconds, until `done(what was read)`."""
    seen = ""
    deadline = time.monotonic() + limit
    fd = proc.stderr.fileno()
    while time.monotonic() < deadline and not done(seen):
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            chunk = os.read(fd, 4096).decode()
            if not chunk:
                break
            seen += chunk
    return seen


def finish(proc, limit):
    """Waits up to `limit` seconds for the command to end (killed then):
    (stdout, stderr, whether it ended by itself)."""
    try:
        out, err = proc.communicate(timeout=limit)
        return out, err, True
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return out, err, False


def wait_for_lines(proc, needles, limit=20.0):
    """Reads stderr until it holds every one of `needles` (plain progress mode;
    tasks of different nodes start in parallel, so in any order)."""
    return read_until(proc, limit, lambda seen: all(needle in seen for needle in needles))


def interrupt(sig, expected, *extra):
    trace = cli.temp(f"interrupted-{sig}.json")
    env = dict(os.environ)
    env.pop("TERM", None)
    proc = subprocess.Popen([cli.exe, "run", cli.plan("long_sleep.json"), "--trace", trace, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    seen = wait_for_lines(proc, ["task local/sleeper started", "task n1/counter started"])
    cli.check("task local/sleeper started" in seen and "task n1/counter started" in seen,
              f"{sig.name}: both tasks started", seen)
    start = time.monotonic()
    proc.send_signal(sig)
    out, err, ended = finish(proc, 15)
    if not ended:
        cli.check(False, f"{sig.name}: the command ends after the signal (it hung)")
        return
    elapsed = time.monotonic() - start
    err = seen + err.decode()
    cli.check(proc.returncode == expected, f"{sig.name}: exit status {expected}", (proc.returncode, err))
    cli.check(elapsed < 5, f"{sig.name}: ends within seconds", f"{elapsed:.2f} s")
    cli.check(f"taskgroup: run cancelled by {sig.name}; still running then: " in err, f"{sig.name}: says so", err)
    cli.check('task "local/sleeper" (node "local"): sleep/net "long_sleep" op #0 (Sleep): wait cancelled ' in err and
              'task "n1/counter" (node "n1"): count/net "tick" op #1 (Sleep)' in err,
              f"{sig.name}: says where each task waited", err)
    cli.check("task local/sleeper finished (cancelled" in err and "task n1/counter finished (cancelled" in err,
              f"{sig.name}: every task was cancelled (not killed)", err)
    if "--json" in extra:
        # --json: the object of the run, as after a success (no outputs).
        cli.check(cli.json_of(out.decode(), f"{sig.name} --json") == {"local/sleeper": {}, "n1/counter": {}},
                  f"{sig.name} --json: the object on stdout", out)
    else:
        cli.check(out == b"", f"{sig.name}: no results on stdout", out)
    # The trace of the cut-short run is still written, with both task spans.
    data = cli.json_of(open(trace, encoding="utf-8").read(), f"{sig.name}: trace") or {}
    tasks = {e["name"] for e in data.get("traceEvents", []) if e.get("ph") == "X" and e["cat"] == "task"}
    cli.check(tasks == {"local/sleeper", "n1/counter"}, f"{sig.name}: trace of the cancelled run", tasks)


def where(sig, *extra):
    """SIGUSR1 (or SIGQUIT) during a stuck run names the run's trace, and
    the Dequeue it waits on and its queue, each time it comes; the run then
    ends at its --timeout (exit 3)."""
    env = dict(os.environ)
    env.pop("TERM", None)
    proc = subprocess.Popen([cli.exe, "run", cli.plan("stuck_consumer.json"), "--timeout", "6", "--trace-parent",
                             "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    # The handler is in place before any task starts.
    seen = wait_for_lines(proc, ["task n/consumer started"])
    line = ('  task "n/consumer" (node "n"): consume/net "take" op #0 (Dequeue): input #0 "jobs": '
            'waiting for an item: the queue is empty (0 of 4, open); no producer left: no task of this node that '
            'has not ended can enqueue or close')
    # Once the task has reached its wait (it may not have yet), and again.
    for wanted in (1, None):
        if wanted is None:
            wanted = seen.count(line) + 1
        deadline = time.monotonic() + 4
        while seen.count(line) < wanted and time.monotonic() < deadline:
            proc.send_signal(sig)
            seen += read_until(proc, 0.3, lambda _: False)
        cli.check(seen.count(line) >= wanted, f"{sig.name} {extra}: names the Dequeue and its queue ({wanted})",
                  seen)
    out, err, _ = finish(proc, 15)
    err = seen + err.decode()
    cli.check(f"taskgroup: {sig.name}: where the running tasks stand (trace 4bf92f3577b34da6a3ce929d0e0e4736):\n"
              + line in err, f"{sig.name} {extra}: a heading naming the run's trace", err)
    cli.check(proc.returncode == 3, f"{sig.name} {extra}: the run went on to its timeout (exit 3)",
              (proc.returncode, err))
    cli.check(out == b"", f"{sig.name} {extra}: nothing on stdout", out)


def while_reading(command, sig):
    """SIGUSR1 and SIGQUIT that come before `run` handles them (here while
    the plan is read, from a pipe), or to another command, are ignored: the
    command goes on as if they had not come."""
    what = f"{command} given {sig.name} while it reads the plan"
    fifo = os.path.join(cli.tmp.name, f"{command}-{sig.name}.fifo")
    os.mkfifo(fifo)
    env = dict(os.environ)
    env.pop("TERM", None)
    proc = subprocess.Popen([cli.exe, command, fifo], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    # Opening the pipe to write succeeds once the command has it open to read.
    fd = None
    deadline = time.monotonic() + 20
    while fd is None and proc.poll() is None and time.monotonic() < deadline:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
            time.sleep(0.01)
    if not cli.check(fd is not None, f"{what}: it opens the plan", proc.poll()):
        proc.kill()
        proc.communicate()
        return
    proc.send_signal(sig)
    time.sleep(0.2)
    proc.send_signal(sig)
    with open(cli.shipped("seed.json"), "rb") as f:
        os.write(fd, f.read())
    os.close(fd)
    out, err, _ = finish(proc, 30)
    cli.check(proc.returncode == 0, f"{what}: exit status 0", (proc.returncode, err))
    cli.check(command != "run" or b"local/s1" in out, f"{what}: the outputs", out)


def held_thread():
    """SIGUSR1 while an op holds its node's thread (--threads 2): the node
    that cannot answer is named, the other node's wait is given, and the
    run goes on to its end."""
    plan = cli.temp("held_thread.json", """{
  "taskgroup_plan": 1,
  "nodes": [{"name": "busy"}, {"name": "calm"}],
  "tasks": [
    {"name": "holder", "node": "busy", "step": {"name": "h", "nets": ["hold"]}},
    {"name": "sleeper", "node": "calm", "step": {"name": "s", "nets": ["nap"]}}
  ],
  "nets": [
    {"name": "hold", "ops": [{"type": "Block", "inputs": [], "outputs": [], "args": {"ms": 4000}}]},
    {"name": "nap", "ops": [{"type": "Sleep", "inputs": [], "outputs": [], "args": {"ms": 4000}}]}
  ]
}
""")
    env = dict(os.environ)
    env.pop("TERM", None)
    proc = subprocess.Popen([cli.exe, "run", "--load", os.environ["BLOCKING_OPS"], "--threads", "2", plan],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    seen = wait_for_lines(proc, ["task busy/holder started", "task calm/sleeper started"])
    silent = ('  node "busy": did not answer within 250 ms: a task there holds the node\'s thread (an op that '
              'blocks, or a long computation between two yields)')
    calm = '  task "calm/sleeper" (node "calm"): s/net "nap" op #0 (Sleep): sleeping for 4000 ms'
    deadline = time.monotonic() + 3
    while not (silent in seen and calm in seen) and time.monotonic() < deadline:
        proc.send_signal(signal.SIGUSR1)
        seen += read_until(proc, 0.4, lambda s: silent in s and calm in s)
    cli.check(silent in seen, "SIGUSR1 while an op holds the thread: names the node that cannot answer", seen)
    cli.check(calm in seen, "SIGUSR1 while an op holds the thread: the other node's task", seen)
    out, err, ended = finish(proc, 20)
    err = seen + err.decode()
    cli.check(ended and proc.returncode == 0, "SIGUSR1 while an op holds the thread: the run ends well",
              (proc.returncode, err))


where(signal.SIGUSR1)
where(signal.SIGUSR1, "--threads", "2")
where(signal.SIGQUIT)
held_thread()

for command in ["run", "check"]:
    for sig in [signal.SIGUSR1, signal.SIGQUIT]:
        while_reading(command, sig)

interrupt(signal.SIGINT, SIGINT_EXIT)
interrupt(signal.SIGINT, SIGINT_EXIT, "--threads", "2", "--policy", "gather")
interrupt(signal.SIGTERM, SIGTERM_EXIT)
interrupt(signal.SIGTERM, SIGTERM_EXIT, "--json")

cli.done()
