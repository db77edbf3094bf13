"""What a handler author needs to test a handler: a manual clock, a conversation driver, a
session on a one-handler preset, and a local server speaking Anthropic's Messages API for
the real SDK (also as pytest fixtures: ``pytest_plugins = ["stenograph.testing.fixtures"]``).
"""

from ..engine.clock import ManualClock
from .builders import Conversation
from .messages_server import MessagesServer, Reply
from .sessions import single_handler_session

__all__ = ["Conversation", "ManualClock", "MessagesServer", "Reply", "single_handler_session"]
