"""`graph`: Graphviz DOT that `dot` accepts, a cluster per node."""
import re
import shutil
import subprocess
import sys
import xml.dom.minidom

from cli_support import Cli, OK, SHIPPED

cli = Cli()
dot = shutil.which("dot")
if dot is None:
    print("dot (Graphviz) is not installed: skipped")
    sys.exit(77)

# control_chars.json: control characters in argument values and node
# options (names cannot hold them), and a long value of two-byte
# characters; copied to a file whose name (the graph's title) holds some.
with open(cli.plan("control_chars.json"), encoding="utf-8") as f:
    control_title = cli.temp("tab\there\x1b[1m\x7f.json", f.read())
cases = [(cli.shipped(n), n) for n in SHIPPED] + [(cli.plan(n), n) for n in
                                                  ["weird_names.json", "types.json", "control_chars.json"]]
cases.append((control_title, "control characters in the title"))
for path, name in cases:
    p = cli.run("graph", path)
    cli.check_exit(p, OK, f"graph {name}")
    cli.check(p.stdout.startswith("digraph"), f"graph {name}: a digraph", p.stdout[:80])
    cli.check(re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", p.stdout) is None,
              f"graph {name}: no control character but newlines", repr(p.stdout))
    svg = subprocess.run([dot, "-Tsvg"], input=p.stdout, capture_output=True, text=True, timeout=60)
    cli.check(svg.returncode == 0 and "<svg" in svg.stdout, f"graph {name}: dot -Tsvg accepts it",
              svg.stderr[:500])
    cli.check("Warning" not in svg.stderr and "Error" not in svg.stderr, f"graph {name}: dot says nothing",
              svg.stderr[:500])
    try:
        xml.dom.minidom.parseString(svg.stdout)
    except Exception as e:  # expat's errors
        cli.check(False, f"graph {name}: the SVG is well-formed XML", e)

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

# A task or step whose policy retries shows its attempts.
p = cli.run("graph", cli.shipped("retry.json"))
cli.check('label="task local/fetch\\n1 instance, private workspace\\noutputs: value\\nretry x3"' in p.stdout,
          "retry graph: the task's policy", p.stdout)
cli.check('label="step ask\\nown workspace\\nretry x2"' in p.stdout, "retry graph: the step's policy", p.stdout)
cli.check(p.stdout.count("retry x") == 2, "retry graph: only the policies that retry", p.stdout)

p = cli.run("graph", cli.plan("weird_names.json"))
# A named group's name on the title's second line.
title = cli.plan("weird_names.json")
cli.check(f'graph [label="{title}\\ngroup \\"group \\"weird\\" \\\\ {{x}}|<y> ✓\\"",' in p.stdout,
          "graph: the group's name below the title", p.stdout[:300])
# (Plans refuse control characters in names: no newline to escape here.)
cli.check('node \\"one\\"' in p.stdout and "in/ner" in p.stdout and "outer \\\\ \\\"step\\\"" in p.stdout,
          "graph: quotes and backslashes are escaped", p.stdout)

# Control characters in free text are shown as escapes, each label one
# label: a newline in a value is no line break.
p = cli.run("graph", cli.plan("control_chars.json"))
cli.check('zone=\\\"a\\\\nb\\\\tc\\\\u0001d\\\\u001B[31me\\\\r\\\"' in p.stdout,
          "graph: a node option's control characters as escapes", p.stdout)
cli.check('[value=\\\"nul\\\\u0000esc\\\\u001B[31mred\\\\u0007bel\\\\u007Fdel\\\\u009Bc1\\\\n\\\\t\\\\r' in p.stdout,
          "graph: an argument's control characters as escapes", p.stdout)
p = cli.run("graph", control_title)
cli.check('graph [label="' + control_title.replace("\t", "\\\\t").replace("\x1b", "\\\\u001B")
          .replace("\x7f", "\\\\u007F") + '"' in p.stdout, "graph: the title's control characters as escapes",
          p.stdout[:300])

cli.done()
