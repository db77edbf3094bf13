"""Adapters between stenograph and the outside world (recorded transcripts, agent frameworks)."""
