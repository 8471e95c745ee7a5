"""Plan inputs: `run --input NODE/BLOB=JSON` and `--inputs FILE` feed them;
feeds that do not match the plan's inputs are usage errors (exit 2) naming
node and blob; `fmt` keeps the inputs."""
import json
import os

from cli_support import Cli, OK, USAGE

cli = Cli()
plan = cli.shipped("inputs.json")


def outputs(p, what):
    cli.check_exit(p, OK, what)
    return cli.json_of(p.stdout, what) or {}


got = outputs(cli.run("run", "--json", "-q", plan, "--input", "n1/x=4", "--input", "n2/scale=1.5"), "--input")
cli.check(got == {"n1/triple": {"y": 12}, "n2/double": {"z": 3.0}}, "--input: each run reads its feeds", got)

# An integer fed to a double input becomes a double.
got = outputs(cli.run("run", "--json", "-q", plan, "--input", "n1/x=-2", "--input", "n2/scale=2"), "int to double")
cli.check(got.get("n2/double") == {"z": 4.0} and type(got["n2/double"]["z"]) is float, "an int feeds a double", got)

inputs = cli.temp("inputs.json", json.dumps({"n1/x": 7, "n2/scale": 0.25, "n2/label": "seven"}))
got = outputs(cli.run("run", "--json", "-q", plan, "--inputs", inputs), "--inputs FILE")
cli.check(got == {"n1/triple": {"y": 21}, "n2/double": {"z": 0.5}}, "--inputs: a JSON object of feeds", got)

# Sparse: refused before it is read.
big = cli.temp("big.json", "{}")
os.truncate(big, 300 << 20)

bad = [
    (["--input", "n2/scale=1"], 'input "n1/x" is required and was not fed (int64)'),
    (["--input", "n1/x=\"four\"", "--input", "n2/scale=1"], 'feed "n1/x": expected int64, got string'),
    (["--input", "n1/x=1", "--input", "n2/scale=1", "--input", "n3/x=1"],
     'feed "n3/x": the group declares no such input (none on node "n3")'),
    (["--input", "n1/x=1", "--input", "n2/scale=1", "--input", "n1/y=1"],
     'feed "n1/y": the group declares no such input (on node "n1": "x")'),
    (["--input", "n1/x=1", "--input", "n2/scale=1", "--input", "n1/x=2"], 'feed "n1/x": fed twice'),
    (["--input", "n1/x"], '--input "n1/x": expected node/blob=JSON'),
    (["--input", "n1/x=four"], '--input "n1/x=four": '),
    (["--input", "x=1"], 'a feed is named "node/blob", got "x"'),
    (["--inputs", cli.temp("list.json", "[1, 2]")], "expected an object"),
    (["--inputs", cli.temp("absent-dir/none.json")],
     f'cannot open inputs file "{cli.temp("absent-dir/none.json")}": No such file or directory'),
    (["--inputs", cli.tmp.name], f'cannot read inputs file "{cli.tmp.name}": it is a directory'),
    (["--inputs", "/dev/zero"],
     'inputs file "/dev/zero" holds more than 268435456 bytes (taskgroup::max_plan_size, 256 MiB)'),
    (["--inputs", big], f'inputs file "{big}" is 314572800 bytes, more than 268435456 (taskgroup::max_plan_size'),
]
for args, message in bad:
    p = cli.run("run", "-q", plan, *args)
    cli.check_exit(p, USAGE, " ".join(args))
    cli.check(message in p.stderr, f"{' '.join(args)}: says {message!r}", p.stderr)
    cli.check(p.stdout == "", f"{' '.join(args)}: nothing on stdout", p.stdout)

# The argument is shown with its control characters escaped: an ESC in it
# does not reach the terminal.
p = cli.run("run", "-q", plan, "--input", "n1/x\x1b[31m")
cli.check_exit(p, USAGE, "--input with an ESC")
cli.check('--input "n1/x\\u001B[31m": expected node/blob=JSON' in p.stderr and "\x1b" not in p.stderr,
          "--input with an ESC: shown escaped", p.stderr)

# A value that does not parse: where, in the value, and a hint on JSON;
# any other error without the hint.
hint = " (the value is JSON: quote a string, e.g. '\"text\"')"
for value, message in [("four", "line 1, column 2: syntax error"), ("[1, 2,]", "line 1, column 7: syntax error"),
                       ('{"a": 1, "a": 2}', 'line 1, column 10: duplicate key "a"')]:
    p = cli.run("run", "-q", plan, "--input", "n2/scale=1", "--input", f"n1/x={value}")
    cli.check_exit(p, USAGE, f"--input n1/x={value}")
    cli.check(p.stderr == f'taskgroup: --input "n1/x={value}": {message}{hint}\n',
              f"--input n1/x={value}: the place in the value, and the hint", p.stderr)
for args, message in [
    (["--input", "n1/x=null"], '--input "n1/x=null": /: an argument is a bool, number, string or list, got null'),
    (["--input", "n1/x=[1, 2.5]"], '--input "n1/x=[1, 2.5]": /1: expected an integer like the list\'s first element'),
    (["--input", "x=1"], '--input "x=1": a feed is named "node/blob", got "x"'),
    (["--input", 'n1/x="four"'], 'feed "n1/x": expected int64, got string'),
    (["--input", "n1/y=1"], 'feed "n1/y": the group declares no such input'),
]:
    p = cli.run("run", "-q", plan, "--input", "n2/scale=1", *args)
    cli.check_exit(p, USAGE, " ".join(args))
    cli.check(message in p.stderr and "quote a string" not in p.stderr,
              f"{' '.join(args)}: says {message!r}, without the hint on JSON", p.stderr)

# Node and blob names may hold "/": a feed's name is the one declared
# input it spells ("p/q/r" is node "p/q", blob "r"); one that spells two is
# ambiguous, one that spells none is split at its first "/".
slash = cli.plan("slash_inputs.json")
got = outputs(cli.run("run", "--json", "-q", slash, "--input", "p/q/r=5"), "--input p/q/r")
cli.check(got.get("p/q/copy") == {"out": 5}, "a node name with a slash: its input is fed", got)
got = outputs(cli.run("run", "--json", "-q", slash, "--inputs", cli.temp("slash.json", '{"p/q/r": 6}')),
              "--inputs {p/q/r}")
cli.check(got.get("p/q/copy") == {"out": 6}, "a node name with a slash: fed from a file", got)
ambiguous = 'feed "a/b/c" is ambiguous: it names node "a", blob "b/c" and node "a/b", blob "c"'
for args, message in [
    (["--input", "a/b/c=1"], '--input "a/b/c=1": ' + ambiguous),
    (["--inputs", cli.temp("ambiguous.json", '{"a/b/c": 1}')], "/a~1b~1c: " + ambiguous),
    (["--input", "p/q/s=1"], 'feed "p/q/s": the group declares no such input (none on node "p")'),
]:
    p = cli.run("run", "-q", slash, "--input", "p/q/r=1", *args)
    cli.check_exit(p, USAGE, f"slash_inputs.json {' '.join(args)}")
    cli.check(message in p.stderr, f"slash_inputs.json {' '.join(args)}: says {message!r}", p.stderr)
    cli.check(p.stdout == "", f"slash_inputs.json {' '.join(args)}: nothing on stdout", p.stdout)

# fmt writes the inputs back; the formatted plan runs the same.
p = cli.run("fmt", plan)
cli.check_exit(p, OK, "fmt inputs.json")
formatted = cli.json_of(p.stdout, "fmt output") or {}
cli.check(formatted.get("inputs") == [
    {"node": "n1", "blob": "x", "type": "int64"},
    {"node": "n2", "blob": "scale", "type": "double"},
    {"node": "n2", "blob": "label", "type": "string", "required": False},
], "fmt keeps the inputs", formatted.get("inputs"))
again = cli.temp("formatted.json", p.stdout)
got = outputs(cli.run("run", "--json", "-q", again, "--input", "n1/x=1", "--input", "n2/scale=1"), "formatted")
cli.check(got == {"n1/triple": {"y": 3}, "n2/double": {"z": 2.0}}, "the formatted plan runs the same", got)

cli.done()
