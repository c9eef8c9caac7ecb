"""Slack: mentions and DMs in, threaded mrkdwn answers out (slack-bolt, Socket Mode or HTTP)."""
