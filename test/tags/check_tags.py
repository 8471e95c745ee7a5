#!/usr/bin/env python3
"""Every Catch2 test case of the unit and model test binaries runs under some meson test.

The unit tests run as one meson test per Catch2 tag (test/meson.build's
tag list, plus `model` and the hidden `.plan_corpus`): a test case whose
tags are all outside that list compiles, and never runs. Usage:
check_tags.py <source root>. Exit status 1 names each such test case.
"""
import pathlib
import re
import sys


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    build = (root / 'test' / 'meson.build').read_text()
    listed = re.search(r"foreach tag : \[(.*?)\]", build, re.S)
    if listed is None:
        print('test/meson.build: no "foreach tag : [...]" list of unit test tags')
        return 1
    run = {t.strip().strip("'") for t in listed.group(1).split(',') if t.strip()}
    run |= set(re.findall(r"args: \['\[(\.?[a-z_]+)\]'", build))
    files = []
    for listing in ("test_sources", "model_sources"):  # the unit tests' and the model test's
        sources = re.search(listing + r" = files\((.*?)\)", build, re.S)
        files += re.findall(r"'([^']+\.cpp)'", sources.group(1)) if sources else []
    bad = []
    for name in files:
        text = (root / 'test' / name).read_text()
        for m in re.finditer(r'TEST_CASE\(\s*"((?:[^"\\]|\\.)*)"\s*,\s*"([^"]*)"', text, re.S):
            tags = set(re.findall(r'\[([^\]]+)\]', m.group(2)))
            if not tags & run:
                bad.append(f'test/{name}: "{m.group(1)}" {m.group(2)}: no meson test runs any of its tags')
    for b in bad:
        print(b)
    if not files:
        print('test/meson.build: no test_sources found')
        return 1
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
