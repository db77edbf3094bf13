"""Exceptions raised by stenograph."""

from __future__ import annotations


class StenographError(Exception):
    """Base class of every error stenograph raises on purpose."""


class PresetError(StenographError, ValueError):
    """A preset file or a setting is invalid; the message names file, slot and key."""


class PluginError(StenographError):
    """A handler plugin cannot be found, loaded or registered."""


class HandlerError(StenographError):
    """A handler failed while running a phase (raised only in strict mode)."""

    def __init__(self, handler: str, slot: int, phase: str, error: BaseException) -> None:
        super().__init__(f"handler '{handler}' (slot {slot}) failed in {phase}: {error!r}")
        self.handler, self.slot, self.phase, self.error = handler, slot, phase, error


class RequestError(StenographError):
    """An outgoing request breaks a rule of the Messages API (raised in strict mode);
    ``problems`` lists them as ``check_request`` does."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("the API would reject this request: " + "; ".join(problems))
        self.problems = list(problems)
