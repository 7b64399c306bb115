"""`casscade verify`: the stream checked against the table it comes from."""

from __future__ import annotations

import math
import random
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from casscade.verify.event_decoder import WriterSchemas
    from casscade.verify.verifier import TableResult, VerifyOptions
    from materializer.output.event_settings import EventSettings
    from shared.capture import Capture
    from shared.schema import TableSchema

# which stage's config holds a section (--set routes by it); `log` goes to both
_PUBLISHER_SECTIONS = ("cassandra", "capture")
_MATERIALIZER_SECTIONS = ("kafka", "events")
CONSISTENCY_LEVELS = ("ALL", "EACH_QUORUM", "QUORUM", "LOCAL_QUORUM", "ONE", "TWO", "THREE",
                      "LOCAL_ONE")


@click.command(name="verify")
@click.option("--publisher-config", type=click.Path(exists=True, dir_okay=False,
                                                    path_type=Path),
              help="The publisher's YAML config: its cassandra and capture sections are used "
                   "(example: deploy/publisher.yaml).")
@click.option("--materializer-config", type=click.Path(exists=True, dir_okay=False,
                                                       path_type=Path),
              help="The materializer's YAML config: its kafka and events sections are used "
                   "(example: deploy/materializer.yaml).")
@click.option("--set", "overrides", multiple=True, metavar="SECTION.KEY=VALUE",
              help="Override one setting (repeatable): cassandra.* and capture.* go to the "
                   "publisher's config, kafka.* and events.* to the materializer's.")
@click.option("--table", "tables", multiple=True, metavar="KEYSPACE.TABLE",
              help="A table to verify (repeatable; default: every captured CDC table).")
@click.option("--consistency", default="ALL", show_default=True,
              type=click.Choice(CONSISTENCY_LEVELS, case_sensitive=False),
              help="Read consistency of the table side (ALL sees every replica's latest "
                   "write).")
@click.option("--rate", default=0.0, show_default=True,
              help="Table rows read per second at most (0: no limit); keeps a scan of a busy "
                   "cluster gentle.")
@click.option("--splits", default=64, show_default=True,
              help="Token ranges the ring is cut into.")
@click.option("--sample", type=click.FloatRange(0, 1, min_open=True), default=1.0,
              show_default=True,
              help="Fraction of the token ranges to verify, picked at random (--seed).")
@click.option("--seed", type=int, default=None,
              help="Seed of the sample (default: random; printed so a run can be repeated).")
@click.option("--token-range", "token_ranges", multiple=True, metavar="START:END",
              help="Verify only the keys with START < token <= END (repeatable; instead of "
                   "--splits/--sample).")
@click.option("--grace", "grace_s", default=10.0, show_default=True,
              help="Seconds to wait before checking keys that were not equal again (their "
                   "change may be in flight).")
@click.option("--rechecks", default=3, show_default=True,
              help="How many times keys that are not equal are checked again.")
@click.option("--show", "keep", default=10, show_default=True,
              help="Differences shown with both sides, per table.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--metrics-file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the results as Prometheus text here (for node_exporter's "
                   "textfile collector; alert on casscade_verify_mismatched_keys > 0).")
def verify(publisher_config: Path | None, materializer_config: Path | None,
           overrides: tuple[str, ...], tables: tuple[str, ...], consistency: str,
           rate: float, splits: int, sample: float, seed: int | None,
           token_ranges: tuple[str, ...], grace_s: float, rechecks: int, keep: int,
           as_json: bool, metrics_file: Path | None) -> None:
    """Compare every key's latest event with the row Cassandra returns for it now.

    The stream side is each table's event topic <prefix>.<keyspace>.<table>, read to its end
    (what consumers see); the table side is a paged, throttled scan at --consistency. Each
    key is EQUAL, PENDING (its newest write is newer than any change the stream has shown:
    in flight), MISSING (in the table, not in the stream), EXTRA (in the stream, not in the
    table) or DIFFERENT. Keys not equal are checked again after --grace, up to --rechecks
    times; the report counts the final verdicts and shows the first differences with both
    sides.

    The stream is held in memory, one image per key: verify a large table by --sample or
    --token-range.

    \b
    Exit codes: 0 every key equal; 3 a key missing, extra or different; 4 none wrong, but
    keys still pending after the rechecks; 1 the run failed (a reason on stderr).
    """
    from casscade.verify import output
    from casscade.verify.event_decoder import WriterSchemas
    from casscade.verify.verifier import VerifyOptions
    from materializer.kafka.avro_registry import registry_checks
    from materializer.settings import MaterializerConfig
    from publisher.settings import PublisherConfig
    from shared.cli_config import captured_rules, check_capture, load_config
    from shared.logs import setup_logging
    from shared.reach import connect_cassandra, reach_or_exit
    from shared.schema import catalog_from_json
    from shared.system_schema import read_system_schema
    from shared.table_scan import token_ranges as ring_ranges

    # SIGTERM ends the run as Ctrl-C does: the connections closed, no traceback
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    pub = load_config(PublisherConfig, publisher_config,
                      _routed(overrides, _MATERIALIZER_SECTIONS))
    mat = load_config(MaterializerConfig, materializer_config,
                      _routed(overrides, _PUBLISHER_SECTIONS))
    setup_logging(mat.log.level, mat.log.format)
    try:
        events = mat.events.resolved()
        kafka = mat.kafka.client()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    ranges, header = _ranges(token_ranges, splits, sample, seed, ring_ranges)
    capture = captured_rules(pub)
    reach_or_exit(kafka, *registry_checks(events))
    cluster, session = connect_cassandra(pub.cassandra)
    try:
        catalog = catalog_from_json(read_system_schema(session)).values()
        chosen = _tables(catalog, tables, capture)
        check_capture(capture, chosen)
        schemas = WriterSchemas(events, kafka, mat.kafka.topic_prefix)
        options = VerifyOptions(consistency, rate, ranges, sample < 1 or bool(token_ranges),
                                grace_s, rechecks, keep)
        results = [_verify_one(table, session, kafka, mat.kafka.topic_prefix, events,
                               capture, schemas, options) for table in chosen]
    finally:
        cluster.shutdown()
    click.echo(output.json_report(results) if as_json
               else output.text_report(results, f"casscade verify: {len(results)} tables, "
                                                f"consistency {consistency.upper()}, {header}"))
    if metrics_file is not None:
        output.write_metrics(metrics_file, results)
    sys.exit(output.exit_code(results))


def _verify_one(table: TableSchema, session: Any, kafka: dict[str, str], prefix: str,
                events: EventSettings, capture: Capture, schemas: WriterSchemas,
                options: VerifyOptions) -> TableResult:
    """One table's stream against its rows: its TableResult; a read that fails ends the run
    with the table named (a ClickException)."""
    from cassandra import RequestExecutionException, Unauthorized
    from cassandra.cluster import NoHostAvailable, OperationTimedOut
    from confluent_kafka import KafkaException

    from casscade.verify.event_decoder import EventDecodeError, EventDecoder
    from casscade.verify.table_rows import TableRows
    from casscade.verify.verifier import stream_of, verify_table
    from shared.capture import captured_table

    name = f"{table.keyspace}.{table.table}"
    published = captured_table(table, capture.actions(table))
    rows = TableRows(session, table, events.modes, capture, options.consistency, options.rate,
                     events.static_only_rows == "skip")
    decoder = EventDecoder(events, published, schemas)
    try:
        stream = stream_of(kafka, prefix, published, decoder, events.modes, options)
        return verify_table(stream, rows, published, events.modes, options, _progress())
    except EventDecodeError as exc:
        raise click.ClickException(str(exc)) from None
    except KafkaException as exc:
        raise click.ClickException(f"reading the events of {name} failed: {exc}") from None
    except Unauthorized as exc:
        raise click.ClickException(
            f"reading {name} was refused: {exc} (the role in cassandra.username needs "
            "SELECT on the table)") from None
    except (RequestExecutionException, NoHostAvailable, OperationTimedOut) as exc:
        raise _cassandra_failed(exc, name, options.consistency) from None


def _cassandra_failed(exc: Exception, table: str, consistency: str) -> click.ClickException:
    """A read of the table that failed mid-run, named, with what to do about a replica that
    is down."""
    hint = (" (a replica is down or slow: wait for it, or read at --consistency QUORUM)"
            if consistency.upper() == "ALL" else "")
    return click.ClickException(f"reading {table} at {consistency.upper()} failed: {exc}{hint}")


def _routed(overrides: tuple[str, ...], elsewhere: tuple[str, ...]) -> tuple[str, ...]:
    """The --set items that belong to this stage's config (not to a section of the other)."""
    return tuple(o for o in overrides if o.split(".", 1)[0] not in elsewhere)


def _ranges(given: tuple[str, ...], splits: int, sample: float, seed: int | None,
            ring_ranges: Any) -> tuple[list[tuple[int, int]], str]:
    """The (start, end] token ranges to read, and how they were chosen (for the report)."""
    if given:
        out = []
        for item in given:
            try:
                start, end = (int(x) for x in item.split(":"))
            except ValueError:
                raise click.BadParameter(f"{item!r} is not START:END",
                                         param_hint="--token-range") from None
            if start >= end:
                raise click.BadParameter(f"{item!r}: START must be below END",
                                         param_hint="--token-range")
            out.append((start, end))
        return out, f"{len(out)} token ranges given"
    try:
        ring = ring_ranges(splits)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--splits") from None
    if sample >= 1:
        return ring, f"the whole ring ({splits} token ranges)"
    seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
    picked = sorted(random.Random(seed).sample(ring, max(1, math.ceil(sample * splits))))
    return picked, (f"a sample of {len(picked)} of {splits} token ranges "
                    f"(--sample {sample:g} --seed {seed})")


def _tables(catalog: Any, names: tuple[str, ...], capture: Any) -> list[Any]:
    """The tables named, or every captured CDC table (a ClickException for an unknown
    name)."""
    by_name = {f"{t.keyspace}.{t.table}": t for t in catalog}
    if not names:
        chosen = [t for n, t in sorted(by_name.items())
                  if t.cdc and capture.captures(t.keyspace, t.table)]
        if not chosen:
            raise click.ClickException("no captured table has cdc = true: name one with "
                                       "--table")
        return chosen
    missing = [n for n in names if n not in by_name]
    if missing:
        raise click.ClickException(f"no such table: {', '.join(missing)}")
    return [by_name[n] for n in names]


def _progress() -> Any:
    """A progress reporter: a line on stderr at most every 5 s."""
    last = [0.0]

    def report(line: str) -> None:
        if time.monotonic() - last[0] >= 5:
            last[0] = time.monotonic()
            click.echo(f"[verify] {line}", err=True)

    return report
