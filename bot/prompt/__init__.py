"""Prompt assembly: pure functions from the agent's texts and one turn's facts to a request body.

No I/O happens here (the agent's files are read by `bot.agentfiles`). The public surface:
`Assembler` (the whole request, built from a `bot.ports.model.TurnPrompt`; `ModelLimits` and
`Templates` configure it), the session and turn-context `Template`s with their slots,
`TokenCounter` (offline token estimates), `speaker_label`, the agent's texts (`AgentTexts`,
`Skill`), `SILENT_TOKEN` and `host_command` (the host's own `/compact`, `/start`, `/help`). Its
errors (`UnknownSkill`, `WindowExceeded`, `TemplateError`) are in `bot.errors`.
"""

from bot.prompt.assembler import Assembler, ModelLimits, Templates
from bot.prompt.message import speaker_label
from bot.prompt.session import SILENT_TOKEN
from bot.prompt.skills import AgentTexts, Skill, host_command
from bot.prompt.template import SESSION_SLOTS, TURN_SLOTS, Template
from bot.prompt.tokens import TokenCounter

__all__ = [
    "SESSION_SLOTS",
    "SILENT_TOKEN",
    "TURN_SLOTS",
    "AgentTexts",
    "Assembler",
    "ModelLimits",
    "Skill",
    "Template",
    "Templates",
    "TokenCounter",
    "host_command",
    "speaker_label",
]
