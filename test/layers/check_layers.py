#!/usr/bin/env python3
"""Checks the shape of lib/: its layers, its includes, its sizes.

  - Layers: the folders of lib/, in the order of the table in lib/README.md
    (bottom up). A file includes headers of its own layer and of the layers
    below, never of one above; so the folders form no cycle. A public
    header <taskgroup/x.hpp> belongs to the layer of the folder holding the
    only x.cpp (none, or several: it belongs to no layer and is skipped),
    and its own includes count as that layer's.
  - Includes of the library's own headers are rooted at lib/
    (`#include "ops/net_run.hpp"`): never relative (`"../x.hpp"`,
    `"x.hpp"` beside the file).
  - No file in lib/ over MAX_FILE_LINES lines; no function over
    MAX_FUNCTION_LINES lines, from its signature's last line to its closing
    brace (a brace-matching reading of the source, comments and literals
    left out: it knows namespaces, classes and functions, which is enough
    for this code base's style).

Usage: check_layers.py ROOT      exit 1 with one line per finding
       check_layers.py --self-test
"""
import os
import re
import sys
import tempfile

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80

INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]', re.M)


def layer_order(root):
    text = open(os.path.join(root, "lib", "README.md"), encoding="utf-8").read()
    order = re.findall(r"^\|\s*`([a-z_]+)/`\s*\|", text, re.M)
    if not order:
        raise SystemExit("lib/README.md: no layer table (rows like | `core/` | ... |)")
    return order


def lib_files(root):
    out = []
    for dirpath, _, files in os.walk(os.path.join(root, "lib")):
        for f in files:
            if f.endswith((".cpp", ".hpp", ".h")):
                out.append(os.path.relpath(os.path.join(dirpath, f), root))
    return sorted(out)


def public_headers(root):
    """Public headers, relative to include/ (taskgroup/x.hpp)."""
    base = os.path.join(root, "include")
    out = []
    for dirpath, _, files in os.walk(os.path.join(base, "taskgroup")):
        for f in files:
            if f.endswith(".hpp"):
                out.append(os.path.relpath(os.path.join(dirpath, f), base))
    return sorted(out)


def strip_code(text):
    """The text with comments, string and character literals blanked
    (newlines kept, so line numbers hold)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + "".join("\n" for ch in text[i:j] if ch == "\n"))
            i = j
        elif c in "\"'":
            # A digit separator (1'000) is no character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum():
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    # Preprocessor lines (with their continuations) are no code here.
    return re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: "\n" * m.group(0).count("\n"), "".join(out), flags=re.M)


SCOPE = re.compile(r"\b(namespace|class|struct|union|enum)\b")


def long_functions(path, text, limit):
    """(line, name, lines) of every function longer than `limit` lines."""
    code = strip_code(text)
    found = []
    # A stack of scopes: 'scope' (namespace, class...) or 'function' or
    # 'block' (braces inside a function, or an initializer).
    stack = []
    head_start = 0  # where the text before the next brace begins
    line = 1
    fn_start = None
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c in ";":
            if not stack or stack[-1][0] == "scope":
                head_start = i + 1
        elif c == "{":
            head = code[head_start:i]
            inside_fn = any(k == "function" for k, _, _ in stack)
            if inside_fn:
                kind = "block"
            elif SCOPE.search(head) and "(" not in head.split("{")[-1].split("=")[0]:
                kind = "scope"
            elif "(" in head and ")" in head and not re.search(r"=\s*$", head.strip()):
                kind = "function"
            else:
                kind = "block"
            name = ""
            if kind == "function":
                m = re.findall(r"([~\w:<>]+)\s*\(", head)
                name = m[0] if m else "?"
            stack.append((kind, line, name))
            head_start = i + 1
        elif c == "}":
            if stack:
                kind, start, name = stack.pop()
                if kind == "function" and line - start + 1 > limit:
                    found.append((start, name, line - start + 1))
            if not stack or stack[-1][0] == "scope":
                head_start = i + 1
    return found


def check(root):
    findings = []
    order = layer_order(root)
    rank = {name: k for k, name in enumerate(order)}
    files = lib_files(root)
    for f in files:
        folder = f.split(os.sep)[1]
        if folder not in rank and len(f.split(os.sep)) > 2:
            findings.append(f"{f}: folder lib/{folder}/ is not a layer of lib/README.md")
    # The layer of each public header: the folder of the only x.cpp.
    cpp_by_name = {}
    for f in files:
        if f.endswith(".cpp"):
            cpp_by_name.setdefault(os.path.basename(f)[:-4], []).append(f)
    header_layer = {}
    for h in public_headers(root):
        name = os.path.basename(h)[:-4]
        cpps = cpp_by_name.get(name, [])
        if len(cpps) == 1:
            header_layer[h] = cpps[0].split(os.sep)[1]

    def layer_of_include(kind, target):
        if kind == "<":
            return header_layer.get(target)
        first = target.split("/")[0]
        return first if first in rank else None

    sources = [(f, f.split(os.sep)[1]) for f in files if len(f.split(os.sep)) > 2]
    sources += [(os.path.join("include", h), layer) for h, layer in header_layer.items()]
    for f, layer in sources:
        if layer not in rank:
            continue
        text = open(os.path.join(root, f), encoding="utf-8").read()
        for m in INCLUDE.finditer(text):
            kind, target = m.group(1), m.group(2)
            line = text.count("\n", 0, m.start()) + 1
            if kind == '"' and f.startswith("lib"):
                if target.startswith(".") or "/" not in target:
                    findings.append(f"{f}:{line}: include \"{target}\" is not rooted at lib/")
                    continue
                if not os.path.exists(os.path.join(root, "lib", target)):
                    findings.append(f"{f}:{line}: include \"{target}\" names no file under lib/")
                    continue
            to = layer_of_include(kind, target)
            if to is None or to == layer:
                continue
            if rank[to] > rank[layer]:
                findings.append(f"{f}:{line}: layer {layer}/ includes {target} of layer {to}/, above it")
    for f in files:
        text = open(os.path.join(root, f), encoding="utf-8").read()
        lines = text.count("\n")
        if lines > MAX_FILE_LINES:
            findings.append(f"{f}: {lines} lines, more than {MAX_FILE_LINES}")
        for start, name, n in long_functions(f, text, MAX_FUNCTION_LINES):
            findings.append(f"{f}:{start}: function {name} is {n} lines, more than {MAX_FUNCTION_LINES}")
    return findings


def self_test():
    with tempfile.TemporaryDirectory() as root:
        def write(path, text):
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as out:
                out.write(text)
        write("lib/README.md", "| `low/` | x |\n| `high/` | y |\n")
        write("include/taskgroup/thing.hpp", "#pragma once\n#include <taskgroup/top.hpp>\n")
        write("include/taskgroup/top.hpp", "#pragma once\n")
        write("lib/low/thing.cpp", '#include <taskgroup/thing.hpp>\n#include "high/up.hpp"\n#include "near.hpp"\n'
              '#include "../high/up.hpp"\n#include "low/missing.hpp"\n')
        write("lib/high/up.hpp", "#pragma once\n")
        write("lib/high/top.cpp", '#include "low/fine.hpp"\n')
        write("lib/low/fine.hpp", "#pragma once\n")
        body = "\n".join(f"  x += {k};" for k in range(85))
        write("lib/low/long.cpp", "namespace a {\nstruct s {\n  int f() {\n    return 1;\n  }\n};\n"
              "int g(int x) {\n" + body + "\n  auto l = [] { return '{'; };\n  return x;\n}\n"
              'const char* t = "}";\nint h() { return 0; }\n}  // namespace a\n' + "//\n" * 420)
        found = check(root)
        expected = [
            "lib/low/thing.cpp:2: layer low/ includes high/up.hpp of layer high/, above it",
            'lib/low/thing.cpp:3: include "near.hpp" is not rooted at lib/',
            'lib/low/thing.cpp:4: include "../high/up.hpp" is not rooted at lib/',
            'lib/low/thing.cpp:5: include "low/missing.hpp" names no file under lib/',
            "include/taskgroup/thing.hpp:2: layer low/ includes taskgroup/top.hpp of layer high/, above it",
            "lib/low/long.cpp:7: function g is 89 lines, more than 80",
            "lib/low/long.cpp: 518 lines, more than 500",
        ]
        missing = [e for e in expected if e not in found]
        extra = [f for f in found if f not in expected]
        for e in missing:
            print("self-test: not found:", e)
        for e in extra:
            print("self-test: unexpected:", e)
        return 1 if missing or extra else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    findings = check(sys.argv[1])
    for f in findings:
        print(f)
    print(f"{len(findings)} findings")
    sys.exit(1 if findings else 0)


if __name__ == "__main__":
    main()
