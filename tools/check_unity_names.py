#!/usr/bin/env python3
"""What a unity build could change without an error, in the targets that have one.

    tools/check_unity_names.py      exit 1, naming each finding, when there is one

A unity build (CMake's UNITY_BUILD, cmake/unity_build.cmake) compiles a target's sources
in batches, each batch one translation unit that #includes its files one after another.
Every file's anonymous namespace then becomes the same namespace, and whatever a file
declares at namespace scope is seen by the files after it. Most meetings are errors the
compiler reports: two types, variables or same-signature functions of one name are
redefinitions. Three are not, and this finds them among the sources of each target listed in
cmake/unity_build.cmake:

  - a function local to one file (in an anonymous namespace, or static) whose name is a
    function of another file, or one another file brings in with a using-declaration
    (`using ns::name;`): with other parameters it is an overload, and a call in either
    file can bind to the other's, silently;
  - a using-directive at namespace scope in a source file (`using namespace x;`): it
    reaches the files after it, where x's names join every lookup (std's literal
    namespaces excepted: they only add literal suffixes; and a directive inside the file's
    own namespace, one named after the file that no other file opens, reaches nothing
    else: test_fused_attention.cpp's fused_attention_test);
  - a macro #defined in a source file whose name another file of the target uses.

Needs universal-ctags. Standard library only.
"""
import collections
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARMLESS_DIRECTIVES = re.compile(r"using namespace std::(\w+_)?literals\b")


def unity_targets():
    text = (ROOT / "cmake" / "unity_build.cmake").read_text()
    match = re.search(r"set\(ATTOGRAD_UNITY_TARGETS([^)]*)\)", text)
    if not match:
        sys.exit("check_unity_names.py: no ATTOGRAD_UNITY_TARGETS in cmake/unity_build.cmake")
    return match.group(1).split()


def sources(target):
    """The target's C++ sources, from its add_library/add_executable (tests: the glob)."""
    if target == "attograd_tests":
        return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.cpp"))
    for lists in sorted(ROOT.glob("*/CMakeLists.txt")):
        made = re.search(rf"add_(?:library|executable)\({target}\b([^)]*)\)", lists.read_text())
        if made:
            folder = lists.parent.relative_to(ROOT)
            listed = made.group(1).split()  # (a generated source, ${...}, is not ours)
            return [str(folder / f) for f in listed if f.endswith(".cpp") and "$" not in f]
    sys.exit(f"check_unity_names.py: no add_library({target} ...) in any */CMakeLists.txt")


def tags(files):
    out = subprocess.run(["ctags", "--output-format=json", "--fields=+sZKe", "--extras=-q",
                          "--c++-kinds=fv", "-f", "-"] + files, cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return [t for t in map(json.loads, out.splitlines()) if t.get("_type") == "tag"]


def overload_findings(texts):
    local, anywhere = collections.defaultdict(set), collections.defaultdict(set)
    for t in tags(list(texts)):
        scope = t.get("scope", "")
        at_namespace = not scope or t.get("scopeKind") == "namespace"
        if t["kind"] != "function" or not at_namespace:
            continue
        anywhere[t["name"]].add(t["path"])
        if scope.split("::")[-1].startswith("__anon") or t.get("file"):
            local[t["name"]].add(t["path"])
    # names a file brings into its namespace with a using-declaration (using ns::name;),
    # which a local function of that name would join in the files after it
    for path, text in texts.items():
        for name in re.findall(r"^using [\w:]+::(\w+);", text, re.M):
            anywhere[name].add(path)
    for name, paths in sorted(local.items()):
        for path in sorted(paths):
            others = sorted(anywhere[name] - {path})
            if others:
                yield (f"{path}: '{name}', local to it, is also a function of, or brought in "
                       f"by, {', '.join(others)}")


def text_findings(texts):
    opened = {f: set(re.findall(r"^namespace (\S+) \{", t, re.M)) for f, t in texts.items()}
    for path, text in texts.items():
        # the named namespaces open at each line, by clang-format's closing comments
        enclosing = []
        # a namespace named after this file (test_fused_attention.cpp: fused_attention_test)
        # and opened by no other file is its own
        stem = Path(path).stem.removeprefix("test_")
        own = {n for n in opened[path] if stem in n.split("::")[-1]}
        own -= set().union(*(v for f, v in opened.items() if f != path))
        for number, line in enumerate(text.splitlines(), 1):
            entered = re.match(r"namespace (\S*) ?\{", line)
            if entered:
                enclosing.append(entered.group(1))
            elif re.match(r"\}  // namespace", line) and enclosing:
                enclosing.pop()
            # at namespace scope a directive starts its line (clang-format indents the ones
            # inside functions, which reach nothing else); in the file's own namespace it
            # reaches no other file
            if (line.startswith("using namespace") and not HARMLESS_DIRECTIVES.match(line) and
                    not own.intersection(enclosing)):
                yield f"{path}:{number}: a using-directive at namespace scope reaches the files after it"
            define = re.match(r"\s*#\s*define\s+(\w+)", line)
            if define:
                name = define.group(1)
                undefined = re.search(rf"#\s*undef\s+{name}\b", text)
                users = [f for f, other in texts.items()
                         if f != path and re.search(rf"\b{name}\b", other)]
                if users and not undefined:
                    yield (f"{path}:{number}: macro {name}, defined here, is used by "
                           f"{', '.join(sorted(users))}")


def main():
    findings = []
    for target in unity_targets():
        texts = {f: (ROOT / f).read_text() for f in sources(target)}
        findings += overload_findings(texts)
        findings += text_findings(texts)
    for f in findings:
        print(f, flush=True)
    if findings:
        print(f"check_unity_names.py: {len(findings)} finding(s); rename the local one, or "
              "qualify the names the directive brought in", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
