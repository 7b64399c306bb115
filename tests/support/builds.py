"""A build script run in the background while tests go on (test code only)."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from support.materializer_harness import kill_group
from support.paths import ROOT


@dataclass
class Build:
    """A build's process, in a process group of its own, and the file its output goes to."""

    proc: subprocess.Popen
    output: IO[bytes]

    @classmethod
    def start(cls, command: Sequence[str], env: Mapping[str, str] | None = None,
              nice: int = 10) -> Build:
        """`command` in the checkout at a lower priority (`nice`), `env` added to ours."""
        output = tempfile.TemporaryFile()  # noqa: SIM115 — kept open with the build, read by wait()
        proc = subprocess.Popen(["nice", "-n", str(nice), *command], cwd=ROOT,
                                env={**os.environ, **(env or {})}, stdout=output,
                                stderr=subprocess.STDOUT, start_new_session=True)
        return cls(proc, output)

    def wait(self, timeout_s: float) -> tuple[int, str]:
        """Its exit code and output once it has ended (stopped if `timeout_s` passes)."""
        try:
            code = self.proc.wait(timeout_s)
        finally:
            self.stop()
        with self.output:
            self.output.seek(0)
            return code, self.output.read().decode(errors="replace")

    def stop(self) -> None:
        """Stop it if it still runs (a run that ends or is interrupted first): SIGTERM to
        its process group and every process under it."""
        if self.proc.poll() is None:
            kill_group(self.proc, signal.SIGTERM)
