"""When a failed streaming query is started again from its checkpoint (pure, no Spark).

A query fails for two kinds of reasons. Transient ones (a broker restarting, a topic whose
leaders are not elected yet, a lost executor, a request timing out) pass: the same query
started again from its checkpoint carries on, re-running at most the failed micro-batch
(at-least-once, as every restart). Permanent ones (data deleted before it was read, a
checkpoint from another job, a bad setting) fail the same way every time: restarting only
hides them, so the runner exits with the error instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Failures a restart cannot cure. Everything else is retried, within the limits below: an
# unknown failure that is in fact permanent then exits after `max_restarts` attempts.
_PERMANENT = [
    (re.compile(p, re.I), why) for p, why in [
        (r"failOnDataLoss|data loss|OffsetOutOfRange|were deleted before",
         "raw records were deleted before the job read them (retention shorter than the "
         "job's lag): see the runbook's 'data loss' section"),
        (r"AnalysisException|UnsupportedOperationException|IllegalArgumentException",
         "the query or its settings are invalid"),
        (r"STATE_STORE_INCOMPATIBLE|incompatible.*checkpoint|checkpoint.*incompatible|"
         r"schema.*state.*(mismatch|incompatible)|STATEFUL_PROCESSOR",
         "the checkpoint does not fit this job (another job's, or changed settings)"),
        (r"StateAhead", "a partition store is ahead of its checkpoint: it belongs to "
         "another checkpoint"),
        (r"INVALID_TRANSACTION_TIMEOUT|InvalidTransactionTimeout",
         "events.transaction_timeout_s is over the brokers' transaction.max.timeout.ms"),
        (r"PYTHON_VERSION_MISMATCH|ModuleNotFoundError|ImportError",
         "the executors' Python environment is broken"),
    ]
]


def permanent_reason(error: str) -> str | None:
    """Why `error` (a failed query's message and cause chain) is permanent, or None when a
    restart from the checkpoint may cure it."""
    for pattern, why in _PERMANENT:
        if pattern.search(error):
            return why
    return None


def short_reason(error: str) -> str:
    """A metric label for `error`: the first exception class named in it, else 'unknown'."""
    match = re.search(r"([A-Z]\w*(?:Exception|Error))", error)
    return match.group(1) if match else "unknown"


@dataclass
class RestartPolicy:
    """Restart a failed query after a backoff, at most `max_restarts` times in a row; a
    micro-batch completed in between resets the count (`progressed`)."""

    max_restarts: int = 10
    backoff_s: float = 5.0
    max_backoff_s: float = 60.0
    failures: int = 0

    def next_delay(self, error: str) -> float | None:
        """Seconds to wait before the next start, or None: give up (permanent, or too many
        failures in a row)."""
        if permanent_reason(error) is not None or self.failures >= self.max_restarts:
            return None
        delay = min(self.max_backoff_s, self.backoff_s * 2 ** self.failures)
        self.failures += 1
        return delay

    def progressed(self) -> None:
        """The query completed a micro-batch: the next failure starts a fresh count."""
        self.failures = 0
