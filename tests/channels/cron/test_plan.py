"""Configuration checks for jobs and webhooks: every refusal names the entry and the fix."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.cli.settings import Settings
from bot.config import Secrets
from bot.errors import ConfigError
from channels.cron.plan import Destination
from tests.channels.cron.conftest import job, planned_hooks, planned_jobs, settings_with

TOKEN_ENV = "HOOK_DEPLOY_TOKEN"
SECRETS = Secrets({TOKEN_ENV: "s3cret-token-value"})


def hook(name: str = "deploy", **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "token_env": TOKEN_ENV,
        "prompt_template": "A deploy finished. Summarize it:\n{body}",
        **extra,
    }


def hooks_settings(*hooks: dict[str, Any], http: bool = True, **sections: Any) -> Settings:
    return settings_with([], webhooks=list(hooks), http={"enabled": http}, **sections)


def test_jobs_are_planned_with_their_destination_and_conversation() -> None:
    (plan,) = planned_jobs(settings_with([job(notify="slack:C0123456789")]))
    assert plan.run.notify == Destination("slack", "C0123456789")
    assert plan.run.conversation_key == "cron:digest"
    assert plan.run.channel == "cron"
    assert plan.schedule.expression == "0 * * * *"


def test_a_notify_to_a_disabled_channel_is_refused() -> None:
    settings = settings_with([job(notify="telegram:-1001234567890")])  # telegram is off
    with pytest.raises(ConfigError) as caught:
        planned_jobs(settings)
    message = str(caught.value)
    assert "cron.jobs[0] (job 'digest').notify" in message
    assert "telegram channel is not enabled" in message
    assert "Fix:" in message


def test_a_notify_to_a_disabled_channel_is_refused_even_for_a_paused_job() -> None:
    # `bot cron run NAME` can run a paused job, so its destination must be usable too.
    with pytest.raises(ConfigError, match="not enabled"):
        planned_jobs(settings_with([job(notify="telegram:42", enabled=False)]))


@pytest.mark.parametrize(
    ("notify", "says"),
    [
        ("slack:#general", "not a slack destination id"),
        ("telegram:chat", "not a telegram destination id"),
        ("telegram:@team_news", "not a telegram destination id"),
    ],
)
def test_malformed_destinations_are_refused(notify: str, says: str) -> None:
    settings = settings_with([job(notify=notify)], telegram={"enabled": True})
    with pytest.raises(ConfigError, match=says):
        planned_jobs(settings)


@pytest.mark.parametrize("ident", ["C1", "G7", "D0DM", "C0123456789"])
def test_slack_destinations_accept_any_channel_id(ident: str) -> None:
    # SPEC §7: notify is `slack:<channel id>`. The check catches names (#general), not lengths:
    # a short id (a local Slack stand-in's C1) is still an id.
    (plan,) = planned_jobs(settings_with([job(notify=f"slack:{ident}")]))
    assert plan.run.notify == Destination("slack", ident)


def test_telegram_destinations_accept_chat_ids_and_forum_topics() -> None:
    settings = settings_with(
        [job("a", notify="telegram:-1001234567890"), job("b", notify="telegram:-1001234567890:7")],
        telegram={"enabled": True},
    )
    assert [p.run.notify for p in planned_jobs(settings)] == [
        Destination("telegram", "-1001234567890"),
        Destination("telegram", "-1001234567890:7"),
    ]


def test_a_bad_schedule_names_the_job_and_the_fix() -> None:
    with pytest.raises(ConfigError) as caught:
        planned_jobs(settings_with([job(), job("standup", "0 25 * * 1-5")]))
    message = str(caught.value)
    assert message.startswith("cron.jobs[1] (job 'standup').schedule: '0 25 * * 1-5'")
    assert "Fix: write five fields" in message


def test_a_bad_conversation_id_is_refused() -> None:
    with pytest.raises(ConfigError, match="conversation_id"):
        planned_jobs(settings_with([job(conversation_id="two words")]))


def test_an_empty_prompt_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"prompt is empty"):
        planned_jobs(settings_with([job(prompt="   ")]))


def test_webhooks_are_planned_with_their_token_kept_out_of_repr() -> None:
    (plan,) = planned_hooks(hooks_settings(hook(notify="slack:C0123456789")), SECRETS)
    assert plan.token == "s3cret-token-value"
    assert "s3cret" not in repr(plan)
    assert plan.run.record_key == "webhook:deploy"
    assert plan.run.conversation_key == "webhook:deploy"
    assert plan.run.channel == "webhook"


def test_a_webhook_whose_token_is_not_set_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        planned_hooks(hooks_settings(hook()), Secrets({}))
    assert f"export {TOKEN_ENV}=" in str(caught.value)


def test_webhooks_need_the_http_port() -> None:
    with pytest.raises(ConfigError, match=r"http\.enabled"):
        planned_hooks(hooks_settings(hook(), http=False), SECRETS)


def test_webhook_names_are_unique() -> None:
    with pytest.raises(ConfigError, match="used more than once"):
        planned_hooks(hooks_settings(hook(), hook()), SECRETS)


def test_a_webhook_notify_to_a_disabled_channel_is_refused() -> None:
    settings = hooks_settings(hook(notify="slack:C0123456789"), slack={"enabled": False})
    with pytest.raises(ConfigError, match=r"webhooks\[0\] \(webhook 'deploy'\)\.notify"):
        planned_hooks(settings, SECRETS)


TEMPLATE = "Event {0} {name} {{body}} {body} and {body} again"


@given(body=st.text(max_size=300))
def test_the_body_replaces_the_placeholder_verbatim_and_braces_stay_text(body: str) -> None:
    (plan,) = planned_hooks(hooks_settings(hook(prompt_template=TEMPLATE)), SECRETS)
    prompt = plan.prompt(body)
    assert prompt == TEMPLATE.replace("{body}", body)
    assert prompt.startswith("Event {0} {name} {")  # no str.format: other braces stay as written
    assert prompt.count(body) >= 2
