"""A rank that exits mid-run ends the whole job with an error, no hang.

Usage: rank_exit.py MPIRUN MPI_TESTS. Runs the hidden test case
[mpi_rank_exit] (rank 1 calls _Exit(3) 100 ms into a run whose other tasks
wait an hour) under `mpirun --timeout 60`, and checks that the job ends
long before the timeout, with a non-zero status that is not the timeout's.
"""
import subprocess
import sys
import time

mpirun, tests = sys.argv[1], sys.argv[2]
cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "--timeout", "60", "-np", "3", tests, "[mpi_rank_exit]"]
start = time.monotonic()
p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
elapsed = time.monotonic() - start
out = p.stdout + p.stderr
failures = []
if p.returncode == 0:
    failures.append("the job exited 0")
if "time limit for job execution has been reached" in out:
    failures.append("the job hung until mpirun's --timeout")
if elapsed > 30:
    failures.append(f"the job took {elapsed:.1f} s to end")
if "the run should not end" in out:
    failures.append("a surviving rank's run completed instead of the job ending")
print(f"mpirun exited {p.returncode} after {elapsed:.1f} s")
for f in failures:
    print("FAIL:", f)
if failures:
    print(out[-3000:])
sys.exit(1 if failures else 0)
