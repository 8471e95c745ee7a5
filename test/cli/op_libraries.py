"""Op libraries (--load) and `taskgroup ops`.

The example library (examples/op_library/string_ops.cpp) runs
examples/plans/strings.json through run, check, graph and fmt; every bad
library is refused with exit status 2 and a message naming the file (and the
operator); `ops --json` lists the registry in its documented shape, and its
defaults are the ones the kernels use.
"""
import json
import os

from cli_support import Cli, OK, USAGE, SHIPPED

cli = Cli()
lib = os.environ["STRING_OPS"]
bad = {name: os.environ["BAD_" + name.upper()] for name in ["clash", "no_entry", "throws", "wrong_abi"]}
plan = cli.shipped("strings.json")

# --- the example library --------------------------------------------------------
p = cli.run("run", "--load", lib, "--json", "-q", plan)
if cli.check_exit(p, OK, "run --load string_ops strings.json"):
    out = cli.json_of(p.stdout, "run --json")
    cli.check(out == {"local/shout": {"loud": "HELLO", "echo": "HELLO HELLO HELLO"}, "local/chant": {"chant": "LALA"}},
              "strings.json: Upper and Repeat computed the outputs", out)
p = cli.run("run", "-q", plan)
cli.check_exit(p, USAGE, "run strings.json without --load")
cli.check('unknown operator type "Upper"' in p.stderr, "without --load: the unknown op is named", p.stderr)

p = cli.run("check", "--load", lib, plan)
cli.check_exit(p, OK, "check --load")
p = cli.run("graph", "--load", lib, plan)
cli.check_exit(p, OK, "graph --load")
cli.check("Upper" in p.stdout and p.stdout.startswith("digraph"), "graph --load: DOT naming the loaded op", p.stdout)
p = cli.run("fmt", "--load", lib, plan)
cli.check_exit(p, OK, "fmt --load")
cli.check('"type": "Repeat"' in p.stdout, "fmt --load: the plan is written back", p.stdout)
# --load after the plan, and repeated with another library.
p = cli.run("run", "-q", plan, "--load", lib)
cli.check_exit(p, OK, "run PLAN --load LIB (option after the plan)")

# --- bad libraries: exit 2, the file (and the operator) named -------------------
def refused(args, what, *needles):
    p = cli.run(*args)
    cli.check_exit(p, USAGE, what)
    for needle in needles:
        cli.check(needle in p.stderr, f"{what}: message has {needle!r}", p.stderr)
    cli.check(p.stderr.startswith("taskgroup: op library ") and p.stdout == "", f"{what}: one error on stderr",
              (p.stdout, p.stderr))

missing = cli.temp("missing.so")
refused(["run", "--load", missing, plan], "a missing library", f'op library "{missing}": no such file')
text = cli.temp("text.so", "not a shared object\n")
refused(["run", "--load", text, plan], "a file that is not a shared object", f'op library "{text}": cannot load: ')
refused(["run", "--load", bad["no_entry"], plan], "a library without the entry point",
        f'op library "{bad["no_entry"]}": not a taskgroup op library (no taskgroup_op_library entry point')
refused(["run", "--load", bad["wrong_abi"], plan], "a library of another ABI version",
        f'op library "{bad["wrong_abi"]}": built for op library ABI version 99, this taskgroup loads version 2')
refused(["run", "--load", bad["clash"], plan], "a library registering a built-in's type",
        f'op library "{bad["clash"]}": operator type "Add" is already registered')
refused(["run", "--load", lib, "--load", lib, plan], "the same library twice",
        f'op library "{lib}": operator type "Repeat" is already registered')
refused(["run", "--load", bad["throws"], plan], "a library whose registration throws",
        f'op library "{bad["throws"]}": registration threw: this library refuses to load')
for sub in [["check", plan], ["graph", plan], ["fmt", plan], ["ops"]]:
    refused([*sub, "--load", bad["no_entry"]], f"{sub[0]} --load of a bad library", "not a taskgroup op library")


# --- taskgroup ops ---------------------------------------------------------------
def listing(*load):
    args = ["ops", "--json"]
    for path in load:
        args += ["--load", path]
    p = cli.run(*args)
    if not cli.check_exit(p, OK, f"ops --json {load}"):
        return {}
    doc = cli.json_of(p.stdout, "ops --json")
    return {op["type"]: op for op in doc["operators"]} if doc else {}


ops = listing()
keys = {"type", "doc", "inputs", "outputs", "async", "offload", "any_args", "library", "arguments"}
cli.check(all(set(op) == keys for op in ops.values()), "ops --json: every entry has the documented keys",
          [sorted(op) for op in ops.values() if set(op) != keys])
cli.check(list(ops) == sorted(ops), "ops --json: sorted by type", list(ops))
cli.check("Upper" not in ops and all(op["library"] is None for op in ops.values()),
          "ops: without --load, only built-ins", list(ops))
cli.check(ops.get("Sleep", {}).get("async") is True and ops.get("Add", {}).get("async") is False,
          "ops: Sleep is async, Add is not", (ops.get("Sleep"), ops.get("Add")))
cli.check(ops.get("Hash", {}).get("offload") is True and ops.get("Add", {}).get("offload") is False,
          "ops: Hash is offloaded, Add is not", (ops.get("Hash"), ops.get("Add")))
cli.check(ops.get("Add", {}).get("inputs") == {"min": 2, "max": 2} and
          ops.get("Print", {}).get("inputs") == {"min": 1, "max": None}, "ops: arities (null: unbounded)",
          (ops.get("Add"), ops.get("Print")))
arg_keys = {"name", "kinds", "required", "default", "doc"}
cli.check(all(set(a) == arg_keys for op in ops.values() for a in op["arguments"]),
          "ops --json: every argument has the documented keys")
args = {a["name"]: a for a in ops.get("CreateCounter", {}).get("arguments", [])}
cli.check(args.get("init", {}).get("default") == 0 and args["init"]["kinds"] == ["int64"] and
          not args["init"]["required"], "ops: CreateCounter's init is an optional int64, default 0", args)
sleep_args = {a["name"]: a for a in ops.get("Sleep", {}).get("arguments", [])}
cli.check(sleep_args.get("ms", {}).get("required") is False and sleep_args["ms"]["default"] is None and
          sleep_args["ms"]["kinds"] == ["int64", "double"] and ops["Sleep"].get("inputs") == {"min": 0, "max": 1},
          "ops: Sleep's ms is an optional int64 or double, without default; its duration may be input 0",
          (sleep_args, ops.get("Sleep")))
queue_args = {a["name"]: a for a in ops.get("CreateQueue", {}).get("arguments", [])}
cli.check(queue_args.get("capacity", {}).get("required") is True and queue_args["capacity"]["kinds"] == ["int64"],
          "ops: CreateQueue's capacity is a required int64", queue_args)

# Every op of every shipped plan is listed, with an arity and arguments that
# admit its use there.
loaded = listing(lib)
for name in SHIPPED + ["strings.json"]:
    with open(cli.shipped(name), encoding="utf-8") as f:
        doc = json.load(f)
    for net in doc.get("nets", []):
        for i, op in enumerate(net["ops"]):
            where = f"{name}: net {net['name']!r} op #{i} ({op['type']})"
            schema = loaded.get(op["type"])
            if not cli.check(schema is not None, f"{where}: listed by ops"):
                continue
            n_in, bounds = len(op.get("inputs", [])), schema["inputs"]
            cli.check(bounds["min"] <= n_in and (bounds["max"] is None or n_in <= bounds["max"]),
                      f"{where}: its input count is within the listed bounds", (n_in, bounds))
            declared = {a["name"] for a in schema["arguments"]}
            cli.check(schema["any_args"] or set(op.get("args", {})) <= declared,
                      f"{where}: its arguments are listed", (sorted(op.get("args", {})), sorted(declared)))
            required = {a["name"] for a in schema["arguments"] if a["required"]}
            cli.check(required <= set(op.get("args", {})), f"{where}: it sets the required arguments", required)

cli.check(loaded.get("Upper", {}).get("library") == lib and loaded.get("Repeat", {}).get("library") == lib,
          "ops --load: the loaded ops name their library", (loaded.get("Upper"), loaded.get("Repeat")))
cli.check(set(loaded) == set(ops) | {"Upper", "Repeat"}, "ops --load: built-ins plus the library's ops",
          sorted(set(loaded) ^ set(ops)))


# The listed defaults are the kernels' own: an op without the argument gives
# what the op with the listed default gives.
def one_op(type_, inputs, args):
    net_ops = [{"type": "ConstantFill", "inputs": [], "outputs": [f"in{i}"], "args": {"value": v}}
               for i, v in enumerate(inputs)]
    net_ops.append({"type": type_, "inputs": [f"in{i}" for i in range(len(inputs))], "outputs": ["out"],
                    "args": args})
    return json.dumps({"taskgroup_plan": 1, "nodes": [{"name": "local"}],
                       "tasks": [{"name": "t", "node": "local", "step": {"name": "t", "nets": ["n"]},
                                  "outputs": ["out"]}],
                       "nets": [{"name": "n", "ops": net_ops}]})


for type_, arg, inputs in [("Repeat", "times", ["ab"]), ("Repeat", "separator", ["ab"]),
                           ("Concat", "separator", ["a", "b"])]:
    default = {a["name"]: a for a in loaded.get(type_, {}).get("arguments", [])}.get(arg, {}).get("default")
    results = []
    for i, args in enumerate([{}, {arg: default}]):
        path = cli.temp(f"default_{type_}_{arg}_{i}.json", one_op(type_, inputs, args))
        p = cli.run("run", "--load", lib, "--json", "-q", path)
        cli.check_exit(p, OK, f"{type_} with {args}")
        results.append(cli.json_of(p.stdout, f"{type_} with {args}") if p.returncode == OK else None)
    cli.check(results[0] is not None and results[0] == results[1],
              f"{type_}: the listed default of {arg!r} ({default!r}) is what the kernel uses", results)

# The text listing says the same.
p = cli.run("ops", "--load", lib)
cli.check_exit(p, OK, "ops (text)")
cli.check(f"Repeat  1 -> 1  (from {lib})" in p.stdout, "ops text: arity and library", p.stdout[:2000])
cli.check("    times  int64, default 2  how many copies (0 to 1000000)" in p.stdout,
          "ops text: an argument with its default", p.stdout[:2000])
cli.check("Sleep  0..1 -> 0, async" in p.stdout and "    ms  int64 or double, optional" in p.stdout,
          "ops text: async and an optional argument", p.stdout[:2000])
cli.check("    capacity  int64, required" in p.stdout, "ops text: a required argument", p.stdout[:2000])
cli.check("Print  1+ -> 0" in p.stdout, "ops text: an unbounded arity", p.stdout[:2000])

# fmt in --help.
p = cli.run("--help")
cli.check_exit(p, OK, "--help")
for sub in ["run", "check", "graph", "fmt", "ops"]:
    cli.check(f"  {sub} " in p.stdout, f"--help lists {sub}", p.stdout)

cli.done()
