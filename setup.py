"""The one part of the build pyproject.toml cannot say: the optional C twins of the entry path.
Without a C compiler the install goes on, and stenograph runs its Python twins."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "stenograph._speedups",
            ["stenograph/_speedups.c"],
            optional=True,
        )
    ]
)
