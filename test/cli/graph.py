"""`graph`: Graphviz DOT that `dot` accepts, a cluster per node."""
import shutil
import subprocess
import sys

from cli_support import Cli, OK, SHIPPED

cli = Cli()
dot = shutil.which("dot")
if dot is None:
    print("dot (Graphviz) is not installed: skipped")
    sys.exit(77)

cases = [(cli.shipped(n), n) for n in SHIPPED] + [(cli.plan("weird_names.json"), "weird_names.json"),
                                                   (cli.plan("types.json"), "types.json")]
for path, name in cases:
    p = cli.run("graph", path)
    cli.check_exit(p, OK, f"graph {name}")
    cli.check(p.stdout.startswith("digraph"), f"graph {name}: a digraph", p.stdout[:80])
    svg = subprocess.run([dot, "-Tsvg"], input=p.stdout, capture_output=True, text=True, timeout=60)
    cli.check(svg.returncode == 0 and "<svg" in svg.stdout, f"graph {name}: dot -Tsvg accepts it",
              svg.stderr[:500])
    cli.check("Warning" not in svg.stderr and "Error" not in svg.stderr, f"graph {name}: dot says nothing",
              svg.stderr[:500])

p = cli.run("graph", cli.shipped("seed.json"))
for node in ["local", "n2", "n1"]:
    cli.check(f'label="node {node}"' in p.stdout, f"seed graph: cluster of node {node}")
cli.check(p.stdout.count("subgraph \"cluster_") == 3, "seed graph: three clusters")
for task in ["local/s1", "local/s2", "n2/s3", "n1/s4", "n2/s5"]:
    cli.check(f"task {task}" in p.stdout, f"seed graph: task {task}")
cli.check("Dequeue(mailbox) -> s2_got, s2_ok" in p.stdout, "seed graph: nets list their ops")

p = cli.run("graph", cli.shipped("pipeline.json"))
for text in ["step loop\\nstop when \\\"drained\\\"", "num_iter 20", "report every 100 ms", "local init",
             "3 instances", "CreateQueue() -> queue [capacity=4]"]:
    cli.check(text in p.stdout, f"pipeline graph shows {text!r}", p.stdout)

p = cli.run("graph", cli.plan("weird_names.json"))
# (Plans refuse control characters in names: no newline to escape here.)
cli.check('node \\"one\\"' in p.stdout and "in/ner" in p.stdout and "outer \\\\ \\\"step\\\"" in p.stdout,
          "graph: quotes and backslashes are escaped", p.stdout)

cli.done()
