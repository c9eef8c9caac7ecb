"""The store logic both engines share, written once: SQLite's `bot.store` and PostgreSQL's
`bot.pgstore` each hand these classes their database (`bot.sql.conn.SqlDatabase`) and keep only
what genuinely differs (connections and transactions, the schema and its migrations, full-text
search, and PostgreSQL's replica claims and leadership). Imports neither database driver.
"""
