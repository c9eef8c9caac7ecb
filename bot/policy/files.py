"""Reading and checking the per-surface policy: prompt templates and `[[surfaces]]` rules.

Everything is read once at start-up (and by `bot doctor`); every problem is a
`bot.config.ConfigError` naming the key and the fix: a template with an unknown slot, a per-turn
fact in the system part or a dropped fact; a rule's missing instructions file, unknown skill, or
answer limit the model's window cannot hold; a money budget for a model with no price.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.agentfiles import missing_skill
from bot.config import CoreSettings
from bot.config.models import model_chain
from bot.errors import ConfigError, PolicyError, TemplateError
from bot.policy.budget import price_for
from bot.policy.models import as_choice
from bot.policy.surfaces import Policies, load_policies
from bot.ports.model import ModelRef
from bot.prompt import SESSION_SLOTS, TURN_SLOTS, AgentTexts, Template
from bot.prompt.template import DEFAULT_SESSION_TEMPLATE, DEFAULT_TURN_TEMPLATE, Slots

TEMPLATE_MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class Policy:
    policies: Policies
    session_template: Template
    turn_template: Template


def load_policy(settings: CoreSettings, agent: AgentTexts) -> Policy:
    rules = settings.surfaces
    try:
        policies = load_policies(rules, _models(settings))
    except PolicyError as exc:
        raise ConfigError(str(exc)) from None
    optional = ["instructions"] if not any(p.instructions for p in policies.all) else []
    optional += ["skills"] if not any(rule.skills for rule in rules) else []
    optional += ["memory"] if not settings.memory.enabled else []
    prompt = settings.prompt
    session = _template(prompt.session_template, "session", SESSION_SLOTS, optional)
    # Only Slack's assistant threads fill {viewing}: an older turn template may leave it out.
    turn = _template(prompt.turn_template, "turn", TURN_SLOTS, ["viewing"])
    _check_rules(settings, agent)
    return Policy(policies, session or DEFAULT_SESSION_TEMPLATE, turn or DEFAULT_TURN_TEMPLATE)


def _template(path: Path | None, name: str, slots: Slots, optional: list[str]) -> Template | None:
    if path is None:
        return None
    key = f"prompt.{name}_template = '{path}'"
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"{key}: cannot be read ({exc.strerror}). Fix: create it (README: prompt templates "
            f"shows the built-in one), or remove prompt.{name}_template."
        ) from None
    if len(data) > TEMPLATE_MAX_BYTES:
        raise ConfigError(f"{key}: larger than {TEMPLATE_MAX_BYTES} bytes. Fix: shorten it.")
    try:
        return Template.parse(data.decode("utf-8-sig"), slots, where=key, optional=optional)
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{key}: not valid UTF-8 (byte {exc.start}). Fix: save it as UTF-8."
        ) from None
    except TemplateError as exc:
        raise ConfigError(str(exc)) from None


def _models(settings: CoreSettings) -> list[tuple[ModelRef, ...]]:
    """Each rule's model chain (empty where the rule names no model)."""
    return [
        ()
        if rule.model is None
        else model_chain(rule.model, settings.model, settings.providers, f"surfaces[{i}].model")
        for i, rule in enumerate(settings.surfaces)
    ]


def _check_rules(settings: CoreSettings, agent: AgentTexts) -> None:
    known = {skill.name for skill in agent.skills}
    for index, (rule, chain) in enumerate(zip(settings.surfaces, _models(settings), strict=True)):
        where = f"surfaces[{index}]"
        window = chain[0].context_window if chain else settings.model.window
        for name in rule.skills:
            if name not in known:
                raise missing_skill(f"{where}.skills", name, settings.agent.skills_root, known)
        if rule.max_tokens is not None and rule.max_tokens >= window:
            raise ConfigError(
                f"{where}.max_tokens = {rule.max_tokens}: leaves no room for input in a context "
                f"window of {window} tokens. Fix: lower it or raise model.context_window."
            )
    _check_prices(settings)


def _check_prices(settings: CoreSettings) -> None:
    budget = settings.budget
    money = budget.uses_money or any(r.budget and r.budget.uses_money for r in settings.surfaces)
    if not money:
        return
    named = [as_choice(r.model).name for r in settings.surfaces if r.model is not None]
    models = [settings.model.name, *(name.partition(":")[2] or name for name in named)]
    for model in models:
        if price_for(model, budget.prices) is None:
            raise ConfigError(
                f"a money budget is set, but model {model!r} has no price. Fix: add "
                f'[budget.prices."{model}"] with input = ... and output = ... (US dollars per '
                "million tokens)."
            )
