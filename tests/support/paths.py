"""Where the repository and the committed commit log fixtures are, wherever a test sits."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMITLOG_FIXTURES = ROOT / "tests" / "fixtures" / "commitlog"
