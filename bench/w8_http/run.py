"""w8_http: the HTTP example's requests per second against a hand-written server.

Usage: python3 run.py --example 06_http_server --asio w8_http_asio_server
                      --load w8_http_load [--rounds 3] [--requests 20000]
                      [--warmup 2000] [--connections 32] [--threads 2]
                      [--check] [--quick]

Each round starts the HTTP example (examples/06_http_server.cpp, "ours"),
the hand-written Asio/Beast server (bench/w8_http/asio_server.cpp, "asio")
and the same with --guards ("guards": the example's per-request deadline
and disconnect watch, by hand; informational) one after the other, the
order rotating between rounds, each on 127.0.0.1 with --port 0 (the port read from its first line,
"listening on 127.0.0.1:P") and --threads (default 2, the example's
default). The load driver (bench/w8_http/load.cpp) puts the same bounded
load on each, checking every answer; then the server gets SIGTERM and must
exit 0. Prints each round's requests/s and the server's CPU time per
timed request (from /proc, read while the driver holds between its warm-up
and its timed phase), the medians, ours / asio of the median rps against
the target (>= 0.7) and ours / guards.

--quick: one round of 2,000 requests after 200 of warm-up, the target not
checked (the smoke form run by `meson test --benchmark`). --check: exit 1
when the target does not hold. Exit 1 on any failure (a server that does
not start, a wrong answer, a server that does not stop); every process
started is killed on the way out, whatever happened.
"""
import argparse
import os
import select
import signal
import statistics
import subprocess
import sys
import time

TARGET = 0.7
START_GUARD = 20.0  # seconds for a server to print its address
STOP_GUARD = 20.0  # seconds for a server to exit after SIGTERM
TICKS = os.sysconf("SC_CLK_TCK")


class Failure(Exception):
    pass


def cpu_seconds(pid):
    """utime + stime of a live process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def start(binary, extra, threads, procs):
    server = subprocess.Popen([binary, "--port", "0", "--threads", str(threads)] + extra, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    procs.append(server)
    ready, _, _ = select.select([server.stdout], [], [], START_GUARD)
    first = server.stdout.readline() if ready else ""
    if not first.startswith("listening on 127.0.0.1:"):
        raise Failure(f"{binary}: expected 'listening on 127.0.0.1:P' within {START_GUARD:.0f} s, got {first!r}")
    return server, int(first.rsplit(":", 1)[1])


def stop(server, binary):
    server.send_signal(signal.SIGTERM)
    try:
        out, err = server.communicate(timeout=STOP_GUARD)
    except subprocess.TimeoutExpired:
        raise Failure(f"{binary}: still running {STOP_GUARD:.0f} s after SIGTERM")
    if server.returncode != 0:
        raise Failure(f"{binary}: exit status {server.returncode} after SIGTERM: {err.strip()}")


def measure(binary, extra, args, procs):
    """One server under one load: (requests/s, server CPU ms per request, client CPU s, seconds)."""
    server, port = start(binary, extra, args.threads, procs)
    cmd = [args.load, "--port", str(port), "--connections", str(args.connections), "--warmup", str(args.warmup),
           "--requests", str(args.requests), "--timeout", str(args.timeout), "--hold"]
    load = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs.append(load)
    ready, _, _ = select.select([load.stdout], [], [], args.timeout)
    if not ready or load.stdout.readline() != "warmed up\n":
        load.kill()
        _, err = load.communicate()
        raise Failure(f"{args.load} against {binary}: no warm-up within {args.timeout} s: {err.strip()}")
    cpu0 = cpu_seconds(server.pid)  # the server is idle: the driver waits for the line below
    try:
        out, err = load.communicate("go\n", timeout=args.timeout + 10)
    except subprocess.TimeoutExpired:
        raise Failure(f"{args.load}: no end within {args.timeout + 10} s against {binary}")
    cpu1 = cpu_seconds(server.pid)
    if load.returncode != 0:
        raise Failure(f"{args.load} against {binary}: exit status {load.returncode}: {err.strip()}")
    stop(server, binary)
    fields = out.split()
    figures = dict(zip(fields[0::2], fields[1::2]))
    cpu_ms = (cpu1 - cpu0) * 1e3 / args.requests
    return float(figures["rps"]), cpu_ms, float(figures["client_cpu_s"]), float(figures["seconds"])


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--example", required=True, help="the 06_http_server binary (ours)")
    p.add_argument("--asio", required=True, help="the w8_http_asio_server binary")
    p.add_argument("--load", required=True, help="the w8_http_load binary")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--requests", type=int, default=20000)
    p.add_argument("--warmup", type=int, default=2000)
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--timeout", type=int, default=120, help="seconds: the bound on one load")
    p.add_argument("--check", action="store_true", help="exit 1 when the target does not hold")
    p.add_argument("--quick", action="store_true", help="one short round, no target (smoke test)")
    args = p.parse_args()
    if args.quick:
        args.rounds, args.requests, args.warmup = 1, 2000, 200
    if args.rounds < 1 or args.requests < 1 or args.warmup < 0:
        p.error("--rounds and --requests must be >= 1, --warmup >= 0")
    return args


def run(args, procs):
    servers = {"ours": (args.example, []), "asio": (args.asio, []), "guards": (args.asio, ["--guards"])}
    rps = {name: [] for name in servers}
    print(f"w8_http: {args.requests} requests (after {args.warmup} of warm-up) over {args.connections} "
          f"keep-alive connections, servers on {args.threads} threads, 127.0.0.1; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for r in range(args.rounds):
        names = list(servers)
        for name in names[r % len(names):] + names[:r % len(names)]:
            got, cpu_ms, client_cpu, secs = measure(*servers[name], args, procs)
            rps[name].append(got)
            print(f"round {r + 1} {name:6}: {got:9.1f} requests/s ({secs:.2f} s), server CPU {cpu_ms * 1e3:6.1f} "
                  f"us/request, client CPU {client_cpu:.2f} s", flush=True)
    med = {name: statistics.median(v) for name, v in rps.items()}
    ratio = med["ours"] / med["asio"]
    print(f"median requests/s: ours {med['ours']:.1f}, asio {med['asio']:.1f}, guards {med['guards']:.1f}")
    print(f"ours / asio = {ratio:.3f} (target >= {TARGET}): ", end="")
    holds = ratio >= TARGET
    print("not checked (--quick)" if args.quick else "yes" if holds else "NO")
    print(f"ours / guards = {med['ours'] / med['guards']:.3f} (informational)")
    if args.quick:
        return 0
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if args.check and not holds else 0


def main():
    args = parse_args()
    procs = []
    # Meson ends a benchmark that overruns with SIGTERM: unwind, so that the
    # servers are killed below.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        return run(args, procs)
    except (Failure, OSError, ValueError, KeyError) as e:
        print(f"w8_http: {e}", file=sys.stderr)
        return 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


if __name__ == "__main__":
    sys.exit(main())
