"""The PostgreSQL schema as an ordered list of forward migrations, and the code that applies them.

Migration N (1-based) takes the database from version N-1 (the one row of `bot_schema`) to N, in
one transaction under an advisory lock, so replicas starting together never migrate twice. Never
edit a released migration: append a new one. Times are unix seconds, as in the SQLite store, so
both engines share one clock and `bot store migrate` copies values unchanged.
"""

from __future__ import annotations

from typing import Any

from bot.errors import SchemaTooNewError

# Any constant the project owns: the advisory lock that serializes migrations.
_MIGRATION_LOCK = 0x626F7431  # "bot1"

_V1_HISTORY = (
    # Totals are summed when pruning, not kept by triggers: a counter row every publish updates
    # would serialize every replica's publishes on one row lock.
    """CREATE TABLE conversations (
        key TEXT PRIMARY KEY,
        last_active DOUBLE PRECISION NOT NULL,
        bytes BIGINT NOT NULL DEFAULT 0,
        next_seq BIGINT NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX conversations_by_activity ON conversations (last_active)",
    """CREATE TABLE messages (
        key TEXT NOT NULL,
        seq BIGINT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (key, seq)
    )""",
)

_V1_MEMORY = (
    # `tsv` is the full-text index of the attributed text: English stemming, like FTS5's porter.
    """CREATE TABLE memories (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        conversation_key TEXT NOT NULL,
        surface TEXT NOT NULL,
        person TEXT,
        text TEXT NOT NULL,
        captured_at DOUBLE PRECISION NOT NULL,
        -- the source turn, and where the speaker's words sit in `text` (character offsets)
        turn_id TEXT,
        said_from INTEGER NOT NULL DEFAULT 0,
        said_to INTEGER NOT NULL DEFAULT 0,
        tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', text)) STORED
    )""",
    "CREATE INDEX memories_by_surface ON memories (surface)",
    "CREATE INDEX memories_by_person ON memories (person)",
    "CREATE INDEX memories_by_conversation ON memories (conversation_key, captured_at)",
    "CREATE INDEX memories_fts ON memories USING GIN (tsv)",
    # Who took part where, as spans of time (a DM's reach into a shared surface expires).
    """CREATE TABLE participation (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        person TEXT NOT NULL,
        surface TEXT NOT NULL,
        since DOUBLE PRECISION NOT NULL,
        until DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX participation_by_person ON participation (person, surface, until)",
    # How many memories hold each word, so recall picks a query's rarest words (as on SQLite).
    "CREATE TABLE term_docs (term TEXT PRIMARY KEY, docs BIGINT NOT NULL)",
)

_V1_RECORDS_EVENTS_BUFFER_RUNS = (
    """CREATE TABLE turn_records (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        turn_id TEXT NOT NULL UNIQUE,
        conversation_key TEXT NOT NULL,
        started_at DOUBLE PRECISION NOT NULL,
        outcome TEXT NOT NULL,
        body TEXT NOT NULL,
        bytes BIGINT NOT NULL
    )""",
    "CREATE INDEX turn_records_by_conversation ON turn_records (conversation_key, seq)",
    """CREATE TABLE events (
        source TEXT NOT NULL,
        event_id TEXT NOT NULL,
        seen_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (source, event_id)
    )""",
    "CREATE INDEX events_by_age ON events (seen_at)",
    """CREATE TABLE chat_buffer (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        key TEXT NOT NULL,
        added_at DOUBLE PRECISION NOT NULL,
        body TEXT NOT NULL
    )""",
    "CREATE INDEX chat_buffer_by_key ON chat_buffer (key, id)",
    "CREATE INDEX chat_buffer_by_age ON chat_buffer (added_at)",
    """CREATE TABLE cron_runs (
        run_id TEXT PRIMARY KEY,
        job TEXT NOT NULL,
        trigger TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        scheduled_for DOUBLE PRECISION,
        fired_at DOUBLE PRECISION NOT NULL,
        finished_at DOUBLE PRECISION,
        status TEXT NOT NULL,
        delivered BOOLEAN NOT NULL,
        parts INTEGER NOT NULL,
        accepted INTEGER NOT NULL,
        error TEXT,
        seq BIGINT GENERATED ALWAYS AS IDENTITY
    )""",
    "CREATE INDEX cron_runs_by_job ON cron_runs (job, fired_at)",
    # One row per schedule slot ever claimed: each slot runs on one replica only.
    """CREATE TABLE cron_slots (
        job TEXT NOT NULL,
        slot DOUBLE PRECISION NOT NULL,
        claimed_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (job, slot)
    )""",
)

# The durable inbox and outbox (SPEC §11), as in the SQLite store's version 4.
_V1_INBOX_OUTBOX = (
    """CREATE TABLE inbox (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        turn_id TEXT NOT NULL,
        conversation_key TEXT NOT NULL,
        source TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        accepted_at DOUBLE PRECISION NOT NULL,
        finished_at DOUBLE PRECISION,
        request TEXT NOT NULL,
        -- the replica that runs it (see bot.store.postgres.owners)
        owner TEXT NOT NULL DEFAULT ''
    )""",
    "CREATE INDEX inbox_pending ON inbox (id) WHERE state = 'pending'",
    "CREATE INDEX inbox_finished ON inbox (finished_at) WHERE state != 'pending'",
    """CREATE TABLE outbox (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        part_id TEXT NOT NULL UNIQUE,
        turn_id TEXT NOT NULL,
        conversation_key TEXT NOT NULL,
        idx INTEGER NOT NULL,
        route TEXT NOT NULL,
        text TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',
        platform_id TEXT,
        error TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        settled_at DOUBLE PRECISION,
        owner TEXT NOT NULL DEFAULT ''
    )""",
    "CREATE INDEX outbox_pending ON outbox (id) WHERE state = 'pending'",
    "CREATE INDEX outbox_by_turn ON outbox (turn_id, idx)",
    "CREATE INDEX outbox_settled ON outbox (settled_at) WHERE state != 'pending'",
)

# Per-turn usage and budget notices, as in the SQLite store's `bot.store.sqlite.usage`.
_V1_USAGE = (
    """CREATE TABLE usage (
        turn_id TEXT PRIMARY KEY,
        at DOUBLE PRECISION NOT NULL,
        channel TEXT NOT NULL,
        surface TEXT NOT NULL,
        person TEXT,
        model TEXT NOT NULL,
        input BIGINT NOT NULL,
        cache_read BIGINT NOT NULL,
        cache_write BIGINT NOT NULL,
        cache_write_1h BIGINT NOT NULL,
        output BIGINT NOT NULL,
        cost DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX usage_by_time ON usage (at)",
    "CREATE INDEX usage_by_surface ON usage (surface, at)",
    "CREATE INDEX usage_by_person ON usage (person, at)",
    """CREATE TABLE budget_notices (
        scope TEXT NOT NULL,
        period TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (scope, period)
    )""",
)

# Version 2: replicas adopt whole conversations (bot.store.postgres.claims): their pending work is
# looked up by conversation. Items accepted from now on are nobody's (owner '') until adopted.
_V2_CLAIMS = (
    "CREATE INDEX inbox_pending_by_conversation ON inbox (conversation_key, id) "
    "WHERE state = 'pending'",
    "CREATE INDEX outbox_pending_by_conversation ON outbox (conversation_key, id) "
    "WHERE state = 'pending'",
)

# Version 3: attachments, stored once by content id (sha256) with the conversations that shared
# them, as in the SQLite store's version 6.
_V3_ATTACHMENTS = (
    """CREATE TABLE attachments (
        id TEXT PRIMARY KEY,
        media_type TEXT NOT NULL,
        data BYTEA NOT NULL,
        bytes BIGINT NOT NULL,
        stored_at DOUBLE PRECISION NOT NULL,
        used_at DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX attachments_by_use ON attachments (used_at)",
    """CREATE TABLE attachment_refs (
        key TEXT NOT NULL,
        id TEXT NOT NULL,
        PRIMARY KEY (key, id)
    )""",
    "CREATE INDEX attachment_refs_by_id ON attachment_refs (id)",
)

# Version 4: the messages an answer stream opened before its turn's publication, as in the
# SQLite store's version 7.
_V4_STREAMS = (
    """CREATE TABLE streams (
        turn_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        platform_id TEXT NOT NULL,
        opened_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (turn_id, idx)
    )""",
    "CREATE INDEX streams_by_age ON streams (opened_at)",
)

# Jobs a cost breaker paused (SPEC §17), until `bot cron resume NAME`.
_V_CRON_PAUSES = (
    """CREATE TABLE cron_pauses (
        job TEXT PRIMARY KEY,
        reason TEXT NOT NULL,
        paused_at DOUBLE PRECISION NOT NULL
    )""",
)

# Jobs people set up in chat (SPEC §17): where each was set up and posts, who, when, what.
_V_CHAT_SCHEDULES = (
    """CREATE TABLE chat_schedules (
        id TEXT PRIMARY KEY,
        place TEXT NOT NULL,
        route TEXT NOT NULL,
        creator TEXT NOT NULL,
        expression TEXT NOT NULL,
        timezone TEXT NOT NULL,
        prompt TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX chat_schedules_by_place ON chat_schedules (place, created_at)",
    "CREATE INDEX chat_schedules_by_creator ON chat_schedules (creator)",
)

_V_APPROVALS = (
    # One row per tool call that waits for a person (SPEC §14): `request` is the turn request the
    # continuation answers (route included), `digest` the sha256 of the canonical arguments shown.
    """CREATE TABLE approvals (
        id TEXT PRIMARY KEY,
        turn_id TEXT NOT NULL,
        conversation_key TEXT NOT NULL,
        tool TEXT NOT NULL,
        arguments TEXT NOT NULL,
        digest TEXT NOT NULL,
        requester TEXT NOT NULL,
        approvers TEXT NOT NULL,
        request TEXT NOT NULL,
        card TEXT NOT NULL DEFAULT '{}',
        created_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',
        decided_by TEXT,
        decided_at DOUBLE PRECISION,
        result TEXT
    )""",
    "CREATE INDEX approvals_by_state ON approvals (state, expires_at)",
)

# An approved call's running mark, as in the SQLite store's version 10.
_V_APPROVAL_RUNS = ("ALTER TABLE approvals ADD COLUMN running_at DOUBLE PRECISION",)

# A chat schedule's tools (SPEC §17): those its place offered when it was set up, so its runs get
# no more. A schedule set up before this was kept gets the built-in tools only
# (`bot.policy.surfaces.BUILTIN_TOOLS`), never the `cron` rule's.
_V_SCHEDULE_TOOLS = (
    "ALTER TABLE chat_schedules ADD COLUMN tools TEXT NOT NULL "
    """DEFAULT '["load_skill","memory_recall","read_attachment"]'""",
)

# The operator console (SPEC §18): sessions by a digest of their cookie token (any replica serves
# them), refused logins by operator name (the rate limit) and the audit of every change.
_V_CONSOLE = (
    """CREATE TABLE console_sessions (
        id TEXT PRIMARY KEY,
        operator TEXT NOT NULL,
        csrf TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL
    )""",
    """CREATE TABLE console_logins (name TEXT NOT NULL, at DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX console_logins_by_name ON console_logins (name, at)",
    """CREATE TABLE console_audit (
        at DOUBLE PRECISION NOT NULL,
        operator TEXT NOT NULL,
        action TEXT NOT NULL,
        target TEXT NOT NULL,
        outcome TEXT NOT NULL
    )""",
    "CREATE INDEX console_audit_by_time ON console_audit (at)",
)

# An item taken into another turn (steered or collected, SPEC §19) names that turn.
_V_CONSUMED_BY = ("ALTER TABLE inbox ADD COLUMN consumed_by TEXT",)

# Pairing (SPEC §19): codes given out (by digest; the code itself is never stored) and the people
# an operator admitted with one.
_V_ACCESS = (
    """CREATE TABLE IF NOT EXISTS access_codes (
        digest TEXT PRIMARY KEY,
        person TEXT NOT NULL,
        label TEXT NOT NULL,
        asked_at DOUBLE PRECISION NOT NULL,
        expires_at DOUBLE PRECISION NOT NULL,
        used_at DOUBLE PRECISION
    )""",
    "CREATE INDEX IF NOT EXISTS access_codes_by_person ON access_codes (person, asked_at)",
    """CREATE TABLE IF NOT EXISTS access_people (
        person TEXT PRIMARY KEY,
        label TEXT NOT NULL,
        admitted_at DOUBLE PRECISION NOT NULL
    )""",
)

# Where each memory's words came from (SPEC §6), stamped by the host at capture. Existing rows are
# backfilled from what the row itself proves: `bot chat` is the operator's, a row without a person
# is a request-driven run's, and anyone else's is a person's no allowlist is known to name (never
# raised to more than that, as consolidation or compaction never raises one either).
_V_MEMORY_ORIGINS = (
    "ALTER TABLE memories ADD COLUMN origin TEXT NOT NULL DEFAULT 'unlisted'",
    "UPDATE memories SET origin = 'operator' WHERE conversation_key LIKE 'console:%'",
    "UPDATE memories SET origin = 'scheduled' "
    "WHERE person IS NULL AND conversation_key NOT LIKE 'console:%'",
)

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    _V1_HISTORY + _V1_MEMORY + _V1_RECORDS_EVENTS_BUFFER_RUNS + _V1_INBOX_OUTBOX + _V1_USAGE,
    _V2_CLAIMS,
    _V3_ATTACHMENTS,
    _V4_STREAMS,
    _V_CRON_PAUSES,
    _V_CHAT_SCHEDULES,
    _V_APPROVALS,
    _V_APPROVAL_RUNS,
    _V_SCHEDULE_TOOLS,
    _V_CONSOLE,
    _V_CONSUMED_BY,
    _V_ACCESS,
    _V_MEMORY_ORIGINS,
)
SCHEMA_VERSION = len(MIGRATIONS)


async def schema_version(conn: Any) -> int:
    """The version the database is at; 0 for a database this program never touched."""
    exists = await conn.fetchval("SELECT to_regclass('bot_schema') IS NOT NULL")
    if not exists:
        return 0
    found = await conn.fetchval("SELECT max(version) FROM bot_schema")
    return int(found or 0)


async def migrate(conn: Any, where: str) -> int:
    """Bring the schema up to date in one transaction; returns the version applied from."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        found = await schema_version(conn)
        if found > SCHEMA_VERSION:
            raise SchemaTooNewError(
                f"{where}: database schema version {found} is newer than this program's "
                f"({SCHEMA_VERSION}). Fix: upgrade the bot, or point store.url at another "
                "database."
            )
        if found == SCHEMA_VERSION:
            return found
        await conn.execute("CREATE TABLE IF NOT EXISTS bot_schema (version INTEGER NOT NULL)")
        for version in range(found + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version - 1]:
                await conn.execute(statement)
        await conn.execute("DELETE FROM bot_schema")
        await conn.execute("INSERT INTO bot_schema (version) VALUES ($1)", SCHEMA_VERSION)
    return found
