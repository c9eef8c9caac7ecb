"""A host benchmark against a baseline commit, in one run: both bots built from git, alternated.

    .venv/bin/python -m benchmarks.compare --baseline REV [--candidate REV] [--runs N]
                                           BENCHMARK [ARGS...]

BENCHMARK is `host_slack` or `host_telegram` (ARGS are its own). Each commit is exported from
git (`git archive`) into a temporary folder; the benchmark's driver and fakes are this checkout's,
and only the bot process comes from the exported tree (`--bot-tree`), so both commits are driven
the same way, through the same model path (the benchmark's `--model`; by default the anthropic
SDK over HTTP to the fake Messages API, and the benchmark's header saying so is printed first).
The runs alternate (baseline, candidate, baseline, ...) so that a machine that gets busier or
quieter during the run affects both alike. Printed: every run's lines, then the median of each
figure (p50, p99, turns/s, CPU per turn) per commit and the ratio candidate / baseline. Figures
are printed, never asserted.
"""

from __future__ import annotations

import argparse
import io
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

BENCHMARKS = ("host_slack", "host_telegram")
FIGURE = re.compile(
    r"^(?P<name>.+?)\s+p50\s+(?P<p50>[\d.]+) ms\s+p99\s+(?P<p99>[\d.]+) ms\s+"
    r"(?P<rate>[\d.]+) turns/s\s+cpu\s+(?P<cpu>[\d.]+) ms/turn"
)
COLUMNS = (("p50", "p50 ms"), ("p99", "p99 ms"), ("rate", "turns/s"), ("cpu", "cpu ms/turn"))
Figures = dict[str, dict[str, float]]  # scenario -> figure -> value


def export(rev: str, into: Path) -> str:
    """The commit `rev` as files under `into`; returns its full hash."""
    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}").strip()
    archive = subprocess.run(["git", "archive", commit], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return commit


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def run_once(benchmark: str, tree: Path, args: Sequence[str]) -> tuple[str, Figures]:
    """One run of the benchmark with the bot from `tree`: its output and its figures."""
    command = [sys.executable, "-m", f"benchmarks.{benchmark}", "--bot-tree", str(tree), *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout, parse(done.stdout)


def parse(output: str) -> Figures:
    figures: Figures = {}
    for line in output.splitlines():
        match = FIGURE.match(line)
        if match:
            figures[match["name"]] = {key: float(match[key]) for key, _ in COLUMNS}
    return figures


def medians(runs: Sequence[Figures]) -> Figures:
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        for name, figures in run.items():
            for key, value in figures.items():
                values[name][key].append(value)
    return {
        name: {key: statistics.median(found) for key, found in figures.items()}
        for name, figures in values.items()
    }


def table(baseline: Figures, candidate: Figures, names: tuple[str, str]) -> str:
    lines = [f"{'scenario':<12} {'figure':<12} {names[0]:>12} {names[1]:>12} {'ratio':>7}"]
    for scenario, before in baseline.items():
        after = candidate.get(scenario, {})
        for key, label in COLUMNS:
            old, new = before[key], after.get(key, float("nan"))
            ratio = new / old if old else float("nan")
            lines.append(f"{scenario:<12} {label:<12} {old:>12.2f} {new:>12.2f} {ratio:>7.2f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the commit to compare against")
    parser.add_argument("--candidate", default="HEAD", help="the commit measured (default HEAD)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each commit, alternated")
    parser.add_argument("benchmark", choices=BENCHMARKS)
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the benchmark's own arguments")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        trees = {"baseline": Path(folder, "baseline"), "candidate": Path(folder, "candidate")}
        commits = {role: export(getattr(args, role), tree) for role, tree in trees.items()}
        print(
            f"{args.benchmark}: baseline {commits['baseline'][:12]}, "
            f"candidate {commits['candidate'][:12]}, {args.runs} runs each, alternated"
        )
        runs: dict[str, list[Figures]] = {role: [] for role in trees}
        for number in range(1, args.runs + 1):
            for role, tree in trees.items():
                output, figures = run_once(args.benchmark, tree, args.args)
                runs[role].append(figures)
                if number == 1 and role == "baseline":  # what is measured, the model path too
                    print(output.splitlines()[0] if output else "")
                for line in output.splitlines():
                    if FIGURE.match(line):
                        print(f"run {number} {role:<9} {line}")
        names = (commits["baseline"][:12], commits["candidate"][:12])
        print(f"medians of {args.runs} runs:")
        print(table(medians(runs["baseline"]), medians(runs["candidate"]), names))


if __name__ == "__main__":
    main()
