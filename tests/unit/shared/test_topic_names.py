"""The topic names and the raw topic's record key (shared.topic_names)."""

from __future__ import annotations

import uuid

from shared import topic_names as names
from shared.partitioner import crc32_partition


def test_every_topic_is_named_under_the_prefix_even_one_with_dots() -> None:
    assert names.raw_topic("a.b") == "a.b.raw"
    assert names.schema_topic("a.b") == "a.b.schemas"
    assert names.event_topic("a.b", "ks", "t") == "a.b.ks.t"
    assert names.changelog_topic("a.b", "0123abcd") == "a.b.changelog.0123abcd"
    assert names.dead_letter_topic("a.b") == "a.b.materializer.dead-letter"
    assert names.avro_schema_topic("a.b") == "a.b.avro-schemas"


def test_the_raw_topics_regex_matches_it_alone() -> None:
    import re

    regex = re.compile(names.raw_topic_regex("a.b"))
    assert regex.fullmatch("a.b.raw")
    for other in ("aXb.raw", "a.b.raw.ks.t", "a.b.rawx", "a.b.schemas", "a.b.raw.x"):
        assert not regex.fullmatch(other), other


def test_the_per_table_raw_topics_of_an_earlier_casscade_are_recognized() -> None:
    topics = {"p.raw", "p.raw.ks.t", "p.raw.ks.u", "p.ks.t", "p.changelog.x", "q.raw.ks.t",
              "p.raw.ks.t.x"}
    assert names.per_table_raw_topics("p", topics) == ["p.raw.ks.t", "p.raw.ks.u"]
    assert names.per_table_raw_topics("p", {"p.raw", "p.schemas"}) == []


def test_a_list_of_topics_is_named_by_its_first_and_a_count() -> None:
    assert names.first_and_more(["p.raw.ks.t"]) == "p.raw.ks.t"
    assert names.first_and_more(["p.raw.ks.t", "p.raw.ks.u", "p.raw.ks.v"]) == \
        "p.raw.ks.t and 2 more"


def test_a_raw_key_is_the_table_id_then_the_partition_key() -> None:
    a, b = uuid.UUID(int=1), uuid.UUID(int=2)
    key = names.raw_key(a, b"\x00\x00\x00\x07")
    assert key == a.bytes + b"\x00\x00\x00\x07"
    assert names.raw_key(a.bytes, b"k") == names.raw_key(a, b"k")
    # one table's copies of a key share a partition; two tables' equal keys are two keys
    assert names.raw_key(a, b"k") != names.raw_key(b, b"k")
    assert crc32_partition(key, 6) == crc32_partition(names.raw_key(a, b"\x00\x00\x00\x07"), 6)
