"""A verify run's results: the report people read, its JSON form, and its metrics."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from casscade.verify.compare import MISMATCHES, PENDING, VERDICTS
from casscade.verify.verifier import TableResult
from shared.metrics import Registry

# exit codes beyond click's own (1: the run failed, 2: bad usage)
MISMATCH_EXIT = 3
PENDING_EXIT = 4


def exit_code(results: list[TableResult]) -> int:
    """0: every key equal; MISMATCH_EXIT: a key missing, extra or different; PENDING_EXIT:
    none wrong, but keys still in flight after every recheck."""
    if any(r.report.mismatched for r in results):
        return MISMATCH_EXIT
    if any(r.report.counts[PENDING] for r in results):
        return PENDING_EXIT
    return 0


def text_report(results: list[TableResult], header: str) -> str:
    """The report for a terminal: a line per table, then its first differences."""
    lines = [header]
    for r in results:
        counts = "  ".join(f"{v} {r.report.counts[v]:,}" for v in VERDICTS)
        lines.append(f"{r.table}: {counts}  ({r.rows:,} rows, {r.events:,} events, "
                     f"{r.rechecks} rechecks, {r.seconds:.1f} s)")
        lines += [f"  note: {n}" for n in r.notes]
        for d in r.report.differences:
            lines.append(f"  {d.verdict} {d.key}")
            lines.append(f"    table:  {_json(d.table)}")
            lines.append(f"    stream: {_json(d.stream)}")
        shown = len(r.report.differences)
        if r.report.mismatched > shown:
            lines.append(f"  ... and {r.report.mismatched - shown:,} more")
        if r.report.counts[PENDING]:
            lines.append(f"  pending: {', '.join(map(str, r.report.pending[:5]))}"
                         + (" ..." if r.report.counts[PENDING] > 5 else ""))
    code = exit_code(results)
    keys = sum(sum(r.report.counts.values()) for r in results)
    if code == 0:
        lines.append(f"verified: all {keys:,} keys equal")
    elif code == PENDING_EXIT:
        lines.append(f"not verified: {sum(r.report.counts[PENDING] for r in results):,} of "
                     f"{keys:,} keys still pending (rerun, or give a longer --grace)")
    else:
        lines.append(f"MISMATCH: {sum(r.report.mismatched for r in results):,} of {keys:,} "
                     "keys differ")
    return "\n".join(lines)


def json_report(results: list[TableResult]) -> str:
    """The report as one JSON document (for scripts)."""
    return json.dumps({"exit_code": exit_code(results), "tables": [{
        "table": r.table, "topic": r.topic, "counts": {v: r.report.counts[v] for v in VERDICTS},
        "rows": r.rows, "events": r.events, "position_us": r.position_us,
        "rechecks": r.rechecks, "seconds": round(r.seconds, 3), "notes": r.notes,
        "differences": [{"verdict": d.verdict, "key": json.loads(str(d.key)),
                         "table": d.table, "stream": d.stream}
                        for d in r.report.differences],
        "pending": [json.loads(str(k)) for k in r.report.pending[:100]]}
        for r in results]}, indent=2, default=str)


def write_metrics(path: Path, results: list[TableResult]) -> None:
    """The results as Prometheus text in `path` (node_exporter's textfile collector reads
    it; written whole, then renamed, so a scrape never sees half a file)."""
    registry = Registry()
    keys = registry.gauge("casscade_verify_keys",
                          "Keys of the last verify run by verdict", ("table", "verdict"))
    mismatched = registry.gauge("casscade_verify_mismatched_keys",
                                "Keys missing, extra or different in the last verify run",
                                ("table",))
    finished = registry.gauge("casscade_verify_last_run_timestamp_seconds",
                              "When the last verify run of the table ended", ("table",))
    seconds = registry.gauge("casscade_verify_duration_seconds",
                             "How long the last verify run of the table took", ("table",))
    now = time.time()
    for r in results:
        for v in VERDICTS:
            keys.set(r.report.counts[v], r.table, v)
        mismatched.set(sum(r.report.counts[v] for v in MISMATCHES), r.table)
        finished.set(now, r.table)
        seconds.set(r.seconds, r.table)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(registry.render())
    tmp.replace(path)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)
