"""redact-secrets: secrets in tool results and tool inputs are sent as ``[REDACTED:<kind>]``.

The history keeps the originals; only what is sent changes, once per entry, so every later
request sends the same bytes for it and the prompt cache stays valid.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import Field, StringConstraints, field_validator

import stenograph
from stenograph import Entry, PreCallCall

from .redactor import Redactor

log = logging.getLogger("stenograph_redact")
Regex = Annotated[str, StringConstraints(min_length=1, max_length=1000)]


@dataclass(frozen=True, kw_only=True)
class SecretsRedacted(stenograph.Event):
    """Secrets were replaced in what is sent for one entry (never the secrets themselves)."""

    uuid: str
    count: int
    kinds: tuple[str, ...]


class RedactSecretsSettings(stenograph.HandlerSettings):
    """Settings of redact-secrets."""

    patterns: list[Regex] = Field(
        default_factory=list,
        max_length=100,
        description="Extra regular expressions (at most 100, each 1-1000 chars), redacted as"
        " [REDACTED:custom]; a named group 'secret' limits the replacement to that group.",
    )
    builtin_patterns: bool = Field(
        True,
        description="Also redact AWS access key ids, sk-ant-/sk- API keys, GitHub tokens,"
        " private key PEM blocks, password=/token= assignments and bearer tokens.",
    )
    redact_tool_inputs: bool = Field(
        True, description="Also redact the string inputs of tool_use blocks."
    )

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for i, pattern in enumerate(patterns):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"patterns[{i}] {pattern!r} is not a valid regex: {exc}") from None
        return patterns


class RedactSecrets(stenograph.Handler):
    """Before each request, redacts the entries appended since it last ran."""

    name = "redact-secrets"
    phase = "pre-call"
    summary = "Secrets in tool results and tool inputs are sent as [REDACTED:<kind>]."
    Settings = RedactSecretsSettings
    settings: RedactSecretsSettings

    def __init__(self, settings: stenograph.HandlerSettings, slot: int = 0) -> None:
        super().__init__(settings, slot)
        self.redactor = Redactor.build(self.settings.patterns, self.settings.builtin_patterns)

    @stenograph.hookimpl
    def pre_call(self, call: PreCallCall) -> None:
        """Redact each entry appended since the previous request."""
        for entry in call.unseen_entries:
            if entry.has_tools:
                self._redact(call, entry)

    def _redact(self, call: PreCallCall, entry: Entry) -> None:
        base = entry.content if entry.sent_content is None else entry.sent_content
        if isinstance(base, str):
            return
        found: list[str] = []
        redacted = self.redactor.blocks(base, self.settings.redact_tool_inputs, found)
        if not found:
            return
        call.replace_sent_content(entry, redacted)
        kinds = tuple(sorted(set(found)))
        log.info("redacted %d secret(s) in entry %d: %s", len(found), entry.index, ", ".join(kinds))
        call.emit(SecretsRedacted, uuid=entry.uuid, count=len(found), kinds=kinds)
