"""`check`: validates and summarises every shipped plan; exit 2 on errors.
Also: the documentation's complete example is the shipped pipeline."""
import json
import os

from cli_support import Cli, OK, USAGE, SHIPPED

cli = Cli()

for name in SHIPPED:
    path = cli.shipped(name)
    p = cli.run("check", path)
    cli.check_exit(p, OK, f"check {name}")
    cli.check(p.stdout.startswith(f"{path}: valid plan (format 1)\n"), f"check {name}: first line", p.stdout)
    cli.check(p.stderr == "", f"check {name}: nothing on stderr", p.stderr)

p = cli.run("check", cli.shipped("seed.json"))
out = p.stdout
cli.check("3 nodes (local, n2, n1), 5 tasks, 5 steps, 6 nets (10 ops)" in out, "seed: totals", out)
for line in ["node local: 2 tasks", "node n2: 2 tasks", "node n1: 1 task",
             "local/s1  1 instance, global workspace, 1 step, 1 net, outputs: note",
             "n1/s4  1 instance, global workspace, 1 step, 1 net, outputs: note",
             "local init: 1 net (make_mailbox)"]:
    cli.check(line in out, f"seed summary has {line!r}", out)

p = cli.run("check", cli.shipped("pipeline.json"))
for line in ["local/produce  2 instances, global workspace, 1 step, 2 nets, outputs: none",
             "local/consume  3 instances, global workspace, 3 steps, 4 nets, outputs: total, consumed",
             'report step "progress" every 100 ms (1 step, 1 net)']:
    cli.check(line in p.stdout, f"pipeline summary has {line!r}", p.stdout)

p = cli.run("check", cli.plan("types.json"))
cli.check("outputs: i, d, whole, b, s, li, ld, lb, ls, empty, q, [x, y]" in p.stdout, "list outputs in brackets",
          p.stdout)

# Retry policies: each one that retries, below its task, and a note where a
# failed attempt's writes stay. retry.json's stay nowhere: a private task,
# a step with its own workspace.
p = cli.run("check", cli.shipped("retry.json"))
cli.check(p.stdout.splitlines()[3:] == [
    "node local: 2 tasks",
    "  local/fetch  1 instance, private workspace, 1 step, 1 net, outputs: value",
    "    retry: 3 attempts, backoff 1 ms x2 up to 1000 ms, jitter, on op_failed, timeout",
    "  local/poll   1 instance, private workspace, 3 steps, 2 nets, outputs: answer",
    '    step "poll/ask" retry: 2 attempts, backoff 1 ms x2 up to 1000 ms, no jitter, on op_failed'],
    "retry.json: the policies below their tasks, no note", p.stdout)
every = {"max_attempts": 4, "initial_backoff_ms": 0, "multiplier": 1.5, "max_backoff_ms": 20, "jitter": False,
         "retry_on": []}
plan = {"taskgroup_plan": 1, "workspace_type": "global",
        "nets": [{"name": "w", "ops": []}],
        "tasks": [{"name": "t", "retry": {"max_attempts": 2},
                   "step": {"name": "main", "substeps": [
                       {"name": "a", "nets": ["w"], "retry": every},
                       {"name": "b", "nets": ["w"], "create_workspace": True, "retry": {"max_attempts": 3}},
                       {"name": "c", "nets": ["w"], "retry": {"max_attempts": 1, "jitter": False}}]},
                   "init": [{"name": "warm", "nets": ["w"], "retry": {"max_attempts": 5}}],
                   "reports": [{"step": {"name": "show", "nets": ["w"], "retry": {"max_attempts": 6}}}]}],
        "report_steps": [{"step": {"name": "watch", "nets": ["w"], "retry": {"max_attempts": 7}}}],
        "local_init": [{"body": [{"name": "open", "nets": ["w"], "create_workspace": True,
                                  "retry": {"max_attempts": 8, "retry_on": ["queue_closed"]}}]}]}
p = cli.run("check", cli.temp("retries.json", json.dumps(plan)))
cli.check_exit(p, OK, "check retries.json")
default = "backoff 10 ms x2 up to 1000 ms, jitter, on op_failed, timeout"
cli.check(p.stdout.splitlines()[3:] == [
    "node local: 1 task",
    "  local/t  1 instance, global workspace, 6 steps, 1 net, outputs: none",
    f"    retry: 2 attempts, {default}",
    "      note: a global task: what a failed attempt wrote to node blobs is not undone",
    f'    init step "warm" retry: 5 attempts, {default}',
    "      note: no create_workspace: what a failed attempt wrote stays",
    '    step "main/a" retry: 4 attempts, backoff 0 ms x1.5 up to 20 ms, no jitter, on nothing',
    "      note: no create_workspace: what a failed attempt wrote stays",
    f'    step "main/b" retry: 3 attempts, {default}',
    f'    report step "show" retry: 6 attempts, {default}',
    "      note: no create_workspace: what a failed attempt wrote stays",
    '  report step "watch" every 1000 ms (1 step, 1 net)',
    f'    step "watch" retry: 7 attempts, {default}',
    "      note: no create_workspace: what a failed attempt wrote stays",
    "  local init: 1 net (w)",
    '    local init step "open" retry: 8 attempts, backoff 10 ms x2 up to 1000 ms, jitter, on queue_closed'],
    "retries.json: every policy that retries, where it is, with its notes", p.stdout)

# The totals line names ten nodes at most, then says how many it left out.
for n in range(9, 13):
    plan = {"taskgroup_plan": 1, "nets": [{"name": "w", "ops": []}],
            "tasks": [{"name": f"t{i}", "node": f"n{i}", "step": {"name": "s", "nets": ["w"]}} for i in range(n)]}
    p = cli.run("check", cli.temp(f"nodes{n}.json", json.dumps(plan)))
    names = ", ".join(f"n{i}" for i in range(min(n, 10))) + (f", ... ({n - 10} more)" if n > 10 else "")
    want = f"{n} nodes ({names}), {n} tasks, {n} steps, 1 net (0 ops)"
    cli.check(p.stdout.splitlines()[1:3] == ["workspace type: private", want], f"{n} nodes: totals line", p.stdout)

# A named group: its name on the line after the first, quoted as names are
# in messages; an unnamed one has no such line.
named = {"taskgroup_plan": 1, "name": 'checkout "v2" \\ ✓', "workspace_type": "global",
         "nets": [{"name": "w", "ops": []}], "tasks": [{"name": "t", "step": {"name": "s", "nets": ["w"]}}]}
path = cli.temp("named.json", json.dumps(named, ensure_ascii=False))
p = cli.run("check", path)
cli.check_exit(p, OK, "check named.json")
cli.check(p.stdout.splitlines()[:4] == [f"{path}: valid plan (format 1)", 'group name: "checkout "v2" \\ ✓"',
                                        "workspace type: global", "1 node (local), 1 task, 1 step, 1 net (0 ops)"],
          "named.json: the group's name below the first line", p.stdout)
for name in SHIPPED:
    p = cli.run("check", cli.shipped(name))
    cli.check("group name:" not in p.stdout, f"check {name}: an unnamed group has no name line", p.stdout)

bad = cli.temp("bad.json", '{"taskgroup_plan": 1, "nets": [{"name": "n", "ops": [{"type": "Ad"}]}]}')
p = cli.run("check", bad)
cli.check_exit(p, USAGE, "check on a plan with an unknown op")
cli.check(p.stderr == f'taskgroup: {bad}: /nets/0/ops/0: unknown operator type "Ad"\n', "check: the error", p.stderr)
cli.check(p.stdout == "", "check: no summary for an invalid plan", p.stdout)

doc = open(os.path.join(cli.root, "docs", "plan-format.md"), encoding="utf-8").read()
example = doc.split("## A complete example", 1)[-1].split("```json\n", 1)[-1].split("```", 1)[0]
pipeline = json.load(open(cli.shipped("pipeline.json"), encoding="utf-8"))
cli.check(cli.json_of(example, "docs example") == pipeline,
          "docs/plan-format.md: the complete example is examples/plans/pipeline.json")
p = cli.run("check", cli.temp("doc-example.json", example))
cli.check_exit(p, OK, "check the documentation's complete example")

cli.done()
