"""The plugin's tests use stenograph's kit for handler authors."""

pytest_plugins = ["stenograph.testing.fixtures"]
