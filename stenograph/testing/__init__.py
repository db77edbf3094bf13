"""Test helpers: a local server that speaks Anthropic's Messages API for the real SDK."""

from stenograph.testing.messages_server import MessagesServer, Reply

__all__ = ["MessagesServer", "Reply"]
