#!/usr/bin/env python3
"""tests/test_costs.txt, the seconds each long test takes in the Release build and in the
sanitizer build, and what ctest -j2 makes of them on a clean clone.

    tools/test_costs.py --write RELEASE_BUILD SANITIZER_BUILD
        rewrite the table from the two builds' last timings (Testing/Temporary/
        CTestCostData.txt), and from ctest outputs (--release-log, --sanitize-log: a run
        by hand, a CI log) over them: every registered test over MIN_SECONDS in either
        build; a test either build has no timing of keeps its row's figure there
    tools/test_costs.py --schedule BUILD [-L LABEL | -LE LABEL] [-j N] [--table COLUMN]
        how long ctest -j N (default 2) would take over BUILD's tests (those of the label, or
        all but it) in the order a clean clone runs them: by their COST property, highest
        first, no timings of its own (ctest's order); each test lasting what BUILD's last
        timings say. Prints the phase's length, the time a core idled at its end, and the
        tests running then. --table release|sanitize: ordered by that column of the table
        instead of BUILD's COST (a build configured before the table changed).

ctest -j orders tests by its own timings where it has them, else by COST: CI builds a clean
clone, so without COST the tests start in registration order and a long one registered
late runs alone at the end of its phase while the other core idles. The tests' CMake files
set COST from the table (attograd_test_costs() in tests/CMakeLists.txt). Standard library
only.
"""
import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "tests" / "test_costs.txt"
MIN_SECONDS = 5.0
HEADER = """\
# Seconds each long test takes (over {min:g} s in either build), in the Release build and in
# the sanitizer build (.ci/run's clang ASan+UBSan one); "-" where it is not run there
# (registered as skipped) or was not timed. ctest -j starts tests by their COST, highest
# first, where it has no timings of its own, as on CI's clean clone: attograd_test_costs()
# (tests/CMakeLists.txt) sets COST from the column of the build, so the longest start first
# and no phase ends with one long test alone on a core. Only the order depends on these
# figures (measured on a 2-core Zen 4 at varying load, ctest outputs of busier runs scaled:
# --sanitize-log FILE:SCALE); a test slower than its row still runs to its end.
# Rewrite from two builds' last ctest timings: tools/test_costs.py --write build build-check
# (docs/testing.md, "What CI costs")
# test release sanitize
"""


def logged_timings(log):
    """{test: seconds} from ctest's output (its "Test #N: NAME .... Passed  S sec" lines);
    LOG may end in :SCALE, a factor for its seconds (a run on a busier machine than the
    cost file's: 0.5 for one that ran twice as slow on the tests both timed)."""
    log, _, scale = str(log).partition(":")
    scale = float(scale or 1)
    out = {}
    for line in Path(log).read_text(errors="replace").splitlines():
        m = re.search(r"Test +#\d+: (.+?) \.+ *(?:\*+)?Passed +([0-9.]+) sec", line)
        if m:
            out[m.group(1)] = float(m.group(2)) * scale
    return out


def timings(build, logs=()):
    """{test: seconds} from BUILD's last ctest runs (ctest's own cost file), then from the
    ctest output LOGS (later ones win)."""
    path = Path(build) / "Testing" / "Temporary" / "CTestCostData.txt"
    out = {}
    if path.exists():
        out.update(cost_file(path))
    for log in logs:
        out.update(logged_timings(log))
    return out


def cost_file(path):
    out = {}
    for line in path.read_text().splitlines():
        if line.startswith("---"):
            break
        name, _, rest = line.rpartition(" ")
        name = name.rpartition(" ")[0]
        try:
            seconds = float(rest)
        except ValueError:
            continue
        if name and seconds == seconds and seconds != float("inf"):
            out[name] = seconds
    return out


def registered(build):
    """BUILD's tests in registration order: [(name, {property: value})]; a test registered
    as skipped in this build (sh -c "echo ...; exit 77") has the property STUB."""
    shown = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, check=True,
                           capture_output=True, text=True).stdout
    tests = []
    for t in json.loads(shown)["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        if any("exit 77" in part for part in t.get("command", [])[2:3]):
            props["STUB"] = True
        tests.append((t["name"], props))
    return tests


def read_table():
    rows = {}
    for line in TABLE.read_text().splitlines() if TABLE.exists() else []:
        if line.strip() and not line.startswith("#"):
            name, release, sanitize = line.split()
            rows[name] = [release, sanitize]
    return rows


def figure(seconds):
    return "-" if seconds is None else f"{seconds:.0f}" if seconds >= 10 else f"{seconds:.1f}"


def write(release_build, sanitizer_build, logs):
    rows = read_table()
    for column, build in enumerate((release_build, sanitizer_build)):
        measured = timings(build, logs[column])
        for name, props in registered(build):
            # (Catch2's cases, named with spaces, are registered at build time: no COST)
            if name in measured and "STUB" not in props and " " not in name:
                rows.setdefault(name, ["-", "-"])[column] = figure(measured[name])
    kept = {n: r for n, r in rows.items()
            if max(float(x) if x != "-" else 0.0 for x in r) > MIN_SECONDS}
    width = max(map(len, kept)) + 2
    lines = [f"{n:<{width}}{r[0]:>8}{r[1]:>9}" for n, r in
             sorted(kept.items(), key=lambda kv: -max(float(x) if x != "-" else 0 for x in kv[1]))]
    TABLE.write_text(HEADER.format(min=MIN_SECONDS) + "\n".join(lines) + "\n")
    print(f"{TABLE.relative_to(ROOT)}: {len(kept)} tests")


def with_table(tests, column):
    """TESTS with COST as attograd_test_costs() sets it from COLUMN of the table (none:
    as BUILD has it)."""
    if not column:
        return tests
    rows, index = read_table(), ("release", "sanitize").index(column)
    out = []
    for name, props in tests:
        props = {k: v for k, v in props.items() if k != "COST"}
        if name in rows and rows[name][index] != "-":
            props["COST"] = float(rows[name][index])
        out.append((name, props))
    return out


def clean_clone_order(tests):
    """ctest's order without timings: fixture setups first, then by COST, stably."""
    setups = [t for t in tests if "FIXTURES_SETUP" in t[1]]
    rest = [t for t in tests if "FIXTURES_SETUP" not in t[1]]
    by_cost = lambda t: -float(t[1].get("COST", 0))
    return sorted(setups, key=by_cost) + sorted(rest, key=by_cost)


def schedule(tests, seconds, cores):
    """List scheduling as ctest -j does it: a free core takes the first test whose fixtures
    are set up. Returns (length, idle core-seconds at the end, [(start, end, test)])."""
    queue, done_at, free, running, log = clean_clone_order(tests), {}, [0.0] * cores, [], []
    provides = {f: n for n, p in tests for f in p.get("FIXTURES_SETUP", [])}
    while queue:
        now = min(free)
        ready = [t for t in queue if all(done_at.get(provides.get(f), 0) <= now and
                                         provides.get(f) not in [q[0] for q in queue]
                                         for f in t[1].get("FIXTURES_REQUIRED", []))]
        if not ready:  # wait for the running setup
            free[free.index(now)] = min(e for e in done_at.values() if e > now)
            continue
        name = ready[0][0]
        queue.remove(ready[0])
        end = now + seconds.get(name, 0.5)
        done_at[name] = end
        free[free.index(now)] = end
        log.append((now, end, name))
    length = max(free)
    return length, sum(length - f for f in free), log


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", nargs=2, metavar=("RELEASE_BUILD", "SANITIZER_BUILD"))
    parser.add_argument("--release-log", action="append", default=[],
                        help="with --write: a ctest output of the Release build, over its timings")
    parser.add_argument("--sanitize-log", action="append", default=[],
                        help="with --write: a ctest output of the sanitizer build")
    parser.add_argument("--schedule", metavar="BUILD")
    parser.add_argument("-L", dest="label")
    parser.add_argument("-LE", dest="label_exclude")
    parser.add_argument("-j", type=int, default=2)
    parser.add_argument("--table", choices=("release", "sanitize"),
                        help="order by this column of tests/test_costs.txt, not BUILD's COST")
    args = parser.parse_args()
    if args.write:
        write(*args.write, (args.release_log, args.sanitize_log))
    elif args.schedule:
        tests = [t for t in with_table(registered(args.schedule), args.table)
                 if (not args.label or args.label in t[1].get("LABELS", [])) and
                 (not args.label_exclude or args.label_exclude not in t[1].get("LABELS", []))]
        seconds = timings(args.schedule, args.sanitize_log + args.release_log)
        length, idle, log = schedule(tests, seconds, args.j)
        print(f"{len(tests)} tests, {sum(e - s for s, e, _ in log):.0f} s of tests: "
              f"ctest -j{args.j} {length:.0f} s, a core idle {idle:.0f} s at the end")
        for s, e, name in sorted(log, key=lambda x: -x[1])[:args.j]:
            print(f"  last: {name} {s:.0f}-{e:.0f} s")
    else:
        parser.print_help()
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
