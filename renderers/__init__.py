"""Pure functions from an ask-human request to Slack, Feishu and plain-text messages, and back."""
