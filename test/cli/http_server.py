"""The HTTP example (examples/06_http_server.cpp) under load and at its edges.

Run by Meson as `python3 http_server.py <06_http_server binary> [flags]`
(once plain, once with `--offload`). Starts the
server on 127.0.0.1 (port 0, read from its first line), then:
- load: 5,000 GET /sum requests (TASKGROUP_HTTP_REQUESTS: the test
  command asks 1,500 under the sanitizers) over 32 keep-alive connections,
  n cycling through distinct values, every body checked against the
  expected values;
- pipelining: two requests in one write while the first runs, both answered;
- disconnect: a slow request whose client closes; the server's /stats must
  count the run cancelled (without cancellation it would sleep 30 s, past
  the guard); a client sending over 64 KiB during a run is cut off (503);
- deadline: a run slower than its timeout_ms answers 504;
- bad input: 400 naming the parameter, 404, 405, a malformed request;
- stop: SIGTERM with a request in flight and an idle keep-alive connection
  open; the server stops accepting and drains its session: the request in
  flight is answered (with `Connection: close`), the idle connection's next
  request gets 503 "stopping", and the server exits 0, its last line
  counting every run and saying the drain completed;
- limits (a second server, `--max-in-flight 1 --max-queued 1
  --priority-headroom 0`): with one slow run in flight and one queued, a
  third request is shed at once (503 "overloaded" with `Retry-After`),
  /health is admitted ahead of the queued /sum, which it pushes out of the
  full queue (503), and /stats counts both shed requests;
- headroom (a third server, `--max-in-flight 1 --max-queued 1`, the
  default headroom of 1): with one slow run in flight and one queued,
  /health starts in the headroom and answers while both still hold their
  places; nothing is shed, and both /sum requests answer.
Exits 0 when every check passed, 1 otherwise. Timings are hang guards only:
each bounds one response or one wait, never the whole load, whose pace
depends on the build and on what else shares the cores.
"""
import asyncio
import json
import os
import signal
import subprocess
import sys
import time

REQUESTS, CONNECTIONS = int(os.environ.get("TASKGROUP_HTTP_REQUESTS", "5000")), 32
NS = [0, 1, 2, 3, 16, 100, 999, 5000]
GUARD = 60.0  # seconds: any single step taking longer is a hang

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


def expected_values(n):
    t = n * (n + 1) // 2
    return [(k + 1) * t for k in range(16)]


async def read_response(reader):
    """One HTTP/1.1 response: (status, headers, body as text)."""
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("connection closed before a response")
    status = int(status_line.split()[1])
    headers = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers, body.decode()


def request_bytes(target, method="GET"):
    return f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


async def get(port, target, method="GET"):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request_bytes(target, method))
        return await asyncio.wait_for(read_response(reader), GUARD)
    finally:
        writer.close()


async def stats(port):
    status, _, body = await get(port, "/stats")
    if status != 200:
        raise RuntimeError(f"/stats answered {status}: {body}")
    return json.loads(body)


def check_sum(status, body, n, what):
    if not check(status == 200, f"{what}: 200", body):
        return False
    doc = json.loads(body)
    values = expected_values(n)
    return check(doc == {"n": n, "total": sum(values), "values": values}, f"{what}: body for n={n}", body)


async def client(port, first, count, wrong):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for i in range(first, first + count):
        n = NS[i % len(NS)]
        # The longest deadline: under the sanitizers, with other suites
        # sharing the cores, a request may wait longer than the default
        # 2 s in the servers' queues (the deadline has a check of its own).
        writer.write(request_bytes(f"/sum?n={n}&timeout_ms=60000"))
        # The guard is per response: a server that answers slowly but
        # steadily (the sanitizers, a compile sharing the cores) is not
        # hung; one that answers nothing for GUARD seconds is.
        status, headers, body = await asyncio.wait_for(read_response(reader), GUARD)
        if status != 200 or json.loads(body) != {"n": n, "total": sum(expected_values(n)),
                                                 "values": expected_values(n)}:
            wrong.append((n, status, body))
        if headers.get("connection", "").lower() == "close":
            raise ConnectionError("the server closed a keep-alive connection")
    writer.close()


async def load(port):
    wrong = []
    per = REQUESTS // CONNECTIONS
    counts = [per + (1 if c < REQUESTS % CONNECTIONS else 0) for c in range(CONNECTIONS)]
    starts = [sum(counts[:c]) for c in range(CONNECTIONS)]
    t0 = time.monotonic()
    await asyncio.gather(*(client(port, starts[c], counts[c], wrong) for c in range(CONNECTIONS)))
    print(f"load: {REQUESTS} requests over {CONNECTIONS} connections in {time.monotonic() - t0:.1f} s")
    check(not wrong, f"load: every response right ({len(wrong)} wrong)", wrong[:3])


async def pipelined(port):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request_bytes("/sum?n=7&sleep_ms=200") + request_bytes("/sum?n=8"))
    for n in (7, 8):
        status, _, body = await asyncio.wait_for(read_response(reader), GUARD)
        check_sum(status, body, n, "pipelined")
    writer.close()


async def wait_stats(port, cond, what):
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline:
        s = await stats(port)
        if cond(s):
            return s
        await asyncio.sleep(0.05)
    check(False, what, s)
    return s


async def start_slow(port, target, before, what):
    """Sends `target` on a new connection and waits until its run is in
    flight (counted after `before`); returns the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request_bytes(target))
    await writer.drain()
    await wait_stats(port, lambda s: s["started"] > before["started"] and s["in_flight"] >= 1,
                     f"{what}: the slow run started")
    return reader, writer


async def disconnect(port):
    before = await stats(port)
    _, writer = await start_slow(port, "/sum?n=1&sleep_ms=30000&timeout_ms=60000", before, "disconnect")
    writer.close()
    after = await wait_stats(port, lambda s: s["cancelled"] > before["cancelled"] and s["in_flight"] == 0,
                             "disconnect: the run was cancelled once the client left")
    check(after["cancelled"] == before["cancelled"] + 1, "disconnect: one run cancelled", after)
    # A client that sends more than 64 KiB during a run is treated as gone.
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request_bytes("/sum?n=1&sleep_ms=30000&timeout_ms=60000") + b"x" * 70000)
    await writer.drain()
    status, headers, body = await asyncio.wait_for(read_response(reader), GUARD)
    check(status == 503 and '"error":"cancelled"' in body and headers.get("connection") == "close",
          "flooding during a run: 503 cancelled, then close", f"{status} {headers} {body}")
    writer.close()
    s = await stats(port)
    check(s["cancelled"] == before["cancelled"] + 2 and s["in_flight"] == 0, "flooding: the run cancelled", s)


async def deadline(port):
    before = await stats(port)
    status, _, body = await get(port, "/sum?n=5&sleep_ms=30000&timeout_ms=100")
    check(status == 504, "deadline: 504", body)
    check(json.loads(body).get("error") == "timeout", "deadline: error timeout", body)
    after = await stats(port)
    check(after["timed_out"] == before["timed_out"] + 1, "deadline: counted timed out", after)


async def bad_input(port):
    cases = [
        ("/sum?n=abc", 400, 'parameter \\"n\\": expected an integer'),
        ("/sum?n=-1", 400, 'parameter \\"n\\" must be between 0 and 1000000'),
        ("/sum?n=1000001", 400, 'parameter \\"n\\" must be between 0 and 1000000'),
        ("/sum?n=1&sleep_ms=60001", 400, 'parameter \\"sleep_ms\\" must be between 0 and 60000'),
        ("/sum?n=1&timeout_ms=0", 400, 'parameter \\"timeout_ms\\" must be between 1 and 60000'),
        ("/sum?n=1&bogus=2", 400, 'unknown parameter \\"bogus\\"'),
        ("/sum?n=1&n=2", 400, 'parameter \\"n\\" given twice'),
        ("/sum", 400, 'missing parameter \\"n\\"'),
        ("/nope", 404, "no such path: /nope"),
        # The live view is served only with --debug-endpoints.
        ("/debug/runs", 404, "no such path: /debug/runs"),
    ]
    for target, code, text in cases:
        status, headers, body = await get(port, target)
        check(status == code and text in body and headers.get("content-type") == "application/json",
              f"{target}: {code} with {text}", f"{status} {body}")
    status, _, body = await get(port, "/sum?n=1", method="POST")
    check(status == 405, "POST: 405", body)
    status, _, body = await get(port, "/sum?n=1000000")
    check_sum(status, body, 1000000, "the largest n")
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"NOT HTTP AT ALL\r\n\r\n")
    status, headers, body = await asyncio.wait_for(read_response(reader), GUARD)
    check(status == 400 and "malformed request" in body and headers.get("connection") == "close",
          "a malformed request: 400, then close", f"{status} {headers} {body}")
    check(await asyncio.wait_for(reader.read(), GUARD) == b"", "a malformed request: connection closed")
    writer.close()


async def refused(port):
    try:
        _, w = await asyncio.open_connection("127.0.0.1", port)
        w.close()
        return False
    except OSError:
        return True


async def stop(port, server):
    """SIGTERM with a run in flight and an idle keep-alive connection."""
    idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", port)
    idle_writer.write(request_bytes("/sum?n=4"))
    status, _, body = await asyncio.wait_for(read_response(idle_reader), GUARD)
    check_sum(status, body, 4, "before the stop")
    before = await stats(port)
    reader, writer = await start_slow(port, "/sum?n=6&sleep_ms=500&timeout_ms=60000", before, "stop")
    server.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + GUARD
    while not await refused(port) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    check(await refused(port), "after SIGTERM: new connections refused")
    status, headers, body = await asyncio.wait_for(read_response(reader), GUARD)
    check_sum(status, body, 6, "after SIGTERM: the run in flight finished")
    check(headers.get("connection") == "close", "after SIGTERM: answered with Connection: close", headers)
    writer.close()
    idle_writer.write(request_bytes("/sum?n=5"))
    status, headers, body = await asyncio.wait_for(read_response(idle_reader), GUARD)
    check(status == 503 and '"error":"stopping"' in body and headers.get("connection") == "close",
          "after SIGTERM: a new request on an open connection: 503 stopping, then close",
          f"{status} {headers} {body}")
    check(await asyncio.wait_for(idle_reader.read(), GUARD) == b"", "after SIGTERM: the connection is closed")
    idle_writer.close()
    return before["started"] + 2


async def slow_and_queued(port, phase):
    """Starts a slow /sum (n=1, 1.5 s) and, once it is in flight, a second
    one (n=2), which waits in the queue; returns both connections."""
    slow_r, slow_w = await asyncio.open_connection("127.0.0.1", port)
    slow_w.write(request_bytes("/sum?n=1&sleep_ms=1500&timeout_ms=60000"))
    await slow_w.drain()
    await wait_stats(port, lambda s: s["in_flight"] == 1, f"{phase}: the slow run is in flight")
    queued_r, queued_w = await asyncio.open_connection("127.0.0.1", port)
    queued_w.write(request_bytes("/sum?n=2&timeout_ms=60000"))
    await queued_w.drain()
    await wait_stats(port, lambda s: s["queued"] == 1, f"{phase}: the second run is queued")
    return slow_r, slow_w, queued_r, queued_w


async def limits(port):
    """One run in flight, one queued: shed, Retry-After, /health first."""
    slow_r, slow_w, queued_r, queued_w = await slow_and_queued(port, "limits")
    status, headers, body = await get(port, "/sum?n=3")
    check(status == 503 and '"error":"overloaded"' in body and "session overloaded" in body and
          headers.get("retry-after") == "1", "limits: a request to a full queue is shed: 503 with Retry-After",
          f"{status} {headers} {body}")
    health = asyncio.ensure_future(get(port, "/health"))
    # /health outranks the queued /sum: that one is pushed out of the queue.
    status, headers, body = await asyncio.wait_for(read_response(queued_r), GUARD)
    check(status == 503 and "for a run of priority 1" in body and headers.get("retry-after") == "1",
          "limits: /health pushes the queued /sum out of the full queue", f"{status} {headers} {body}")
    status, _, body = await asyncio.wait_for(health, GUARD)
    check(status == 200 and json.loads(body) == {"status": "ok"}, "limits: /health answers 200", f"{status} {body}")
    status, _, body = await asyncio.wait_for(read_response(slow_r), GUARD)
    check_sum(status, body, 1, "limits: the slow run")
    s = await stats(port)
    check(s["shed"] == 2 and s["in_flight"] == 0 and s["queued"] == 0, "limits: /stats counts both shed requests", s)
    slow_w.close()
    queued_w.close()


async def headroom(port):
    """One run in flight, one queued, a place of headroom: /health starts at once."""
    slow_r, slow_w, queued_r, queued_w = await slow_and_queued(port, "headroom")
    status, _, body = await asyncio.wait_for(get(port, "/health"), GUARD)
    check(status == 200 and json.loads(body) == {"status": "ok"}, "headroom: /health answers 200", f"{status} {body}")
    s = await stats(port)
    check(s["in_flight"] == 1 and s["queued"] == 1 and s["shed"] == 0,
          "headroom: /health answered while the slow run and the queued one held their places, shedding none", s)
    status, _, body = await asyncio.wait_for(read_response(slow_r), GUARD)
    check_sum(status, body, 1, "headroom: the slow run")
    status, _, body = await asyncio.wait_for(read_response(queued_r), GUARD)
    check_sum(status, body, 2, "headroom: the queued run, admitted after it")
    slow_w.close()
    queued_w.close()


async def main(port, server):
    await load(port)
    await pipelined(port)
    await disconnect(port)
    await deadline(port)
    await bad_input(port)
    return await stop(port, server)


def serve(extra, phases):
    """Starts the server with `extra` flags, runs `phases(port, server)`
    (which ends with the server's SIGTERM), then checks its exit and last
    line; `phases` returns the number of /sum runs it started."""
    server = subprocess.Popen([sys.argv[1], "--port", "0", "--threads", "2", *sys.argv[2:], *extra],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = server.stdout.readline()
        check(first.startswith("listening on 127.0.0.1:"), "the server prints its address", first)
        port = int(first.rsplit(":", 1)[1])
        try:
            started = asyncio.run(phases(port, server))
        except (OSError, RuntimeError, asyncio.TimeoutError, ValueError) as e:
            check(False, "the client ran to its end", repr(e))
            return
        out, err = server.communicate(timeout=GUARD)
        check(server.returncode == 0, "SIGTERM: exit status 0", f"{server.returncode}: {err}")
        last = out.strip().splitlines()[-1] if out.strip() else ""
        check(last.startswith("stopped: "), "the server reports its counters on exit", out)
        if last.startswith("stopped: "):
            counters = json.loads(last[len("stopped: "):])
            check(counters["started"] == started and counters["in_flight"] == 0 and counters["queued"] == 0 and
                  counters["drained"] is True, "every run started was accounted for, the session drained",
                  f"{counters}, {started} started")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


async def limited(port, server):
    await limits(port)
    server.send_signal(signal.SIGTERM)
    return 3  # /sum runs: the slow one, the one pushed out, the one shed


async def with_headroom(port, server):
    await headroom(port)
    server.send_signal(signal.SIGTERM)
    return 2  # /sum runs: the slow one, the queued one


def run():
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} HTTP_SERVER_BINARY [SERVER_FLAG...]")
    t0 = time.monotonic()
    serve([], main)
    serve(["--max-in-flight", "1", "--max-queued", "1", "--priority-headroom", "0"], limited)
    serve(["--max-in-flight", "1", "--max-queued", "1"], with_headroom)
    print(f"{checks} checks, {failures} failed, {time.monotonic() - t0:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(run())
