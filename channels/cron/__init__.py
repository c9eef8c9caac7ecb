"""Scheduled posts and webhooks: request-driven turns started by the clock or by an HTTP call.

`plan_jobs` / `plan_hooks` check the configuration; `CronRunner` runs one turn and records it
(`bot.ports.cron.CronRuns` is the port for the records); `CronScheduler` fires jobs on their
schedules; `WebhookEndpoint` serves `POST /hooks/<name>`. Nothing here imports the store or the
host: the composition root hands in the host (as a `TurnSink`), its deliverers and the run
records.
"""
