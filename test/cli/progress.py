"""Progress on stderr: plain lines off a terminal, a redrawn block on one
(checked through a pseudo-terminal), nothing with --quiet; stdout keeps
only the results."""
import re

from cli_support import Cli, OK

cli = Cli()

TABLE = ("task           blob      value\n"
         "local/produce  -         (succeeded)\n"
         "local/consume  total     420\n"
         "local/consume  consumed  40\n")

# Plain: one line per task event, Print lines in between, all on stderr.
p = cli.run("run", cli.shipped("pipeline.json"))
cli.check_exit(p, OK, "plain run")
cli.check(p.stdout == TABLE, "plain: stdout is exactly the outputs table", p.stdout)
lines = p.stderr.splitlines()
for task in ["local/produce", "local/consume"]:
    cli.check(f"task {task} started" in lines, f"plain: {task} started", lines)
    cli.check(any(re.fullmatch(rf"task {task} finished \(succeeded, \d+ ms\)", l) for l in lines),
              f"plain: {task} finished with status and duration", lines)
prints = [l for l in lines if l.startswith("progress: consumed: ")]
cli.check(len(prints) >= 2 and prints[-1] == "progress: consumed: 40", "plain: Print lines of the report step",
          prints)
cli.check("\x1b[" not in p.stderr, "plain: no escape sequences off a terminal")

p = cli.run("run", cli.shipped("fails.json"))
cli.check("task worker/train finished (failed, " in p.stderr and "task local/wait finished (cancelled, " in p.stderr,
          "plain: failed and cancelled tasks", p.stderr)

# A task's retries: each failed attempt that is retried, then the
# attempts in the finished line. The step's retry (poll/ask) is a step
# event, which the progress does not ask for.
p = cli.run("run", cli.shipped("retry.json"))
cli.check_exit(p, OK, "plain run of retry.json")
lines = p.stderr.splitlines()
busy = "the service is busy (this plan fails twice on purpose)"
for attempt in [1, 2]:
    cli.check(any(re.fullmatch(rf"task local/fetch attempt {attempt} of 3 failed: .*{re.escape(busy)}.*; "
                               r"retrying in \d+\.\d ms", l) for l in lines),
              f"plain: fetch's attempt {attempt} failed and is retried", lines)
cli.check(not any("attempt 3 of 3" in l for l in lines), "plain: the last attempt succeeded, no retry", lines)
cli.check(any(re.fullmatch(r"task local/fetch finished \(succeeded, \d+ ms, 3 attempts\)", l) for l in lines),
          "plain: fetch finished after 3 attempts", lines)
cli.check(any(re.fullmatch(r"task local/poll finished \(succeeded, \d+ ms\)", l) for l in lines),
          "plain: poll's task ran once (its step retried inside it)", lines)
cli.check(not any("local/poll attempt" in l for l in lines), "plain: a step's retry is not a task line", lines)
code, out, text = cli.run_on_terminal("run", cli.shipped("retry.json"))
cli.check(code == 0, "live retry.json: exit status 0", code)
cli.check(re.search(r"tasks done, 0 running, 2 retried", text) is not None and
          re.search(r"local\s+running 0\s+done 2/2\s+retried 2\s+\d+\.\d\d s", text) is not None,
          "live: the final block counts fetch's two retries", text[-400:])

# Quiet: nothing but the results.
p = cli.run("run", "--quiet", cli.shipped("pipeline.json"))
cli.check(p.stdout == TABLE and p.stderr == "", "quiet: only the table", (p.stdout, p.stderr))

# Live: stderr on a pseudo-terminal.
code, out, text = cli.run_on_terminal("run", cli.shipped("pipeline.json"), "--threads", "2")
cli.check(code == 0, "live: exit status 0", code)
cli.check(out == TABLE, "live: stdout is exactly the outputs table", out)
cli.check("\x1b[" in text and "A\x1b[J" in text, "live: the block is redrawn in place", text[:300])
cli.check(re.search(r"local\s+running 2\s+done 0/2", text) is not None, "live: per-node running and done counts",
          text)
cli.check(re.search(r"local\s+running 0\s+done 2/2\s+\d+\.\d\d s", text) is not None,
          "live: the final block shows every task done and the elapsed time", text[-400:])
cli.check("progress: consumed: 40" in text, "live: Print lines scroll above the block")
cli.check("task local/produce started" not in text, "live: no plain lines")

cli.done()
