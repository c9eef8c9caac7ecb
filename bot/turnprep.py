"""What a turn's prompt is prepared from besides its request: the memory scope its recall may
hear, and what its surface's rule changes in the request (shared by the host and `bot preview`)."""

from __future__ import annotations

from bot.memory.departures import memory_surface
from bot.policy.surfaces import SurfacePolicy
from bot.ports.memory import MemoryScope
from bot.ports.model import SurfacePrompt
from bot.turns import SurfaceKind, TurnRequest


def memory_scope(request: TurnRequest) -> MemoryScope:
    """Where this turn's words were heard, for the memory privacy rule (SPEC §6)."""
    if request.surface is None:
        return MemoryScope(
            surface=request.conversation_key, person=request.person, surfaceless=True
        )
    return MemoryScope(
        surface=memory_surface(request.channel, request.surface.id),
        person=request.person,
        private=request.surface.kind is SurfaceKind.DM,
    )


def surface_prompt(policy: SurfacePolicy) -> SurfacePrompt:
    """What the surface's rule changes in the model request."""
    rule = policy.rule
    if rule is None:
        return SurfacePrompt()
    models = policy.models
    return SurfacePrompt(
        policy.instructions,
        tuple(rule.skills),
        models[0].name if models else None,
        rule.max_tokens,
        rule.thinking_budget,
        models=models,
    )
