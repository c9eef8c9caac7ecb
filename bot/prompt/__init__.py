"""Prompt assembly: pure functions from the agent's texts and one turn's facts to a request body.

No I/O happens here (the agent's files are read by `bot.agentfiles`). The public surface:
`Assembler` (the whole request), `TokenCounter` (offline token estimates), `speaker_label`, the
agent's texts (`AgentTexts`, `Skill`), `SILENT_TOKEN`, `host_command` (the host's own
`/compact`, `/start`, `/help`), and the errors `UnknownSkill` (a `/name` that names no skill)
and `WindowExceeded` (a request that cannot fit the model's window).
"""

from bot.prompt.assembler import Assembler, WindowExceeded
from bot.prompt.message import speaker_label
from bot.prompt.session import SILENT_TOKEN
from bot.prompt.skills import AgentTexts, Skill, UnknownSkill, host_command
from bot.prompt.tokens import TokenCounter

__all__ = [
    "SILENT_TOKEN",
    "AgentTexts",
    "Assembler",
    "Skill",
    "TokenCounter",
    "UnknownSkill",
    "WindowExceeded",
    "host_command",
    "speaker_label",
]
