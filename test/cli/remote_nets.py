"""Remote nets in plans ("remote_nets"): `check` and `graph` show them on
their nodes, `run` makes them before the tasks start (a task runs one by
name with RunNet), `fmt` keeps them; a remote net naming no net of the
plan, or twice for one node, is a usage error (exit 2) naming where."""
import json
import shutil
import subprocess

from cli_support import Cli, OK, USAGE

cli = Cli()
plan = cli.plan("remote_nets.json")

p = cli.run("check", plan)
cli.check_exit(p, OK, "check remote_nets.json")
for line in ["2 nodes (ps, spare), 1 task", "node ps: 1 task", 'remote net "bump" (1 op)', "node spare: 0 tasks",
             'remote net "fill" (1 op)']:
    cli.check(line in p.stdout, f"check shows {line!r}", p.stdout)
cli.check(p.stdout.index("node spare") < p.stdout.index('remote net "fill"'), "check: fill under node spare",
          p.stdout)

p = cli.run("graph", plan)
cli.check_exit(p, OK, "graph remote_nets.json")
cli.check('label="node spare"' in p.stdout, "graph: a cluster for the task-less node spare", p.stdout)
cli.check(p.stdout.count('label="remote net"') == 2, "graph: an edge per remote net", p.stdout)
cli.check("net fill" in p.stdout and "ConstantFill() -> seven" in p.stdout, "graph: the net and its ops", p.stdout)
dot = shutil.which("dot")
if dot is not None:
    svg = subprocess.run([dot, "-Tsvg"], input=p.stdout, capture_output=True, text=True, timeout=60)
    cli.check(svg.returncode == 0 and "<svg" in svg.stdout, "graph: dot -Tsvg accepts it", svg.stderr[:500])

# The task calls the remote net twice by name: Iter counts 1, 2.
p = cli.run("run", "--json", "-q", plan)
cli.check_exit(p, OK, "run remote_nets.json")
got = cli.json_of(p.stdout, "run --json") or {}
cli.check(got == {"ps/caller": {"total": 2}}, "run: the task ran the remote net twice", got)

p = cli.run("fmt", plan)
cli.check_exit(p, OK, "fmt remote_nets.json")
formatted = cli.json_of(p.stdout, "fmt output") or {}
cli.check(formatted.get("remote_nets") == [{"node": "ps", "net": "bump"}, {"node": "spare", "net": "fill"}],
          "fmt keeps the remote nets, in order", formatted.get("remote_nets"))
again = cli.run("fmt", cli.temp("formatted.json", p.stdout))
cli.check(again.stdout == p.stdout, "fmt is stable on remote nets", again.stdout)

base = json.load(open(plan, encoding="utf-8"))
for remote, message in [
    ([{"node": "ps", "net": "nope"}], '/remote_nets/0/net: unknown net "nope"'),
    ([{"node": "ps"}], '/remote_nets/0: a remote net needs a "net"'),
    ([{"node": "ps", "net": "bump"}, {"node": "ps", "net": "bump"}],
     '/remote_nets/1: remote net "bump" for node "ps" added twice'),
    ([{"node": "ps", "net": "bump", "when": 1}], '/remote_nets/0/when: unknown key "when"'),
    ({"node": "ps"}, "/remote_nets: expected an array"),
]:
    doc = dict(base, remote_nets=remote)
    bad = cli.temp("bad_remote.json", json.dumps(doc))
    p = cli.run("check", bad)
    cli.check_exit(p, USAGE, f"check with remote_nets {remote!r}")
    cli.check(message in p.stderr, f"the error says {message!r}", p.stderr)

cli.done()
