"""The built-in handlers, each loaded through the same plugin path as third-party ones."""
