"""Three replicas (whole Apps: store, host, Telegram channel in webhook mode) on one PostgreSQL
database, behind a balancer that hands updates to the replicas in turn (a chat's messages land on
any of them): every update answered once, and each chat's answers in order, because the shared
inbox lets one replica at a time run a chat."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchmarks.replicas import scenario
from tests.engines import Engine

pytestmark = pytest.mark.postgres_only


async def test_three_replicas_answer_every_update_once_in_order(
    engine: Engine, tmp_path: Path
) -> None:
    args = argparse.Namespace(chats=6, rounds=4, warmup=1)

    figures = await scenario("3 replicas", 3, str(engine.location), args, tmp_path)

    assert figures.lost == 0
    assert figures.duplicated == 0
    assert figures.in_order
    assert len(figures.latencies) == 6 * 4
