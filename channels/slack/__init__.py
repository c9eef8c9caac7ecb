"""Slack: mentions and DMs in, threaded mrkdwn answers out (slack-bolt, Socket Mode or HTTP)."""

from channels.slack.channel import SlackChannel
from channels.slack.doctor import check_slack
from channels.slack.split import MESSAGE_BUDGET

__all__ = ["MESSAGE_BUDGET", "SlackChannel", "check_slack"]
