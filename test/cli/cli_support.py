"""Shared helpers of the `taskgroup` command tests.

Every test script is run by Meson as `python3 <script> <taskgroup binary>
<source root>`; it exits 0 when every check passed, 1 otherwise, 77 to be
skipped.
"""
import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import tempfile
import termios
import time

SHIPPED = ["seed.json", "pipeline.json", "fails.json", "retry.json"]

# Exit statuses of the command.
OK, RUN_FAILED, USAGE, TIMEOUT, SIGINT_EXIT, SIGTERM_EXIT = 0, 1, 2, 3, 130, 143


class Cli:
    def __init__(self):
        if len(sys.argv) != 3:
            sys.exit(f"usage: {sys.argv[0]} TASKGROUP_BINARY SOURCE_ROOT")
        self.exe = os.path.abspath(sys.argv[1])
        self.root = os.path.abspath(sys.argv[2])
        self.failures = 0
        self.checks = 0
        self.tmp = tempfile.TemporaryDirectory(prefix="taskgroup-cli-")

    def shipped(self, name):
        return os.path.join(self.root, "examples", "plans", name)

    def plan(self, name):
        return os.path.join(self.root, "test", "cli", "plans", name)

    def temp(self, name, text=None):
        path = os.path.join(self.tmp.name, name)
        if text is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        return path

    def run(self, *args, timeout=60, env=None):
        """Runs the command; returns the CompletedProcess (text mode)."""
        full_env = dict(os.environ)
        full_env.pop("TERM", None)
        if env:
            full_env.update(env)
        return subprocess.run([self.exe, *args], capture_output=True, text=True, timeout=timeout, env=full_env)

    def run_on_terminal(self, *args, rows=None, cols=100, timeout=60):
        """Runs the command with stderr on a pseudo-terminal (TERM=xterm; of
        `rows` x `cols` when `rows` is given); returns (exit status, stdout,
        what the terminal showed)."""
        master, slave = pty.openpty()
        if rows is not None:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        proc = subprocess.Popen([self.exe, *args], stdout=subprocess.PIPE, stderr=slave,
                                env=dict(os.environ, TERM="xterm"))
        os.close(slave)
        screen = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the other side is closed
                    break
                if not chunk:
                    break
                screen += chunk
            elif proc.poll() is not None:
                break
        out = proc.stdout.read().decode()
        proc.wait(timeout=30)
        os.close(master)
        return proc.returncode, out, screen.decode(errors="replace")

    def check(self, cond, what, detail=None):
        self.checks += 1
        if not cond:
            self.failures += 1
            print(f"FAIL: {what}")
            if detail is not None:
                print(f"      {detail}")
        return cond

    def check_exit(self, proc, expected, what):
        return self.check(proc.returncode == expected, f"{what}: exit status {expected}",
                          f"got {proc.returncode}\n      stdout: {proc.stdout!r}\n      stderr: {proc.stderr!r}")

    def json_of(self, text, what):
        try:
            return json.loads(text)
        except ValueError as e:
            self.check(False, f"{what}: valid JSON", f"{e}: {text[:500]!r}")
            return None

    def done(self):
        print(f"{self.checks - self.failures}/{self.checks} checks passed")
        self.tmp.cleanup()
        sys.exit(1 if self.failures else 0)
