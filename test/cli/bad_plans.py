"""Plan errors: exit 2 and `taskgroup: <file>: <JSON pointer>: <what>`."""
from cli_support import Cli, USAGE

cli = Cli()

NET = '{"name": "n", "ops": [{"type": "ConstantFill", "outputs": ["x"], "args": {"value": 1}}]}'
cases = [
    ("both", '{"taskgroup_plan": 1, "nets": [%s], "tasks": [{"name": "t", "step": '
             '{"name": "s", "nets": ["n"], "substeps": [{"nets": ["n"]}]}}]}' % NET,
     '/tasks/0/step: both "nets" and "substeps"'),
    ("nested_both", '{"taskgroup_plan": 1, "nets": [%s], "tasks": [{"step": {"substeps": '
                    '[{"name": "ok", "nets": ["n"]}, {"nets": ["n"], "substeps": []}]}}]}' % NET,
     '/tasks/0/step/substeps/1: both "nets" and "substeps"'),
    ("unknown_op", '{"taskgroup_plan": 1, "nets": [{"name": "n", "ops": [{"type": "Ad", "inputs": ["a", "b"]}]}]}',
     '/nets/0/ops/0: unknown operator type "Ad"'),
    ("unknown_key", '{"taskgroup_plan": 1, "tasks": [{"name": "t", "stepp": {}}]}',
     '/tasks/0/stepp: unknown key "stepp"'),
    ("unknown_net", '{"taskgroup_plan": 1, "tasks": [{"step": {"nets": ["nope"]}}]}',
     '/tasks/0/step/nets/0: unknown net "nope"'),
    ("no_version", '{"tasks": []}', '/: not a taskgroup plan (no "taskgroup_plan" version)'),
    ("bad_version", '{"taskgroup_plan": 7}', '/taskgroup_plan: unsupported plan version 7'),
    ("bad_iter", '{"taskgroup_plan": 1, "nets": [%s], "tasks": [{"step": {"nets": ["n"], "num_iter": -1}}]}' % NET,
     '/tasks/0/step/num_iter: must be >= 0, got -1'),
    ("iter_and_stop", '{"taskgroup_plan": 1, "nets": [%s], "tasks": [{"step": {"nets": ["n"], "num_iter": 2, '
                      '"should_stop_blob": "x"}}]}' % NET,
     '/tasks/0/step: both "num_iter" and "should_stop_blob"'),
    ("bad_type", '{"taskgroup_plan": 1, "tasks": [{"name": 5}]}', '/tasks/0/name: expected a string, got integer'),
    ("group_name_type", '{"taskgroup_plan": 1, "name": true}', '/name: expected a string, got bool'),
    ("group_name_long", '{"taskgroup_plan": 1, "name": "%s"}' % ("n" * 201),
     '/name: must be at most 200 bytes (taskgroup::max_group_name_size), got 201'),
    ("group_name_control", '{"taskgroup_plan": 1, "name": "a\\tb"}',
     '/name: must hold no control characters, got "a\\u0009b"'),
    ("report_no_task", '{"taskgroup_plan": 1, "nets": [%s], "report_steps": [{"node": "x", "step": '
                       '{"nets": ["n"]}}]}' % NET,
     '/report_steps/0: report step on node "x", which has no task'),
    ("syntax", '{\n  "taskgroup_plan": 1,\n  "tasks": [,]\n}', 'line 3, column 13: syntax error'),
    ("dup_net", '{"taskgroup_plan": 1, "nets": [%s, %s]}' % (NET, NET), '/nets/1/name: duplicate net name "n"'),
    ("empty_list", '{"taskgroup_plan": 1, "nets": [{"name": "n", "ops": [{"type": "ConstantFill", '
                   '"outputs": ["x"], "args": {"value": []}}]}]}',
     '/nets/0/ops/0/args/value: an empty list needs a type'),
]
for name, text, expected in cases:
    path = cli.temp(name + ".json", text)
    for sub in ["run", "check"]:
        p = cli.run(sub, path)
        cli.check_exit(p, USAGE, f"{sub} {name}")
        cli.check(p.stderr.startswith(f"taskgroup: {path}: {expected}"), f"{sub} {name}: error {expected!r}",
                  p.stderr)
        cli.check(p.stdout == "", f"{sub} {name}: nothing on stdout", p.stdout)

cli.done()
