"""The composition root's builders, one concern each, that `bot.cli.compose.App` calls in its
start-up order: the model client (`model`), the cron scheduler and webhooks (`cron`), approvals
(`approvals`) and what the HTTP port and traces serve (`serving`)."""
