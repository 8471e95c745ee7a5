"""Round trip: every shipped plan, read and written back (`fmt`), gives a
plan whose written form is the same text, and that runs to the same
results."""
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

    args = ["--policy", "gather"] if name == "gather.json" else []
    a = cli.run("run", "--json", "-q", *args, path)
    b = cli.run("run", "--json", "-q", *args, written)
    cli.check(a.returncode == b.returncode, f"{name}: same exit status for the original and the rewritten plan",
              (a.returncode, b.returncode))
    cli.check(a.stdout == b.stdout, f"{name}: same results for the original and the rewritten plan",
              (a.stdout, b.stdout))
    cli.check(a.stderr.replace(path, written) == b.stderr, f"{name}: same errors", (a.stderr, b.stderr))

cli.done()
