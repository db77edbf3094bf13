"""Another git revision of stenograph beside this checkout, in one process: its package
exported from this repository as ``stenograph_rev`` (its absolute references to
``stenograph.`` modules renamed, its C twins built as installing it builds them)."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from . import REPO

RENAMED = "stenograph_rev"
# an absolute reference to a module of the package (imports, entry-point values, resources)
ABSOLUTE = re.compile(
    r"(?<![\w.-])stenograph(?=\.[a-z_]+\b)|(?<=\bfrom )stenograph\b|(?<=\bimport )stenograph\b"
)


def export(rev: str, into: Path) -> ModuleType:
    """The package of ``rev`` as ``stenograph_rev``, imported from ``into``."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, "stenograph"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    package = into / "stenograph"
    for source in package.rglob("*.py"):
        source.write_text(ABSOLUTE.sub(RENAMED, source.read_text()))
    package.rename(into / RENAMED)
    if (into / RENAMED / "_speedups.c").exists():
        build_twins(into)
    sys.path.insert(0, str(into))
    return importlib.import_module(RENAMED)


def build_twins(into: Path) -> None:
    """Compile the revision's own C twins of the entry path into its package, as installing
    it does: without them it would run the Python twins, and any change would look ~15 %
    cheaper than it is (measured: HEAD beside itself read 0.82-0.87 before this)."""
    source = f"{RENAMED}/_speedups.c"
    setup = (
        "from setuptools import Extension, setup;"
        f" setup(name={RENAMED!r}, ext_modules=[Extension('{RENAMED}._speedups', [{source!r}])])"
    )
    command = [sys.executable, "-c", setup, "build_ext", "--inplace", "--quiet"]
    built = subprocess.run(command, cwd=into, capture_output=True, text=True)
    if built.returncode:  # reported beside the results: the revision runs the Python twins
        print(f"the revision's C twins did not build:\n{built.stderr[-2000:]}", file=sys.stderr)


def twins(package: ModuleType) -> str:
    """Which twins of the entry path ``package`` runs: 'C' or 'Python'."""
    try:
        speedups = importlib.import_module(f"{package.__name__}.engine.speedups")
    except ImportError:  # a revision from before the C twins
        return "Python"
    return "Python" if speedups.C is None else "C"
