"""The `events` settings of the topics the job creates: their cleanup policy, retention and
a table's own partition count, from the config file, the environment or --set, each
checked with an error that names it."""

from __future__ import annotations

import pytest

from materializer.output.event_settings import SEGMENT_INDEX_BYTES
from materializer.settings import MaterializerConfig
from shared.config import ConfigError, load


def _events(*sets: str, env: dict[str, str] | None = None):
    return load(MaterializerConfig, None, list(sets), env=env or {}).events


def test_by_default_the_broker_decides_all_but_the_index_preallocation() -> None:
    events = _events()
    assert events.topic_config() == {"segment.index.bytes": str(SEGMENT_INDEX_BYTES)}
    assert SEGMENT_INDEX_BYTES == 1024 * 1024 and events.topic_partitions("p") == {}


def test_a_null_index_size_leaves_the_brokers() -> None:
    assert _events("events.segment_index_bytes=null").topic_config() == {}


def test_policy_retention_and_a_table_s_partitions() -> None:
    events = _events("events.cleanup_policy=compact", "events.retention_ms=-1",
                     "events.table_partitions.ks.orders=24",
                     "events.segment_index_bytes=65536",
                     env={"CASSCADE_EVENTS__PARTITIONS": "3"})
    assert events.topic_config() == {"cleanup.policy": "compact", "retention.ms": "-1",
                                     "segment.index.bytes": "65536"}
    assert events.topic_partitions("p") == {"p.ks.orders": 24}  # shared.topic_names'
    assert events.partitions == 3  # every other table's


def test_a_mapping_s_values_take_its_value_type(tmp_path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("events:\n  table_partitions: {ks.a: 2, 'ks.b': '5'}\n")
    assert load(MaterializerConfig, path, env={}).events.table_partitions == {"ks.a": 2,
                                                                             "ks.b": 5}


@pytest.mark.parametrize(("setting", "says"), [
    ("events.cleanup_policy=forever", "events.cleanup_policy must be one of"),
    ("events.retention_ms=-2", "events.retention_ms must be -1"),
    ("events.segment_index_bytes=100", "events.segment_index_bytes must be at least 4096"),
    ("events.table_partitions.orders=2", "'orders' is not keyspace.table"),
    ("events.table_partitions.ks.t=0", "partitions of ks.t: at least 1"),
    ("events.table_partitions.ks.t=many", "events.table_partitions.ks.t: 'many' is not a "
                                          "valid int"),
])
def test_a_bad_value_is_named(setting: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        _events(setting)
