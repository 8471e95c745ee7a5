"""Round trip: every shipped plan, read and written back (`fmt`), gives a
plan whose written form is the same text, and that runs to the same
results; docs/plan-format.md lists each object's keys in written order."""
import os
import re

from cli_support import Cli, OK, SHIPPED

cli = Cli()

shipped = [cli.shipped(n) for n in SHIPPED]
plans = shipped + [cli.plan(n) for n in ["types.json", "gather.json", "weird_names.json"]]
for path in plans:
    name = path.split("/")[-1]
    once = cli.run("fmt", path)
    cli.check_exit(once, OK, f"fmt {name}")
    written = cli.temp("once-" + name, once.stdout)
    twice = cli.run("fmt", written)
    cli.check_exit(twice, OK, f"fmt of fmt {name}")
    cli.check(once.stdout == twice.stdout, f"{name}: writing the written plan again gives the same text")
    original = cli.json_of(open(path, encoding="utf-8").read(), name) or {}
    rewritten = cli.json_of(once.stdout, f"fmt {name}") or {}
    cli.check(rewritten.get("taskgroup_plan") == 1, f"{name}: written with the format version")
    if path in shipped:
        # Written as they are (test plans use argument forms the writer
        # normalises, e.g. a list of doubles is always typed).
        for key in ["nodes", "report_steps", "local_init", "local_exit"]:
            cli.check(original.get(key) == rewritten.get(key), f"{name}: {key} survive the round trip",
                      (original.get(key), rewritten.get(key)))
        # The writer lists nets in order of first use.
        nets = lambda plan: {n["name"]: n for n in plan.get("nets", [])}  # noqa: E731
        cli.check(nets(original) == nets(rewritten), f"{name}: nets survive the round trip",
                  (original.get("nets"), rewritten.get("nets")))
    cli.check(len(original.get("tasks", [])) == len(rewritten.get("tasks", [])), f"{name}: every task survives")
    cli.check(original.get("name") == rewritten.get("name"), f"{name}: the group's name survives",
              (original.get("name"), rewritten.get("name")))

    args = ["--policy", "gather"] if name == "gather.json" else []
    a = cli.run("run", "--json", "-q", *args, path)
    b = cli.run("run", "--json", "-q", *args, written)
    cli.check(a.returncode == b.returncode, f"{name}: same exit status for the original and the rewritten plan",
              (a.returncode, b.returncode))
    cli.check(a.stdout == b.stdout, f"{name}: same results for the original and the rewritten plan",
              (a.stdout, b.stdout))
    cli.check(a.stderr.replace(path, written) == b.stderr, f"{name}: same errors", (a.stderr, b.stderr))

# The key tables of docs/plan-format.md (the first table, or the tables
# in order, under each heading) list each object's keys in the order the
# writer writes them: every written object of every_key.json (which sets
# every key somewhere) has its keys in the table's order, and every key of
# a table is written somewhere.
tables = {"Top level": ["plan"], "Nodes": ["node"], "Nets, ops and arguments": ["net", "op"], "Steps": ["step"],
          "Tasks": ["task"], "Report steps": ["report step"], "Local init and exit": ["local setup"],
          "Remote nets": ["remote net"], "Inputs": ["input"], "Retry policies": ["retry"]}
documented = {}
report_keys = None
heading, index, in_table = None, 0, False
with open(os.path.join(cli.root, "docs", "plan-format.md"), encoding="utf-8") as f:
    for line in f:
        if line.startswith("## "):
            heading, index, in_table = line[3:].strip(), 0, False
        elif line.startswith("| key |"):
            in_table = heading in tables and index < len(tables[heading])
            if in_table:
                documented[tables[heading][index]] = []
            index += 1
        elif in_table and line.startswith("| `"):
            key = re.match(r"\| `([a-z_]+)`", line).group(1)
            documented[tables[heading][index - 1]].append(key)
            if heading == "Tasks" and key == "reports":
                report_keys = re.findall(r'"([a-z_]+)":', line)  # its type: {"key": ..., ...}
        elif not line.startswith("|"):
            in_table = False
cli.check(sorted(documented) == sorted(k for v in tables.values() for k in v), "plan-format.md: every key table found",
          documented)

written = {kind: [] for kinds in tables.values() for kind in kinds}


def steps(step):
    written["step"].append(list(step))
    if "retry" in step:
        written["retry"].append(list(step["retry"]))
    for sub in step.get("substeps", []):
        steps(sub)


def body(items):
    for item in items:
        if list(item) != ["net"]:
            steps(item)


p = cli.run("fmt", cli.plan("every_key.json"))
cli.check_exit(p, OK, "fmt every_key.json")
plan = cli.json_of(p.stdout, "fmt every_key.json") or {}
written["plan"].append(list(plan))
for kind, key in [("node", "nodes"), ("net", "nets"), ("task", "tasks"), ("report step", "report_steps"),
                  ("local setup", "local_init"), ("local setup", "local_exit"), ("remote net", "remote_nets"),
                  ("input", "inputs")]:
    written[kind] += [list(o) for o in plan.get(key, [])]
for n in plan.get("nets", []):
    written["op"] += [list(op) for op in n["ops"]]
for t in plan.get("tasks", []):
    if "retry" in t:
        written["retry"].append(list(t["retry"]))
    steps(t["step"])
    for key in ["init", "exit", "instance_init", "instance_exit"]:
        body(t.get(key, []))
    for r in t.get("reports", []):
        cli.check(list(r) == report_keys, "plan-format.md: the keys of a task's report in written order",
                  f"written {list(r)}, documented {report_keys}")
        steps(r["step"])
for r in plan.get("report_steps", []):
    steps(r["step"])
for s in plan.get("local_init", []) + plan.get("local_exit", []):
    body(s["body"])
for kind, keys in documented.items():
    for obj in written[kind]:
        order = [k for k in keys if k in obj]
        cli.check(order == obj, f"plan-format.md: the keys of each {kind} in written order",
                  f"written {obj}, documented {keys}")
    seen = {k for obj in written[kind] for k in obj}
    cli.check(seen == set(keys), f"every_key.json: every key of each {kind} is written", (sorted(seen), keys))

cli.done()
