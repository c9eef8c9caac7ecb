"""The database schema as an ordered list of forward migrations, and the code that applies them.

Migration N (1-based) takes a database from `PRAGMA user_version` N-1 to N. Each is a tuple of
single statements rather than a script, because `executescript` would commit the transaction the
migration runs in. Never edit a released migration: append a new one.
"""

from __future__ import annotations

import aiosqlite

from bot.errors import SchemaTooNewError

_V1_HISTORY = (
    # One row per conversation: activity drives idle and oldest-first pruning; `bytes` is the sum
    # of its messages' stored sizes, so the aggregate bound needs no scan of the message table.
    """CREATE TABLE conversations (
        key TEXT PRIMARY KEY,
        last_active REAL NOT NULL,
        bytes INTEGER NOT NULL DEFAULT 0,
        next_seq INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX conversations_by_activity ON conversations (last_active)",
    """CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        UNIQUE (key, seq)
    )""",
    # Aggregate counters kept by triggers, so every publish checks the bounds in O(1).
    "CREATE TABLE totals (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID",
    "INSERT INTO totals (name, value) VALUES ('conversations', 0), ('history_bytes', 0)",
    """CREATE TRIGGER conversations_added AFTER INSERT ON conversations BEGIN
        UPDATE totals SET value = value + 1 WHERE name = 'conversations';
        UPDATE totals SET value = value + NEW.bytes WHERE name = 'history_bytes';
    END""",
    """CREATE TRIGGER conversations_removed AFTER DELETE ON conversations BEGIN
        UPDATE totals SET value = value - 1 WHERE name = 'conversations';
        UPDATE totals SET value = value - OLD.bytes WHERE name = 'history_bytes';
    END""",
    """CREATE TRIGGER conversations_resized AFTER UPDATE OF bytes ON conversations BEGIN
        UPDATE totals SET value = value - OLD.bytes + NEW.bytes WHERE name = 'history_bytes';
    END""",
)

_V1_MEMORY = (
    """CREATE TABLE memories (
        id INTEGER PRIMARY KEY,
        conversation_key TEXT NOT NULL,
        surface TEXT NOT NULL,
        person TEXT,
        text TEXT NOT NULL,
        captured_at REAL NOT NULL
    )""",
    "CREATE INDEX memories_by_surface ON memories (surface)",
    "CREATE INDEX memories_by_person ON memories (person)",
    # Who took part where: a DM recall may use what was said in surfaces its person spoke in.
    """CREATE TABLE participants (
        person TEXT NOT NULL,
        surface TEXT NOT NULL,
        PRIMARY KEY (person, surface)
    ) WITHOUT ROWID""",
    """CREATE VIRTUAL TABLE memories_fts USING fts5 (
        text, content = 'memories', content_rowid = 'id',
        tokenize = 'porter unicode61 remove_diacritics 2'
    )""",
    """CREATE TRIGGER memories_indexed AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts (rowid, text) VALUES (NEW.id, NEW.text);
    END""",
    """CREATE TRIGGER memories_unindexed AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', OLD.id, OLD.text);
    END""",
)

_V1_RECORDS_EVENTS_BUFFER = (
    """CREATE TABLE turn_records (
        seq INTEGER PRIMARY KEY,
        turn_id TEXT NOT NULL UNIQUE,
        conversation_key TEXT NOT NULL,
        started_at REAL NOT NULL,
        outcome TEXT NOT NULL,
        body TEXT NOT NULL
    )""",
    "CREATE INDEX turn_records_by_conversation ON turn_records (conversation_key, seq)",
    """CREATE TABLE events (
        source TEXT NOT NULL,
        event_id TEXT NOT NULL,
        seen_at REAL NOT NULL,
        PRIMARY KEY (source, event_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX events_by_age ON events (seen_at)",
    """CREATE TABLE chat_buffer (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL,
        added_at REAL NOT NULL,
        body TEXT NOT NULL
    )""",
    "CREATE INDEX chat_buffer_by_key ON chat_buffer (key, id)",
    "CREATE INDEX chat_buffer_by_age ON chat_buffer (added_at)",
)

_V2_TERM_FREQUENCIES = (
    # How many memories hold each word, so recall can pick a query's rarest words without
    # reading the index (FTS5's own vocabulary table counts a word by walking its postings).
    # Memories captured before this table existed are not counted: that only makes their words
    # look rarer when choosing query words, never changes what may be recalled. IF NOT EXISTS:
    # some development files got this table under version 1.
    """CREATE TABLE IF NOT EXISTS term_docs (
        term TEXT PRIMARY KEY, docs INTEGER NOT NULL
    ) WITHOUT ROWID""",
)

# Version 3: each turn record's size and their total (kept by triggers, like history's), so the
# records can be bounded in bytes as well as in count without summing them on every save.
_V3_RECORD_SIZES = (
    "ALTER TABLE turn_records ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0",
    "UPDATE turn_records SET bytes = length(CAST(body AS BLOB))",
    """INSERT INTO totals (name, value)
        VALUES ('record_bytes', (SELECT coalesce(sum(bytes), 0) FROM turn_records))""",
    """CREATE TRIGGER records_added AFTER INSERT ON turn_records BEGIN
        UPDATE totals SET value = value + NEW.bytes WHERE name = 'record_bytes';
    END""",
    """CREATE TRIGGER records_removed AFTER DELETE ON turn_records BEGIN
        UPDATE totals SET value = value - OLD.bytes WHERE name = 'record_bytes';
    END""",
)

# Version 4: the durable inbox and outbox (SPEC §11). An inbox row is an accepted event's turn
# (request and route as JSON) until it reaches a terminal state; an outbox row is one part of an
# answer until the platform took it (or refused it for good). The dedupe marks stay in `events`.
_V4_INBOX_OUTBOX = (
    """CREATE TABLE inbox (
        id INTEGER PRIMARY KEY,
        turn_id TEXT NOT NULL,
        conversation_key TEXT NOT NULL,
        source TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',
        attempts INTEGER NOT NULL DEFAULT 0,
        accepted_at REAL NOT NULL,
        finished_at REAL,
        request TEXT NOT NULL
    )""",
    "CREATE INDEX inbox_pending ON inbox (id) WHERE state = 'pending'",
    "CREATE INDEX inbox_finished ON inbox (finished_at) WHERE state != 'pending'",
    """CREATE TABLE outbox (
        id INTEGER PRIMARY KEY,
        part_id TEXT NOT NULL UNIQUE,
        turn_id TEXT NOT NULL,
        conversation_key TEXT NOT NULL,
        idx INTEGER NOT NULL,
        route TEXT NOT NULL,
        text TEXT NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',
        platform_id TEXT,
        error TEXT,
        created_at REAL NOT NULL,
        settled_at REAL
    )""",
    "CREATE INDEX outbox_pending ON outbox (id) WHERE state = 'pending'",
    "CREATE INDEX outbox_by_turn ON outbox (turn_id, idx)",
    "CREATE INDEX outbox_settled ON outbox (settled_at) WHERE state != 'pending'",
)

# Version 5: each memory names its source turn and where the speaker's words sit in its text (so
# recall can hold back what a request already carries, and `/memory` can show people their own
# words); participation becomes spans of time, so a DM's reach into a shared surface expires.
# Existing participants get one span from their first to their last memory there.
_V5_MEMORY_SOURCES = (
    "ALTER TABLE memories ADD COLUMN turn_id TEXT",
    "ALTER TABLE memories ADD COLUMN said_from INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE memories ADD COLUMN said_to INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX memories_by_conversation ON memories (conversation_key, captured_at)",
    """CREATE TABLE participation (
        id INTEGER PRIMARY KEY,
        person TEXT NOT NULL,
        surface TEXT NOT NULL,
        since REAL NOT NULL,
        until REAL NOT NULL
    )""",
    "CREATE INDEX participation_by_person ON participation (person, surface, until)",
    """INSERT INTO participation (person, surface, since, until)
        SELECT person, surface, min(captured_at), max(captured_at) FROM memories
        WHERE person IS NOT NULL GROUP BY person, surface""",
    "DROP TABLE participants",
)

# Version 6: attachments, stored once by content id (sha256) with the conversations that shared
# them; their byte total is kept by triggers like history's.
_V6_ATTACHMENTS = (
    """CREATE TABLE attachments (
        id TEXT PRIMARY KEY,
        media_type TEXT NOT NULL,
        data BLOB NOT NULL,
        bytes INTEGER NOT NULL,
        stored_at REAL NOT NULL,
        used_at REAL NOT NULL
    )""",
    "CREATE INDEX attachments_by_use ON attachments (used_at)",
    """CREATE TABLE attachment_refs (
        key TEXT NOT NULL,
        id TEXT NOT NULL,
        PRIMARY KEY (key, id)
    ) WITHOUT ROWID""",
    "CREATE INDEX attachment_refs_by_id ON attachment_refs (id)",
    "INSERT INTO totals (name, value) VALUES ('attachment_bytes', 0)",
    """CREATE TRIGGER attachments_added AFTER INSERT ON attachments BEGIN
        UPDATE totals SET value = value + NEW.bytes WHERE name = 'attachment_bytes';
    END""",
    """CREATE TRIGGER attachments_removed AFTER DELETE ON attachments BEGIN
        UPDATE totals SET value = value - OLD.bytes WHERE name = 'attachment_bytes';
    END""",
)

# Version 7: the messages an answer stream opened on the platform before its turn's publication
# (SPEC §7 streaming): the publication's parts take their ids (and the rows go), so a turn run
# again after a crash finishes those messages instead of posting the answer a second time.
_V7_STREAMS = (
    """CREATE TABLE streams (
        turn_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        platform_id TEXT NOT NULL,
        opened_at REAL NOT NULL,
        PRIMARY KEY (turn_id, idx)
    ) WITHOUT ROWID""",
    "CREATE INDEX streams_by_age ON streams (opened_at)",
)

# Jobs people set up in chat (SPEC §17): where each was set up and posts, who, when, what.
_V_CHAT_SCHEDULES = (
    """CREATE TABLE IF NOT EXISTS chat_schedules (
        id TEXT PRIMARY KEY,
        place TEXT NOT NULL,
        route TEXT NOT NULL,
        creator TEXT NOT NULL,
        expression TEXT NOT NULL,
        timezone TEXT NOT NULL,
        prompt TEXT NOT NULL,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS chat_schedules_by_place ON chat_schedules (place, created_at)",
    "CREATE INDEX IF NOT EXISTS chat_schedules_by_creator ON chat_schedules (creator)",
)

_V_APPROVALS = (
    # One row per tool call that waits for a person (SPEC §14): `request` is the turn request the
    # continuation answers (route included), `digest` the sha256 of the canonical arguments shown.
    """CREATE TABLE IF NOT EXISTS approvals (
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
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        state TEXT NOT NULL DEFAULT 'pending',
        decided_by TEXT,
        decided_at REAL,
        result TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS approvals_by_state ON approvals (state, expires_at)",
)

# Version 10: an approved call is marked running (a conditional update) before it runs, inside its
# continuation turn: a process that stops mid-call leaves the mark, and the call never runs again.
_V_APPROVAL_RUNS = ("ALTER TABLE approvals ADD COLUMN running_at REAL",)

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
    """CREATE TABLE IF NOT EXISTS console_sessions (
        id TEXT PRIMARY KEY,
        operator TEXT NOT NULL,
        csrf TEXT NOT NULL,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS console_logins (name TEXT NOT NULL, at REAL NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS console_logins_by_name ON console_logins (name, at)",
    """CREATE TABLE IF NOT EXISTS console_audit (
        at REAL NOT NULL,
        operator TEXT NOT NULL,
        action TEXT NOT NULL,
        target TEXT NOT NULL,
        outcome TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS console_audit_by_time ON console_audit (at)",
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
        asked_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        used_at REAL
    )""",
    "CREATE INDEX IF NOT EXISTS access_codes_by_person ON access_codes (person, asked_at)",
    """CREATE TABLE IF NOT EXISTS access_people (
        person TEXT PRIMARY KEY,
        label TEXT NOT NULL,
        admitted_at REAL NOT NULL
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
    _V1_HISTORY + _V1_MEMORY + _V1_RECORDS_EVENTS_BUFFER,
    _V2_TERM_FREQUENCIES,
    _V3_RECORD_SIZES,
    _V4_INBOX_OUTBOX,
    _V5_MEMORY_SOURCES,
    _V6_ATTACHMENTS,
    _V7_STREAMS,
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


async def schema_version(conn: aiosqlite.Connection) -> int:
    async with conn.execute("PRAGMA user_version") as cursor:
        row = await cursor.fetchone()
    return int(row[0]) if row else 0


async def migrate(conn: aiosqlite.Connection, where: str) -> int:
    """Bring the schema up to date inside one write transaction; returns the version applied from.

    Runs under BEGIN IMMEDIATE so two processes opening a fresh file never both migrate it.
    """
    await conn.execute("BEGIN IMMEDIATE")
    try:
        found = await schema_version(conn)
        if found > SCHEMA_VERSION:
            raise SchemaTooNewError(
                f"{where}: database schema version {found} is newer than this program's "
                f"({SCHEMA_VERSION}). Fix: upgrade the bot, or point store.path at another file."
            )
        for version in range(found + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version - 1]:
                await conn.execute(statement)
        # PRAGMA takes no parameters; the value is our own integer.
        await conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        await conn.execute("COMMIT")
    except BaseException:
        await conn.execute("ROLLBACK")
        raise
    return found
