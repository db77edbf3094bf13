"""No POSIX-only module at import time: every module of the package imports where
``fcntl`` does not exist (as on Windows)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import importlib, pkgutil, sys
sys.modules["fcntl"] = None  # importing it now raises ImportError, as on Windows
import stenograph
skipped = []
for info in pkgutil.walk_packages(stenograph.__path__, "stenograph."):
    if info.name.endswith("__main__"):
        continue  # runs the command line
    try:
        importlib.import_module(info.name)
    except ImportError as exc:
        if "fcntl" in str(exc):
            raise
        skipped.append(info.name)  # an optional extra that is not installed
print("ok", skipped)
"""


def test_every_module_imports_without_fcntl():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")
