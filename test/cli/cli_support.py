"""Shared helpers of the `taskgroup` command tests.

Every test script is run by Meson as `python3 <script> <taskgroup binary>
<source root>`; it exits 0 when every check passed, 1 otherwise, 77 to be
skipped.
"""
import json
import os
import subprocess
import sys
import tempfile

SHIPPED = ["seed.json", "pipeline.json", "fails.json"]

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
