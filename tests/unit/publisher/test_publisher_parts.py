"""Publisher building blocks: config loading, watermarks, offset store, metrics text."""

from __future__ import annotations

from pathlib import Path

import pytest

from publisher.agent.delivery import WatermarkTracker
from publisher.agent.offset_store import OffsetStore, SegmentState
from publisher.settings import PublisherConfig
from shared.config import ConfigError, load, to_dict
from shared.metrics import Registry

from support.paths import ROOT


def test_config_file_env_and_flags_in_that_order(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("kafka:\n  topic_prefix: fromfile\n  partitions: 3\n"
                    "cdc:\n  cdc_raw: /data/cdc_raw\n")
    env = {"CASSCADE_KAFKA__PARTITIONS": "9", "CASSCADE_KAFKA__TOPIC_PREFIX": "fromenv",
           "CASSCADE_UNRELATED": "x", "CASSCADE_NOPE__X": "ignored"}
    cfg = load(PublisherConfig, path, ["kafka.topic_prefix=fromflag", "http.port=0",
                                       "cassandra.contact_points=a,b"], env=env)
    assert cfg.kafka.topic_prefix == "fromflag"
    assert cfg.kafka.partitions == 9
    assert cfg.cdc.cdc_raw == Path("/data/cdc_raw")
    assert cfg.http.port == 0 and cfg.cassandra.contact_points == ["a", "b"]
    assert to_dict(cfg)["cdc"]["cdc_raw"] == "/data/cdc_raw"


@pytest.mark.parametrize(("overrides", "message"), [
    (["kafka.partitons=3"], "unknown setting"),
    (["kafka.partitions=many"], "not a valid int"),
    (["cdc=3"], "must be a mapping"),
    (["nokey"], "section.key=value"),
    (["log.level.x=1"], "expected a str, got a section"),
])
def test_config_errors_are_clear(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(PublisherConfig, None, overrides, env={})


def test_the_shipped_example_config_loads() -> None:
    example = ROOT / "deploy" / "publisher.yaml"
    cfg = load(PublisherConfig, example, env={})
    assert cfg.kafka.replication_factor == 3 and cfg.node.datacenter == "dc2"


def test_watermark_advances_only_over_fully_acked_prefix() -> None:
    t = WatermarkTracker(100)
    a = t.add(110, 2)
    b = t.add(120, 1)
    empty = t.add(130, 0)
    assert empty.left == 0 and t.watermark == 100
    t.ack(b)  # out of order: 120 done, 110 not yet
    assert t.watermark == 100
    t.ack(a)
    assert t.watermark == 100
    t.ack(a)
    assert t.watermark == 130 and t.in_flight == 0
    with pytest.raises(ValueError, match="increase"):
        t.add(125, 1)
    with pytest.raises(ValueError, match="more acks"):
        t.ack(a)


def test_offset_store_round_trip(tmp_path: Path) -> None:
    store = OffsetStore(tmp_path / "db")
    store.put(7, SegmentState(1234, {5, 9}))
    store.put(8, SegmentState(10))
    store.close()
    again = OffsetStore(tmp_path / "db")
    assert again.get(7) == SegmentState(1234, {5, 9})
    assert again.get(99) == SegmentState()
    again.forget(8)
    assert set(again.segments()) == {7}
    again.close()
    reader = OffsetStore(tmp_path / "db", read_only=True)
    assert reader.get(7).watermark == 1234
    reader.close()


def test_metrics_text() -> None:
    r = Registry()
    r.counter("a_total", "things", ("kind",)).inc(2, 'x"y')
    g = r.gauge("b", "level")
    r.on_scrape(lambda: g.set(5))
    text = r.render()
    assert '# TYPE a_total counter\na_total{kind="x\\"y"} 2' in text
    assert "\nb 5\n" in text
    with pytest.raises(ValueError):
        r.counter("a_total", "things", ("kind",)).inc(-1, "x")


def test_print_config_shows_no_secret(tmp_path: Path) -> None:
    """Passwords, Kafka client secrets and a URL's password are *** in --print-config; the
    rest is shown as it is."""
    import json

    from click.testing import CliRunner

    from casscade.cli import cli

    secrets = ["hunter2", "s3cret-sasl", "jaas-pw", "reg-pw", "key-pw"]
    out = CliRunner().invoke(cli, [
        "publisher", "run", "--print-config", "--set", "cassandra.username=casscade",
        "--set", "cassandra.password=hunter2", "--set", 'kafka.producer={"sasl.password": '
        '"s3cret-sasl", "sasl.username": "agent", "ssl.key.password": "key-pw", '
        '"sasl.jaas.config": "ScramLoginModule required password=\\"jaas-pw\\";"}'])
    assert out.exit_code == 0, out.output
    assert not [s for s in secrets if s in out.output], out.output
    cfg = json.loads(out.output)
    assert cfg["cassandra"] == cfg["cassandra"] | {"username": "casscade", "password": "***"}
    assert cfg["kafka"]["producer"]["sasl.username"] == "agent"
    out = CliRunner().invoke(cli, [
        "materializer", "run", "--print-config", "--set",
        "events.schema_registry_url=https://reader:reg-pw@registry:8081/apis/ccompat/v7"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["events"]["schema_registry_url"] == \
        "https://reader:***@registry:8081/apis/ccompat/v7"


def test_the_cassandra_password_can_come_from_a_file(tmp_path: Path) -> None:
    from publisher.settings import CassandraSettings

    secret = tmp_path / "cassandra.pw"
    secret.write_text("hunter2\n")
    assert CassandraSettings(password_file=secret).resolved_password() == "hunter2"
    assert CassandraSettings(password="inline").resolved_password() == "inline"
    with pytest.raises(ConfigError, match="both set"):
        CassandraSettings(password="x", password_file=secret).resolved_password()
    with pytest.raises(ConfigError, match=r"missing\.pw"):
        CassandraSettings(password_file=tmp_path / "missing.pw").resolved_password()
    shown = to_dict(CassandraSettings(password_file=secret))
    assert shown["password_file"] == str(secret) and shown["password"] is None


def test_a_wait_for_kafka_keeps_the_agent_alive_for_health(monkeypatch) -> None:
    """produce waiting on a full queue (Kafka away) notes each turn of its wait, which
    /health takes as the agent alive: a Kafka outage restarts nothing."""
    from publisher import kafka_sink

    class FullQueue:
        def __init__(self) -> None:
            self.refusals = 3

        def produce(self, *_a: object, **_k: object) -> None:
            if self.refusals:
                self.refusals -= 1
                raise BufferError("queue full")

        def poll(self, _timeout: float) -> int:
            return 0

    clock = iter(range(100, 1000))
    monkeypatch.setattr(kafka_sink.time, "monotonic", lambda: float(next(clock)))
    sink = kafka_sink.KafkaSink("127.0.0.1:1", "p", 1, 1, {}, Registry())
    sink.producer = FullQueue()
    before = sink.alive_at
    sink.produce("p.raw", b"k", b"v", lambda *_a: None)
    assert sink.alive_at > before and sink.producer.refusals == 0
    assert sink.waiting.get() == 0  # back to 0 once the record went in
