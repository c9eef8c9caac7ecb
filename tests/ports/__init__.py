"""The store ports' contract suite: each test (marked `all_engines`) runs on SQLite, PostgreSQL
and the in-memory store of `bot.testing`, so the doubles the host tests use keep the promises the
real engines keep; the work share and leadership tests run on the replica engines
(`replica_engines`). A check of what only SQL has (files, full disks) is marked `both_engines`.
"""
