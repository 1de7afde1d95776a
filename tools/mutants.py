#!/usr/bin/env python3
"""Planted bugs (make mutants): applies each one-line mutant of a list (tests/mutants.tsv),
one at a time, to a temporary copy of the tree, builds it and runs its tests through
`make test`, and prints which tests caught it. Exits non-zero when a mutant survives, when
a pattern no longer matches exactly once, or when the unmutated copy fails its tests.

The list: tab-separated columns id, file, pattern (a Python regular expression over the
file, MULTILINE), replacement (re.sub's), tests (make test's TEST_FILTER, `$(BUILD)` for the
build directory; `all` for the whole suite), and the bug it plants. Lines starting with #
are comments.

    tools/mutants.py [LIST] [--only ID,ID...] [--jobs N] [--verbose]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = "build-mutants"
# A planted bug may leave a parameter unused: warnings stay warnings, the tests judge.
MAKE_VARS = [f"BUILD={BUILD}", "WARN=-Wall -Wextra"]
MUTANT_TIMEOUT_S = 900  # a mutant that hangs the suite is caught: CI would time out


def read_list(path):
    mutants = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 6:
                sys.exit(f"{path}:{number}: expected 6 tab-separated fields "
                         f"(id, file, pattern, replacement, tests, bug), got {len(fields)}")
            mutants.append(dict(zip(("id", "file", "pattern", "replacement", "tests", "bug"), fields),
                                line=number))
    return mutants


def mutate(text, mutant):
    """The text with the mutant applied; exits unless its pattern matches exactly once."""
    matches = list(re.finditer(mutant["pattern"], text, re.MULTILINE))
    if len(matches) != 1:
        return None, len(matches)
    m = matches[0]
    return text[:m.start()] + m.expand(mutant["replacement"]) + text[m.end():], 1


def tree_files():
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                         check=True, capture_output=True).stdout.decode()
    return [p for p in out.split("\0") if p and os.path.isfile(os.path.join(ROOT, p))]


def copy_tree(dest):
    for rel in tree_files():
        os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, rel), os.path.join(dest, rel))


def test_filter(tests):
    return "" if tests == "all" else tests.replace("$(BUILD)", BUILD)


def failed_lines(tree, failing):
    """The `not ok` lines of each failing test, run again by itself."""
    env = dict(os.environ, LMS_BUILD_DIR=os.path.join(tree, BUILD), LMS_SOURCE_DIR=tree, SANITIZE="")
    lines = []
    for name in failing:
        try:
            run = subprocess.run([os.path.join(tree, BUILD, "tests", name)], cwd=tree, env=env, text=True,
                                 capture_output=True, timeout=MUTANT_TIMEOUT_S)
            lines += [f"  {name}: {line}" for line in run.stdout.splitlines() if line.startswith("not ok")]
            if run.returncode < 0:
                lines.append(f"  {name}: killed by signal {-run.returncode}")
        except subprocess.TimeoutExpired:
            lines.append(f"  {name}: timed out")
    return "\n".join(lines)


def run_tests(tree, tests, jobs, verbose=False):
    """(passed, failing test names, output: its tail, or with verbose the failed tests' lines)."""
    build = subprocess.run(["make", f"-j{jobs}", *MAKE_VARS, "all"], cwd=tree,
                           capture_output=True, text=True)
    if build.returncode != 0:
        return None, ["(does not build)"], build.stdout[-2000:] + build.stderr[-2000:]
    cmd = ["make", *MAKE_VARS, f"PROVE_JOBS={jobs}", "test"]
    if test_filter(tests):
        cmd.append(f"TEST_FILTER={test_filter(tests)}")
    proc = subprocess.Popen(cmd, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=MUTANT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        return False, [f"(timed out after {MUTANT_TIMEOUT_S} s)"], ""
    failing = sorted(set(re.findall(r"^(\S+\.t)\s+\(Wstat", output, re.MULTILINE)))
    failing = [os.path.basename(t) for t in failing]
    if proc.returncode != 0 and not failing:
        failing = ["(make test failed)"]
    if verbose and proc.returncode != 0:
        return False, failing, failed_lines(tree, [t for t in failing if t.endswith(".t")])
    return proc.returncode == 0, failing, output[-3000:]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("list", nargs="?", default=os.path.join(ROOT, "tests", "mutants.tsv"))
    parser.add_argument("--only", help="comma-separated ids to run")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--verbose", action="store_true", help="print the failed test lines of each mutant")
    args = parser.parse_args()

    mutants = read_list(args.list)
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {m["id"] for m in mutants}
        if unknown:
            sys.exit(f"--only: no mutant named {', '.join(sorted(unknown))} in {args.list}")
        mutants = [m for m in mutants if m["id"] in wanted]

    # Every pattern must still match exactly once before anything runs.
    stale = []
    for m in mutants:
        with open(os.path.join(ROOT, m["file"])) as f:
            _, count = mutate(f.read(), m)
        if count != 1:
            stale.append(f"{args.list}:{m['line']}: mutant {m['id']}: pattern matches {m['file']} "
                         f"{count} times, expected exactly once: {m['pattern']}")
    if stale:
        print("\n".join(stale), file=sys.stderr)
        sys.exit("mutants: the list no longer fits the code: fix the patterns above")

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lms-mutants.") as tree:
        copy_tree(tree)
        union = " ".join(sorted({t for m in mutants for t in test_filter(m["tests"]).split()}))
        if any(m["tests"] == "all" for m in mutants):
            union = "all"
        print(f"mutants: the unmutated tree first ({union or 'all'})", flush=True)
        passed, failing, tail = run_tests(tree, union or "all", args.jobs)
        if not passed:
            print(tail, file=sys.stderr)
            sys.exit(f"mutants: the unmutated tree fails its tests ({', '.join(failing)}): nothing to measure")

        rows = []
        for m in mutants:
            path = os.path.join(tree, m["file"])
            with open(path) as f:
                original = f.read()
            mutated, _ = mutate(original, m)
            with open(path, "w") as f:
                f.write(mutated)
            t0 = time.monotonic()
            passed, failing, tail = run_tests(tree, m["tests"], args.jobs, args.verbose)
            with open(path, "w") as f:
                f.write(original)
            caught = passed is False and failing != ["(does not build)"]
            if passed is None or args.verbose:
                print(tail, file=sys.stderr)
            rows.append((m, "caught" if caught else ("no build" if passed is None else "SURVIVED"), failing,
                         time.monotonic() - t0))
            print(f"mutants: {m['id']}: {rows[-1][1]} ({', '.join(failing) or '-'}) in {rows[-1][3]:.0f} s",
                  flush=True)

    width = max(len(m["id"]) for m, *_ in rows)
    print(f"\n{'mutant':<{width}}  {'result':<8}  {'s':>4}  caught by")
    for m, result, failing, seconds in rows:
        print(f"{m['id']:<{width}}  {result:<8}  {seconds:4.0f}  {', '.join(failing) or '-'}")
    caught = sum(1 for _, result, *_ in rows if result == "caught")
    print(f"\n{caught} of {len(rows)} mutants caught ({100 * caught // max(len(rows), 1)} %) "
          f"in {time.monotonic() - started:.0f} s")
    return 0 if caught == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
