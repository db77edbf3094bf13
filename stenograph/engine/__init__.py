"""The engine: hookspecs, discovery, presets, settings, sessions, history, rendering, tokens."""
