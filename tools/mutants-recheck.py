#!/usr/bin/env python3
"""Re-checks the mutants a cargo-mutants run missed against a newer tree (docs/testing.md,
"Mutation testing"): applies each missed (or timed-out) mutant's diff to the tree, runs the
test command, and reverts the diff. A mutant the tests now fail on is CAUGHT-NOW; one whose
diff no longer applies or no longer builds (the code changed around it) is NO-APPLY or
UNVIABLE-NOW, and is run again with cargo-mutants.

    tools/mutants-recheck.py OUTPUT_DIR [--tree DIR] [--cmd "cargo test ..."]

OUTPUT_DIR is the run's mutants.out directory. Without --cmd the test command of the run's own
test phase is used. The tree must be clean (git status) and must not be built by anything else
while this runs.
"""
import argparse
import json
import os
import signal
import subprocess
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("output", help="a cargo-mutants mutants.out directory")
    parser.add_argument("--tree", default=".", help="the source tree to mutate (default: .)")
    parser.add_argument("--cmd", help="the test command (default: the run's own)")
    parser.add_argument(
        "--timeout", type=int, default=300, help="seconds before a test run counts as a hang"
    )
    args = parser.parse_args()
    outcomes = json.load(open(os.path.join(args.output, "outcomes.json")))
    still = 0
    for outcome in outcomes["outcomes"]:
        if outcome["summary"] not in ("MissedMutant", "Timeout"):
            continue
        mutant = outcome["scenario"]["Mutant"]
        diff = os.path.join(args.output, outcome["diff_path"])
        if args.cmd:
            command = args.cmd.split()
        else:
            phases = [p for p in outcome["phase_results"] if p["phase"] == "Test"]
            command = phases[0]["argv"]
        applied = patch(
            args.tree, mutant["file"], diff, "--forward", "--reject-file=-", stdout=subprocess.DEVNULL
        )
        if applied.returncode != 0:
            print("NO-APPLY    ", mutant["name"], flush=True)
            still += 1
            continue
        try:
            # A mutant that no longer builds here (the code around it changed) says nothing.
            at = command.index("test") + 1
            build = subprocess.run(
                command[:at] + ["--no-run"] + command[at:],
                cwd=args.tree,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if build.returncode != 0:
                print("UNVIABLE-NOW", mutant["name"], flush=True)
                still += 1
                continue
            verdict = run_tests(command, args.tree, args.timeout)
        finally:
            patch(args.tree, mutant["file"], diff, "--reverse", check=True)
        if verdict.startswith("STILL"):
            still += 1
        print(verdict, mutant["name"], flush=True)
    return 1 if still else 0


def patch(tree, file, diff, *options, **run):
    """Runs patch on one file of the tree with a mutant's diff: quiet, leaving no backup."""
    return subprocess.run(
        ["patch", "--silent", "--no-backup-if-mismatch", *options, file, diff], cwd=tree, **run
    )


def run_tests(command, tree, timeout):
    """The verdict of one test run. A hang is killed with its whole process group: killing
    cargo alone leaves the test binary running (a mutant in a busy loop kept a core busy for
    40 minutes that way)."""
    run = subprocess.Popen(
        command,
        cwd=tree,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        code = run.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        return "CAUGHT-NOW   (hang)"
    return "CAUGHT-NOW  " if code != 0 else "STILL-MISSED"


if __name__ == "__main__":
    sys.exit(main())
