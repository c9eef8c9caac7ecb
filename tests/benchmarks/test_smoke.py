"""Every benchmark in `benchmarks/` runs end to end at a tiny size, so none can break silently.

The figures are not checked (they are for people, compared in one run against a baseline); what
is checked is that each benchmark completes and prints its figures. Full runs stay out of the
suite: run them by hand with the command in each module's docstring.
"""

from __future__ import annotations

import importlib
import pkgutil
import pstats
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
import structlog

import benchmarks
from tests.voice.clips import require_voice

TINY_TELEGRAM = ("--turns", "1", "--rounds", "1", "--chats", "1", "--warmup", "0")
# module -> (tiny arguments, a piece of the output that proves it ran to the end)
TINY: dict[str, tuple[list[str], str]] = {
    "assembly": (["--iterations", "3", "--warmup", "1"], "p50:"),
    "attachments": (["--megabytes", "0.05", "--iterations", "2", "--warmup", "0"], "added input"),
    "cache": (["--turns", "2", "--memory", "on"], "mean over turns"),
    "compare": (
        [*("--baseline", "HEAD", "--runs", "1", "host_telegram"), *TINY_TELEGRAM],
        "cpu ms/turn",
    ),
    "faithful": (["--repeat", "1", "--limit", "5"], "reaching the model unchanged: 5/5"),
    "footprint": (["--runs", "1", "--idle", "0", "--commands", "chat"], "idle RSS"),
    "images": (["--scale", "0.02", "--at-once", "2"], "x2: RSS"),
    "mark_window": (["--chats", "2", "--rounds", "1"], "window p50"),
    "mcp_tools": (["--calls", "3", "--warmup", "1", "--turns", "2"], "with the MCP server:"),
    "host_slack": (
        ["--turns", "2", "--rounds", "1", "--conversations", "2", "--warmup", "1"],
        "2 convs",
    ),
    "host_telegram": (
        ["--turns", "2", "--rounds", "1", "--chats", "2", "--warmup", "1"],
        "2 chats",
    ),
    "replicas": (["--chats", "2", "--rounds", "1", "--warmup", "1"], "sqlite, 1"),
    "stream": (["--answers", "1", "--chars", "300", "--seconds", "0.2"], "telegram private"),
    "store": (["--conversations", "20", "--memories", "60", "--samples", "3"], "database size"),
    "voice": (["--seconds", "2", "--runs", "1", "--warmup", "0"], "real-time factor p50"),
}
HELPERS = {"overhead", "botproc"}  # shared code, not benchmarks of their own
NEEDS_VOICE = {"voice"}  # transcribes: needs the voice extra (CI installs it)


@pytest.fixture(autouse=True)
def default_logging() -> Iterator[None]:
    """A benchmark quiets structlog for the whole process; leave it as the next test expects."""
    yield
    structlog.reset_defaults()


def test_every_benchmark_has_a_smoke_run() -> None:
    found = {m.name for m in pkgutil.iter_modules(benchmarks.__path__)} - HELPERS
    assert found == set(TINY), "give each benchmark a tiny run in TINY (or list a helper)"


@pytest.mark.parametrize("name", sorted(TINY))
def test_benchmark_runs_at_a_tiny_size(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    arguments, proof = TINY[name]
    if name in NEEDS_VOICE:
        require_voice()
    module = importlib.import_module(f"benchmarks.{name}")
    main: Callable[[Sequence[str]], None] = module.main
    main(arguments)
    printed = capsys.readouterr().out
    assert proof in printed, printed


def test_the_bot_process_can_be_profiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """BENCH_PROFILE: the benchmarked bot runs under cProfile and leaves stats pstats reads, with
    the host's per-turn work in them."""
    profile = tmp_path / "bot.prof"
    monkeypatch.setenv("BENCH_PROFILE", str(profile))
    from benchmarks import host_telegram

    host_telegram.main(list(TINY_TELEGRAM))
    assert "1 chat" in capsys.readouterr().out
    functions = {name for _, _, name in pstats.Stats(str(profile)).stats}
    assert "conclude" in functions


def test_the_instant_model_is_labelled_as_such(capsys: pytest.CaptureFixture[str]) -> None:
    """The real path (the SDK over HTTP) is the default; the in-process stand-in says what it is
    on every figure line."""
    from benchmarks import host_telegram

    host_telegram.main([*TINY_TELEGRAM, "--model", "instant"])
    printed = capsys.readouterr().out
    figures = [line for line in printed.splitlines() if "turns/s" in line]
    assert figures
    assert all("INSTANT" in line for line in figures), printed
