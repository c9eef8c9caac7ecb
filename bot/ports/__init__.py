"""The small protocols the core depends on, one module per concern, each with its values.

The host is wired only to these (`history`, `memory`, `records`, `leadership`, `delivery`, `intake`,
`attachments`, `voice`, `tools`, `model`, `cron`); the inbox and outbox are `intake` and `outbox`.
Implementations live in `bot.store.sqlite` and `bot.store.postgres` (stores), `bot.model` (the
runtime), `bot.voice` (the transcriber) and `channels.*` (channels and deliverers). Import from the
module that owns a name.
"""
