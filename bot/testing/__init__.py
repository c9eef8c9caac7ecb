"""Test doubles that ship with the bot: an in-memory store implementing every store port
(`bot.testing.store.open_memory_store`), a scripted model runtime (`bot.testing.model`), an
outbox deliverer (`bot.testing.delivery`) and a resumer of suspended turns (`bot.testing.resumer`).
They are type-checked like the code they stand in for, and the store runs the same contract tests
as SQLite and PostgreSQL (tests/engines.py), so a host test against them exercises the promises
the real engines keep. Production code never imports this package.
"""
