"""Builds the compiled RowUpdate reader (shared/rowupdate_creader.pyx, Cython). Everything
else is in pyproject.toml. Without Cython or a C compiler the install still succeeds and
shared.rowupdate_reader falls back to its pure-Python twin (slower, same results)."""

from __future__ import annotations

import sys
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that warns instead of failing: the extension only makes reading faster."""

    def run(self) -> None:
        """Build the extensions; a missing compiler is a warning."""
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 (any build failure leaves the Python reader)
            print(f"casscade: compiled RowUpdate reader not built ({exc}); "
                  "the pure-Python reader is used", file=sys.stderr)

    def build_extension(self, ext: Any) -> None:
        """Build one extension; a compile error is a warning."""
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            print(f"casscade: {ext.name} not built ({exc}); the pure-Python reader is used",
                  file=sys.stderr)


def _extensions() -> list[Any]:
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("casscade: Cython missing; the pure-Python RowUpdate reader is used",
              file=sys.stderr)
        return []
    return cythonize(["shared/rowupdate_creader.pyx"], language_level=3, quiet=True)


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
