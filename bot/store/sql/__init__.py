"""The store logic both engines share, written once: SQLite's `bot.store.sqlite` and PostgreSQL's
`bot.store.postgres` each hand these classes their database (`bot.store.sql.conn.SqlDatabase`) and
keep only what genuinely differs (connections and transactions, the schema and its migrations,
full-text search, and PostgreSQL's replica claims and leadership). Imports neither database driver.
"""
