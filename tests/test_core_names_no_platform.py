"""The core `bot/` names no chat platform: each name lives in the channel's own package."""

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The platforms the core must not spell out (the name of a `channels/` package).
PLATFORM_NAMES = frozenset({"slack", "telegram"})
# Modules of the core that still name a platform, and how many times, until each moves behind
# a channel descriptor: the count may only go down (lower it here when it does); a module not
# listed may name none.
STILL_NAMING = {
    "bot/cli/doctor.py": 2,  # the services `bot doctor` checks
    "bot/cli/preview.py": 6,  # the channels `bot preview` reads events from
    "bot/cli/settings.py": 4,  # the channel sections of the settings
    "bot/policy/surfaces.py": 2,  # PLATFORMS: the channel names a surface rule may name
}


def _platform_names(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in PLATFORM_NAMES
    )


def _naming() -> dict[str, int]:
    found: Counter[str] = Counter()
    for path in sorted((ROOT / "bot").rglob("*.py")):
        count = _platform_names(path)
        if count:
            found[path.relative_to(ROOT).as_posix()] = count
    return dict(found)


def test_no_module_of_the_core_names_a_platform_beyond_the_known_ones() -> None:
    found = _naming()
    grown = {name: count for name, count in found.items() if count > STILL_NAMING.get(name, 0)}
    assert not grown, (
        f"{grown} name a platform in the core; Fix: let the channel's descriptor supply it"
    )


def test_the_known_list_shrinks_as_modules_stop_naming_platforms() -> None:
    found = _naming()
    stale = {name: count for name, count in STILL_NAMING.items() if found.get(name, 0) < count}
    assert not stale, f"{stale} name fewer platforms now; Fix: lower or drop them in STILL_NAMING"


def test_the_scan_sees_a_platform_name_in_code_but_not_in_comments(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text('# "slack" in a comment\nCHANNEL = "telegram"\nOTHER = "slacker"\n')
    assert _platform_names(module) == 1
