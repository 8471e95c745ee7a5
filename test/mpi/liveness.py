"""A rank that stops answering (SIGSTOP) or dies (SIGKILL) mid-run is found
by the heartbeat: every live rank's run fails within about
mpi_options::lost_after (2 s in the test case) with an error naming the
rank, and its tasks are cancelled.

Usage: liveness.py MPIRUN MPI_TESTS. Runs the hidden test case
[mpi_liveness] under `mpirun --timeout 60` four times: SIGSTOP of rank 1,
of rank 0, SIGKILL of rank 1, of rank 0, sent 0.5 s into the run. Open
MPI's recovery mode keeps mpirun from ending the job when a rank dies, so
that the survivors' own detection is what is tested. Each live rank prints
its run's end, then the script kills the job.
"""
import os
import re
import signal
import subprocess
import sys
import threading
import time

mpirun, tests = sys.argv[1], sys.argv[2]
LOST_AFTER_MS = 2000
failures = []


def scenario(victim, sig):
    name = f"{signal.Signals(sig).name} of rank {victim}"
    cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "--timeout", "60", "--mca", "orte_enable_recovery", "1",
           "--mca", "orte_abort_on_non_zero_status", "0", "-np", "3", tests, "[mpi_liveness]"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    cond = threading.Condition()

    def reader():
        for line in p.stdout:
            with cond:
                lines.append(line.rstrip("\n"))
                cond.notify_all()
        with cond:
            lines.append(None)
            cond.notify_all()

    threading.Thread(target=reader, daemon=True).start()

    def wait_for(pred, seconds):
        deadline = time.monotonic() + seconds
        with cond:
            while not pred() and time.monotonic() < deadline and None not in lines:
                cond.wait(0.1)
            return pred()

    pids = {}
    ends = {}

    def scan():
        for l in lines:
            if l is None:
                continue
            m = re.search(r"LIVENESS rank (\d) pid (\d+)", l)
            if m:
                pids[int(m.group(1))] = int(m.group(2))
            m = re.search(r"LIVENESS rank (\d) ended after (\d+) ms, tasks cancelled (\d+) of (\d+): (.*)", l)
            if m:
                ends[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5))
        return pids, ends

    ok = wait_for(lambda: len(scan()[0]) == 3, 30)
    if not ok:
        failures.append(f"{name}: the ranks did not start: {lines[-20:]}")
    else:
        time.sleep(0.5)
        os.kill(pids[victim], sig)
        live = [r for r in range(3) if r != victim]
        wait_for(lambda: all(r in scan()[1] for r in live), 20)
        for r in live:
            if r not in ends:
                failures.append(f"{name}: rank {r} did not end its run")
                continue
            ms, cancelled, started, message = ends[r]
            print(f"{name}: rank {r} ended after {ms} ms: {message}")
            if not message.startswith(f"rank {victim}: lost: no heartbeat or message from it for {LOST_AFTER_MS} ms"):
                failures.append(f"{name}: rank {r} does not name rank {victim}: {message}")
            if ms > 500 + LOST_AFTER_MS + 3000:
                failures.append(f"{name}: rank {r} took {ms} ms")
            if cancelled != started:
                failures.append(f"{name}: rank {r} left tasks running ({cancelled} of {started} cancelled)")
    for pid in pids.values():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        failures.append(f"{name}: mpirun did not end")
    text = "\n".join(l for l in lines if l is not None)
    if "time limit for job execution has been reached" in text:
        failures.append(f"{name}: the job hung until mpirun's --timeout")


for victim, sig in [(1, signal.SIGSTOP), (0, signal.SIGSTOP), (1, signal.SIGKILL), (0, signal.SIGKILL)]:
    scenario(victim, sig)
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
