"""Plans with many nodes: `check` groups every task, report step and local
setup under its own node (one pass over the group, linear in the nodes),
and the live progress block fits the terminal, counting the nodes that do
not fit. Sizes are large but quick; nothing here is timed."""
import json
import re

from cli_support import Cli, OK

cli = Cli()

N = 20000
# Nodes declared first to last, tasks listed from the last node to the
# first: the summary follows the order of first use (the tasks') and puts
# each task, report step and local init under its node. Every 1,000th node
# has a report step and a local init.
plan = {
    "taskgroup_plan": 1,
    "nodes": [{"name": f"n{i}"} for i in range(N)],
    "tasks": [{"name": f"t{i}", "node": f"n{i}", "step": {"name": f"s{i}", "nets": ["work"]}}
              for i in reversed(range(N))],
    "report_steps": [{"node": f"n{i}", "interval_ms": 100, "step": {"name": f"r{i}", "nets": ["report"]}}
                     for i in range(0, N, 1000)],
    "local_init": [{"node": f"n{i}", "body": [{"net": "setup"}]} for i in range(0, N, 1000)],
    "nets": [{"name": n, "ops": [{"type": "ConstantFill", "inputs": [], "outputs": [n], "args": {"value": 1}}]}
             for n in ["work", "report", "setup"]],
}
path = cli.temp("many_nodes.json", json.dumps(plan))
p = cli.run("check", path, timeout=120)
cli.check_exit(p, OK, f"check of {N} nodes")
lines = p.stdout.splitlines()
order = list(reversed(range(N)))
first_ten = ", ".join(f"n{N - 1 - i}" for i in range(10))
cli.check(len(lines) > 2 and lines[2] == f"{N} nodes ({first_ten}, ... ({N - 10} more)), {N} tasks, "
          f"{N + N // 1000} steps, 3 nets (3 ops)", "totals line: the first ten nodes, then how many more",
          [l[:200] for l in lines[:3]])
heads = [l for l in lines if l.startswith("node ")]
cli.check(heads == [f"node n{i}: 1 task" for i in order], "one section per node, in order of first use", heads[:5])
expected = []
for i in order:
    expected.append(f"node n{i}: 1 task")
    expected.append(f"  n{i}/t{i}  1 instance, private workspace, 1 step, 1 net, outputs: none")
    if i % 1000 == 0:
        expected.append(f'  report step "r{i}" every 100 ms (1 step, 1 net)')
        expected.append("  local init: 1 net (setup)")
body = lines[3:]
cli.check(body == expected, "each task, report step and local init under its own node",
          next(((a, b) for a, b in zip(body, expected) if a != b), (len(body), len(expected))))

# Live progress on a terminal of 10 rows, 30 nodes: the block shows the
# header, 7 nodes and a count of the other 23.
small = {
    "taskgroup_plan": 1,
    "tasks": [{"name": f"t{i}", "node": f"node{i:02}", "step": {"name": f"s{i}", "nets": ["wait"]}} for i in range(30)],
    "nets": [{"name": "wait", "ops": [{"type": "Sleep", "inputs": [], "outputs": [], "args": {"ms": 400}}]}],
}
code, _, text = cli.run_on_terminal("run", cli.temp("thirty.json", json.dumps(small)), rows=10)
cli.check(code == 0, "live: exit status 0", code)
final = text.rsplit("\x1b[J", 1)[-1]
block = [l.replace("\x1b[K", "") for l in final.replace("\r", "").split("\n") if l.strip()]
cli.check(len(block) == 9, "live: the final block fits 10 rows (header, 7 nodes, the rest counted)", block)
cli.check(bool(block) and block[0].startswith("taskgroup: 30/30 tasks done"), "live: the header counts all tasks",
          block[:1])
cli.check([re.match(r"\s+(node\d\d)\s", l).group(1) for l in block[1:8] if re.match(r"\s+(node\d\d)\s", l)] ==
          [f"node{i:02}" for i in range(7)], "live: the first 7 nodes in order", block)
cli.check(bool(block) and block[-1] == "  ... and 23 more nodes", "live: the others are counted", block[-1:])

cli.done()
