#!/usr/bin/env python3
"""Checks that the repository's text refers only to what the repository holds.

Usage:
  check_docs.py ROOT        check the source tree at ROOT
  check_docs.py --self-test check this checker on a made-up tree

Prints one line per finding, `path:line: what is wrong`, and exits 1 when
there is any (0 otherwise). The findings:

- a section sign (U+00A7) anywhere: sections of documents kept elsewhere;
- a reference to an issue by number ("issue 12", "issue #12");
- a mention of a `shared/` or `notes/` folder, or of a design document
  ("DESIGN"), none of which the repository holds;
- a mention of a `.md` file anywhere, or of a file under one of the
  repository's top-level folders (`lib/step/machine.hpp`) in prose
  (Markdown, and the comments of code), that does not exist, looked
  up from the mentioning file's folder and from the root (a bare file name
  may also be any tracked file of that name; `$dir/lib/x.hpp` and
  addresses are not mentions); with `#anchor`, the anchor must be a
  heading of that Markdown file, and a mention followed by a quoted title
  (`docs/x.md, "Title"`) must name one of its headings (`README, "Title"`
  is README.md's);
- in Markdown files, a relative link `[text](path)` or `[text](path#anchor)`
  whose file does not exist or whose anchor is not a heading there (GitHub's
  anchors: the heading's text lowercased, spaces turned into '-', every
  character but letters, digits, '-' and '_' dropped; a repeated heading
  gets '-1', '-2', ...), and `[text](#anchor)` within the file itself;
- README.md longer than 350 lines (it is the front page; the manual is in
  docs/).

The files checked are the tracked ones (`git ls-files`) when ROOT is a git
checkout, else every file below ROOT but build folders (`build*/`),
`.git/`, Python's caches and Meson's downloads (`subprojects/*/`); of
those, the text files: .md .hpp .cpp .h .py .build .txt .in .json .sh, and
every file of scripts/ and .ci/. This file is left out: its patterns
would find themselves. Python 3 and its standard library only.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata

TEXT_SUFFIXES = (".md", ".hpp", ".cpp", ".h", ".py", ".build", ".txt", ".in", ".json", ".sh")
SCRIPT_FOLDERS = ("scripts/", ".ci/")
README_MAX_LINES = 350
SELF = "test/docs/check_docs.py"
# Top-level folders a path mention may start with, besides those the tree has
# (a mention of a folder that was removed or renamed is still checked).
KNOWN_TOP = {"include", "lib", "test", "bench", "tools", "examples", "scripts", "docs", "packaging", "subprojects",
             ".ci"}

SECTION_SIGN = "\u00a7"
ISSUE_RE = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)
ELSEWHERE_RE = re.compile(r"(?<![\w.-])(?:\.\./)*(shared|notes)/")
DESIGN_RE = re.compile(r"\bDESIGN\b")
# A path-like token: letters, digits and . _ - / (and #anchor after a .md).
MD_MENTION_RE = re.compile(r"(?<![\w./$-])((?:\.{1,2}/)*[\w.-]+(?:/[\w.-]+)*\.md)(#[\w-]*)?")
# A file path under a top-level folder: folders, then a name with an extension.
PATH_MENTION_RE = re.compile(r"(?<![\w./$-])(\.?[\w-]+/(?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z]\w*)(?![\w/-])")
URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s)>\]]*")
TITLE_AFTER_RE = re.compile(r'^(?:,\s*|\s*\(\s*|\s+)"([^"\n]+)"')
README_TITLE_RE = re.compile(r'\bREADME(?:\.md)?(?:,\s*|\s*\(\s*|\s+)"([^"\n]+)"')
LINK_RE = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE_RE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING_RE = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR_RE = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)
FENCE_RE = re.compile(r"^ {0,3}(```|~~~)")


def slug(text):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link counts by its text
    text = text.strip().lower()
    out = []
    for ch in text:
        if ch == " ":
            out.append("-")
        elif ch in "-_" or unicodedata.category(ch)[0] in ("L", "N"):
            out.append(ch)
    return "".join(out)


def title_key(text):
    """A heading's text as a quoted title may name it."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return " ".join(text.replace("`", "").split()).lower()


def skipped(parent, name):
    """Folders a walk leaves out: git's, build folders, Python's caches and
    what Meson downloads for the wraps (subprojects/*/)."""
    if name in (".git", "__pycache__"):
        return True
    return (parent == "." and name.startswith("build")) or parent == "subprojects"


class Tree:
    def __init__(self, root):
        self.root = os.path.abspath(root)
        self._headings = {}
        self.files = self._list_files()
        self.by_name = {}
        for f in self.files:
            self.by_name.setdefault(f.rsplit("/", 1)[-1], f)
        tops = {f.split("/", 1)[0] for f in self.files if "/" in f}
        self.tops = tops | KNOWN_TOP

    def _list_files(self):
        if os.path.isdir(os.path.join(self.root, ".git")) or os.path.isfile(os.path.join(self.root, ".git")):
            try:
                # safe.directory: a checkout owned by another user is still listed.
                out = subprocess.run(["git", "-c", "safe.directory=*", "-C", self.root, "ls-files", "-z"], check=True,
                                     capture_output=True)
                names = [n for n in out.stdout.decode("utf-8", "replace").split("\0") if n]
                return sorted(n for n in names if os.path.isfile(os.path.join(self.root, n)))
            except (OSError, subprocess.CalledProcessError):
                pass
        found = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            rel = os.path.relpath(dirpath, self.root)
            dirnames[:] = sorted(d for d in dirnames if not skipped(rel, d))
            for name in filenames:
                found.append(os.path.normpath(os.path.join(rel, name)).replace(os.sep, "/"))
        return sorted(found)

    def is_text(self, rel):
        return rel.endswith(TEXT_SUFFIXES) or rel.startswith(SCRIPT_FOLDERS)

    def exists(self, rel):
        rel = os.path.normpath(rel)
        if rel.startswith(".."):
            return False
        return os.path.exists(os.path.join(self.root, rel))

    def headings(self, rel):
        """Anchors and title keys of Markdown file `rel` (root-relative)."""
        rel = os.path.normpath(rel).replace(os.sep, "/")
        if rel not in self._headings:
            anchors, titles, seen = set(), set(), {}
            try:
                with open(os.path.join(self.root, rel), encoding="utf-8", errors="replace") as f:
                    lines = f.read().split("\n")
            except OSError:
                lines = []
            fenced = None
            for line in lines:
                m = FENCE_RE.match(line)
                if m:
                    fenced = None if fenced == m.group(1) else (fenced or m.group(1))
                    continue
                if fenced:
                    continue
                for a in HTML_ANCHOR_RE.findall(line):
                    anchors.add(a)
                h = HEADING_RE.match(line)
                if not h:
                    continue
                s = slug(h.group(2))
                n = seen.get(s, 0)
                seen[s] = n + 1
                anchors.add(s if n == 0 else f"{s}-{n}")
                titles.add(title_key(h.group(2)))
            self._headings[rel] = (anchors, titles)
        return self._headings[rel]


C_LIKE = (".cpp", ".hpp", ".h", ".in")


def prose_start(rel, line):
    """Where the prose of `line` starts: all of it in Markdown, its comment
    in code (`//` in C++, `#` elsewhere; outside string literals), or past
    its end when it has none. File paths in code itself (a test's made-up
    tree, a path built at run time) are not mentions."""
    if rel.endswith((".md", ".txt")) and not rel.endswith("meson_options.txt"):
        return 0
    if rel.endswith(".json"):
        return len(line)
    marker = "//" if rel.endswith(C_LIKE) else "#"
    quote = None
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif line.startswith(marker, i):
            return i
        i += 1
    return len(line)


def resolve(tree, rel_file, target):
    """The root-relative path `target` names from `rel_file` (or from the
    root), or None. A bare file name names the tracked file of that name
    when there is one (a script joining it to its folder)."""
    here = os.path.dirname(rel_file)
    for base in (here, ""):
        cand = os.path.normpath(os.path.join(base, target)).replace(os.sep, "/")
        if tree.exists(cand):
            return cand
    if "/" not in target:
        return tree.by_name.get(target)
    return None


def check_file(tree, rel, text, findings):
    def found(lineno, what):
        findings.append(f"{rel}:{lineno}: {what}")

    lines = text.split("\n")
    is_md = rel.endswith(".md")
    fenced = None
    for lineno, line in enumerate(lines, 1):
        in_code = False
        if is_md:
            m = FENCE_RE.match(line)
            if m:
                fenced = None if fenced == m.group(1) else (fenced or m.group(1))
                in_code = True
            elif fenced:
                in_code = True

        if SECTION_SIGN in line:
            found(lineno, "a section sign: a section of a document the repository does not hold")
        for m in ISSUE_RE.finditer(line):
            found(lineno, f"\"{m.group(0)}\": an issue is not in the repository; say what it asked for")
        for m in ELSEWHERE_RE.finditer(line):
            found(lineno, f"\"{m.group(0)}\": the repository has no {m.group(1)}/ folder")
        if DESIGN_RE.search(line):
            found(lineno, "\"DESIGN\": a design document the repository does not hold")

        # Addresses are not paths; links in Markdown are checked as links.
        plain = URL_RE.sub(lambda u: " " * len(u.group(0)), line)
        links = []
        if is_md and not in_code:
            links = list(LINK_RE.finditer(plain)) + list(IMAGE_RE.finditer(plain))
            for m in links:
                a, b = m.span(1)
                plain = plain[:a] + " " * (b - a) + plain[b:]

        md_spans = []
        for m in MD_MENTION_RE.finditer(plain):
            md_spans.append(m.span())
            target, anchor = m.group(1), m.group(2)
            path = resolve(tree, rel, target)
            if path is None:
                found(lineno, f"\"{target}\" does not exist")
                continue
            if anchor and len(anchor) > 1 and anchor[1:] not in tree.headings(path)[0]:
                found(lineno, f"\"{target}{anchor}\": no such heading in {path}")
            t = TITLE_AFTER_RE.match(plain[m.end():])
            if t and title_key(t.group(1)) not in tree.headings(path)[1]:
                found(lineno, f"\"{target}\", \"{t.group(1)}\": no such heading in {path}")
        for m in README_TITLE_RE.finditer(plain):
            if title_key(m.group(1)) not in tree.headings("README.md")[1]:
                found(lineno, f"README, \"{m.group(1)}\": no such heading in README.md")

        prose_from = prose_start(rel, plain)
        for m in PATH_MENTION_RE.finditer(plain):
            if m.start() < prose_from or any(a <= m.start() < b for a, b in md_spans):
                continue
            target = m.group(1)
            if target.split("/", 1)[0] not in tree.tops or target.endswith(".md"):
                continue
            if resolve(tree, rel, target) is None:
                found(lineno, f"\"{target}\" does not exist")

        for m in links:
            check_link(tree, rel, lineno, m.group(1), found)

    count = len(text.rstrip("\n").split("\n")) if text.strip() else 0
    if rel == "README.md" and count > README_MAX_LINES:
        found(README_MAX_LINES + 1, f"README.md has {count} lines, more than {README_MAX_LINES}: "
              "move the text to a page of docs/")


def check_link(tree, rel, lineno, target, found):
    if not target or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
        return  # an address (https:, mailto:, ...) or an empty link
    path_part, _, anchor = target.partition("#")
    if path_part:
        if path_part.startswith("/"):
            path = path_part.lstrip("/") if tree.exists(path_part.lstrip("/")) else None
        else:
            cand = os.path.normpath(os.path.join(os.path.dirname(rel), path_part)).replace(os.sep, "/")
            path = cand if tree.exists(cand) else None
        if path is None:
            found(lineno, f"link to \"{target}\": no such file")
            return
    else:
        path = rel
    if anchor and path.endswith(".md") and anchor not in tree.headings(path)[0]:
        found(lineno, f"link to \"{target}\": no heading \"#{anchor}\" in {path}")


def check(root):
    tree = Tree(root)
    findings = []
    checked = 0
    for rel in tree.files:
        if rel == SELF or not tree.is_text(rel):
            continue
        try:
            with open(os.path.join(tree.root, rel), encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as e:
            findings.append(f"{rel}:0: cannot be read: {e}")
            continue
        checked += 1
        check_file(tree, rel, text, findings)
    return findings, checked


def self_test():
    """Runs the checker on a made-up tree and checks that it finds exactly
    the known bad references (and nothing in the good ones)."""
    sign = SECTION_SIGN
    # Made-up paths into folders outside the repository, spelled from parts
    # so that this file itself names none.
    away, notes = "../" + "shared", "no" + "tes"
    files = {
        "README.md": "\n".join(["# Title", "", "## Good section", "", "See [semantics](docs/sem.md#rule-one)."]
                               + ["filler"] * 346 + ["line 352"]) + "\n",
        "docs/sem.md": "# Sem\n\n## Rule one\n\n## Rule: two (`x_y`)\n\n## Rule one\n\n"
                       "```sh\n# not a heading\n```\n"
                       "Good: [a](#rule-one), [b](#rule-two-x_y), [c](#rule-one-1), [d](../README.md#good-section),\n"
                       "[e](https://example.org/x.md), [f](../lib/a.hpp), `docs/sem.md`, plan-x.md.\n"
                       "Bad: [g](#no-such), [h](missing.md), [i](../README.md#nope), [j](#not-a-heading).\n"
                       "```\n[k](#in-code) is code.\n```\n",
        "docs/plan-x.md": "# Plan\n",
        "lib/a.hpp": "// Fine: (docs/sem.md, \"Rule one\"), docs/sem.md#rule-two-x_y, lib/a.hpp, README.md, plan-x.md,\n"
                     "// $src/lib/gone.cpp, https://example.org/a/gone.md, test/x.cpp.\n"
                     f"// Bad: spec {sign}1.3 here.\n"
                     "// Bad: see issue 12, and Issue #7.\n"
                     f"// Bad: {away}/made_up/rules.md and {notes}/perf.md.\n"
                     "// Bad: DESIGN \"Ops\".\n"
                     "// Bad: docs/gone.md and docs/sem.md#gone and lib/gone.cpp.\n"
                     "// Bad: (docs/sem.md, \"No such rule\") and README, \"Nowhere\".\n"
                     "const char* made_up = \"lib/made_up.cpp\";  // Bad: lib/gone2.cpp, in a comment\n",
        "scripts/run": "#!/bin/sh\n# Bad: performance.md\nwrite 'test/made_up.py' \"lib/made_up.cpp\"  # Bad: test/gone.py\n",
        "test/x.cpp": "int x;\n",
        "bench/data.bin": f"{sign} not text, not checked\n",
        "build-x/out.md": f"{sign} a build folder, not checked\n",
        "subprojects/dep-1.0/README.md": f"{sign} a download, not checked\n",
        "docs/untracked.md": f"{sign} in git mode: not tracked, not checked\n",
    }
    # Not in the walk (build folders, downloads), not tracked in git mode.
    untracked = {"build-x/out.md", "subprojects/dep-1.0/README.md", "docs/untracked.md"}
    expected = [
        ("README.md", 351, "more than 350"),
        ("docs/sem.md", 14, "#no-such"),
        ("docs/sem.md", 14, "link to \"missing.md\""),
        ("docs/sem.md", 14, "../README.md#nope"),
        ("docs/sem.md", 14, "#not-a-heading"),
        ("lib/a.hpp", 3, "section sign"),
        ("lib/a.hpp", 4, "\"issue 12\""),
        ("lib/a.hpp", 4, "\"Issue #7\""),
        ("lib/a.hpp", 5, f"{away}/"),
        ("lib/a.hpp", 5, f"\"{away}/made_up/rules.md\" does not exist"),
        ("lib/a.hpp", 5, f"\"{notes}/\""),
        ("lib/a.hpp", 5, f"\"{notes}/perf.md\" does not exist"),
        ("lib/a.hpp", 6, "DESIGN"),
        ("lib/a.hpp", 7, "\"docs/gone.md\" does not exist"),
        ("lib/a.hpp", 7, "docs/sem.md#gone"),
        ("lib/a.hpp", 7, "\"lib/gone.cpp\" does not exist"),
        ("lib/a.hpp", 8, "\"No such rule\""),
        ("lib/a.hpp", 8, "README, \"Nowhere\""),
        ("lib/a.hpp", 9, "\"lib/gone2.cpp\" does not exist"),
        ("scripts/run", 2, "\"performance.md\" does not exist"),
        ("scripts/run", 3, "\"test/gone.py\" does not exist"),
    ]
    modes = ["walk"]
    if shutil.which("git"):
        modes.append("git")
    failures = []
    for mode in modes:
        with tempfile.TemporaryDirectory() as tmp:
            for rel, text in files.items():
                if mode == "walk" and rel == "docs/untracked.md":
                    continue
                path = os.path.join(tmp, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
            if mode == "git":
                tracked = sorted(set(files) - untracked)
                git = ["git", "-c", "safe.directory=*", "-C", tmp]
                subprocess.run(git + ["init", "-q"], check=True, capture_output=True)
                subprocess.run(git + ["add", "--"] + tracked, check=True, capture_output=True)
            findings, _ = check(tmp)
        unmatched = list(findings)
        for rel, line, words in expected:
            prefix = f"{rel}:{line}: "
            hit = next((f for f in unmatched if f.startswith(prefix) and words in f), None)
            if hit is None:
                failures.append(f"{mode}: missed: {prefix}... {words}")
            else:
                unmatched.remove(hit)
        for f in unmatched:
            failures.append(f"{mode}: unexpected: {f}")
    for f in failures:
        print(f"check_docs self-test: {f}")
    if failures:
        print(f"check_docs self-test: {len(failures)} problem(s)")
        return 1
    print(f"check_docs self-test: all {len(expected)} planted references found, nothing else "
          f"({' and '.join(modes)} listing)")
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 2 or argv[1].startswith("-"):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    if not os.path.isdir(argv[1]):
        print(f"check_docs: {argv[1]}: not a folder", file=sys.stderr)
        return 2
    findings, checked = check(argv[1])
    if checked == 0:
        findings.append(f"{argv[1]}:0: no text file found: nothing was checked")
    for f in findings:
        print(f)
    if findings:
        print(f"check_docs: {len(findings)} finding(s) in {checked} files")
        return 1
    print(f"check_docs: {checked} files, no dangling reference")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
