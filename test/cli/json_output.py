"""`run`'s outputs on stdout: with --json exactly one JSON object {task:
{blob: value}} for every run that started, else a table whose values show
control characters escaped."""
import re

from cli_support import Cli, OK, RUN_FAILED, TIMEOUT, USAGE

cli = Cli()

p = cli.run("run", "--json", cli.shipped("seed.json"))
cli.check_exit(p, OK, "run --json seed.json")
seed = cli.json_of(p.stdout, "seed --json")
cli.check(seed == {
    "local/s1": {"note": "from s1 on local"},
    "local/s2": {"s2_got": "from s1 on local"},
    "n2/s3": {"note": "from s3 on n2"},
    "n1/s4": {"note": "from s4 on n1"},
    "n2/s5": {"s5_got": "from s3 on n2"},
}, "seed: tasks of a node share blobs, nodes do not", seed)
cli.check(list(seed or {}) == ["local/s1", "local/s2", "n2/s3", "n1/s4", "n2/s5"], "seed: tasks in group order")
cli.check("task local/s1 started" in p.stderr, "--json without --quiet: progress stays on stderr", p.stderr)

p = cli.run("run", "--json", "--quiet", "--threads", "2", cli.shipped("pipeline.json"))
cli.check_exit(p, OK, "run --json pipeline.json")
cli.check(p.stderr == "", "--quiet: nothing on stderr (not even Print lines)", p.stderr)
pipe = cli.json_of(p.stdout, "pipeline --json")
cli.check(pipe == {"local/produce": {}, "local/consume": {"total": 420, "consumed": 40}},
          "pipeline: 2 producers x 20 items, sum 2 * (1 + ... + 20)", pipe)

# offload.json: four offloaded Hash tasks beside a heartbeat on one node.
p = cli.run("run", "--json", "--quiet", cli.shipped("offload.json"))
cli.check_exit(p, OK, "run --json offload.json")
off = cli.json_of(p.stdout, "offload --json") or {}


def fnv1a_repeated(text, rounds):
    h = 0xcbf29ce484222325
    data = text.encode()
    for _ in range(rounds):
        for b in data:
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h - (1 << 64) if h >= 1 << 63 else h


# (Its 4,000,000 rounds would take minutes in a Python model: hash.json
# checks the values on short inputs.)
cli.check(off.get("cpu/heartbeat") == {"beats": 20}, "offload: the heartbeat ran its 20 beats", off)
cli.check(sorted(off) == ["cpu/hash0", "cpu/hash1", "cpu/hash2", "cpu/hash3", "cpu/heartbeat"],
          "offload: every task reported", off)
values = [off.get(f"cpu/hash{i}", {}).get(f"h{i}") for i in range(4)]
cli.check(all(isinstance(v, int) for v in values) and len(set(values)) == 4,
          "offload: four distinct int64 hashes", values)

p = cli.run("run", "--json", "--quiet", cli.plan("hash.json"))
cli.check_exit(p, OK, "run --json hash.json")
got = (cli.json_of(p.stdout, "hash --json") or {}).get("local/hash", {})
cli.check(got == {"h": fnv1a_repeated("taskgroup", 300), "one": fnv1a_repeated("a", 1)},
          "hash.json: Hash is FNV-1a of the input repeated `rounds` times", got)

p = cli.run("run", "--json", "-q", cli.plan("types.json"))
cli.check_exit(p, OK, "run --json types.json")
values = (cli.json_of(p.stdout, "types --json") or {}).get("local/values", {})
expected = {"i": -7, "d": 2.5, "whole": 3.0, "b": True, "s": 'a "quoted"\nline', "li": [1, 2, 3],
            "ld": [0.5, 1.5], "lb": [True, False], "ls": ["a", "b"], "empty": [], "q": "queue(0/2)",
            "x": 10, "y": 20}
cli.check(values == expected, "types: JSON values for every blob type, display strings for others", values)
cli.check(type(values.get("whole")) is float and type(values.get("i")) is int, "types: doubles stay doubles")
cli.check('"whole": 3.0' in p.stdout and "E0" not in p.stdout, "types: doubles are written plainly", p.stdout)

# The table: control characters in values (here; in names, a plan refuses
# them) are shown escaped: never sent to the terminal, never cutting a row.
p = cli.run("run", "-q", cli.plan("control_chars.json"))
cli.check_exit(p, OK, "run control_chars.json")
table = ("task          blob  value\n"
         "local/values  s     nul\\u0000esc\\u001B[31mred\\u0007bel\\u007Fdel\\u009Bc1\\n\\t\\r\\ \"q\"\n"
         "local/values  ls    [p\\u0000q, \\u001B]0;title\\u0007]\n"
         "local/values  long  " + "\u00e9" * 60 + "\n")
cli.check(p.stdout == table, "table: control characters escaped, rows whole", repr(p.stdout))
cli.check(re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", p.stdout) is None, "table: no control character but newlines",
          repr(p.stdout))

# A run that fails or times out prints its object too (a task that did not
# succeed has no outputs), its error on stderr.
p = cli.run("run", "--json", "-q", cli.shipped("fails.json"))
cli.check_exit(p, RUN_FAILED, "run --json fails.json")
cli.check(cli.json_of(p.stdout, "fails --json") == {"worker/train": {}, "local/wait": {}},
          "failed run: the object, every task", p.stdout)
cli.check("checksum mismatch (this plan fails on purpose)" in p.stderr, "failed run: the error on stderr", p.stderr)
p = cli.run("run", "--json", "-q", "--timeout", "0.2", cli.plan("long_sleep.json"))
cli.check_exit(p, TIMEOUT, "run --json --timeout long_sleep.json")
cli.check(cli.json_of(p.stdout, "timeout --json") == {"local/sleeper": {}, "n1/counter": {}},
          "timed-out run: the object, every task", p.stdout)
cli.check("run timed out after 200 ms" in p.stderr, "timed-out run: the error on stderr", p.stderr)
# Feeds that do not match the plan's inputs: nothing ran, nothing on stdout.
p = cli.run("run", "--json", "-q", cli.shipped("inputs.json"), "--input", "n1/x=\"four\"", "--input", "n2/scale=1")
cli.check_exit(p, USAGE, "run --json with a feed of the wrong type")
cli.check(p.stdout == "", "a feed of the wrong type: nothing on stdout", p.stdout)

p = cli.run("run", "--json", "-q", "--policy", "gather", cli.plan("gather.json"))
cli.check_exit(p, RUN_FAILED, "run --json --policy gather")
cli.check(cli.json_of(p.stdout, "gather --json") == {"local/good": {"answer": 42}, "n1/bad": {}},
          "gather: every task, outputs of the ones that succeeded", p.stdout)

cli.done()
