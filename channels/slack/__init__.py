"""Slack: mentions and DMs in, threaded mrkdwn answers out (slack-bolt, Socket Mode or HTTP)."""

from channels.slack.channel import SlackChannel, SlackSetupError
from channels.slack.doctor import SlackCheckFailed, check_slack
from channels.slack.split import MESSAGE_BUDGET

__all__ = ["MESSAGE_BUDGET", "SlackChannel", "SlackCheckFailed", "SlackSetupError", "check_slack"]
