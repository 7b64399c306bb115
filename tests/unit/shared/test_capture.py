"""The capture rules: which tables and columns are published, and how values are masked."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from publisher.settings import PublisherConfig
from shared.capture import (
    CHARS,
    EXCLUDE,
    HASH,
    CaptureError,
    CaptureSettings,
    captured_record,
    captured_table,
)
from shared.config import ConfigError, load, to_dict
from shared.schema import table_from_json

PEOPLE = table_from_json({
    "keyspace": "crm", "table": "people", "id": str(uuid.UUID(int=5)), "cdc": True,
    "columns": [
        {"name": "id", "kind": "partition_key", "position": 0, "type": "int"},
        {"name": "email", "kind": "regular", "position": -1, "type": "text"},
        {"name": "ssn", "kind": "regular", "position": -1, "type": "text"},
        {"name": "notes", "kind": "regular", "position": -1, "type": "text"},
        {"name": "tags", "kind": "regular", "position": -1, "type": "set<text>"},
        {"name": "age", "kind": "regular", "position": -1, "type": "int"},
    ]}, {})


def _rules(**settings: object):
    return CaptureSettings(**{"column_mask_hash_salt": "pepper", **settings}).rules()


def test_tables_are_chosen_by_whole_name() -> None:
    rules = _rules(table_include_list=["crm\\..*", "shop\\.orders"],
                   table_exclude_list=["crm\\.audit.*"])
    assert rules.captures("crm", "people") and rules.captures("shop", "orders")
    assert not rules.captures("crm", "audit_log") and not rules.captures("shop", "orders2")
    assert not rules.captures("billing", "people")
    assert _rules().captures("any", "table") and not _rules().active


def test_columns_are_excluded_hashed_or_starred_and_the_schema_says_so() -> None:
    rules = _rules(column_exclude_list=["crm\\.people\\.notes", ".*\\.tags"],
                   column_mask_hash=["crm\\.people\\.(email|age)"],
                   column_mask_chars=["crm\\.people\\.ssn"], column_mask_chars_length=4)
    actions = rules.actions(PEOPLE)
    assert actions == {"email": HASH, "ssn": CHARS, "notes": EXCLUDE, "tags": EXCLUDE,
                       "age": HASH}
    published = captured_table(PEOPLE, actions)
    assert [(c.name, c.type_text) for c in published.columns] == [
        ("id", "int"), ("email", "text"), ("ssn", "text"), ("age", "text")]
    assert published.schema_hash != PEOPLE.schema_hash and published.id == PEOPLE.id
    assert captured_table(PEOPLE, {}) is PEOPLE
    age = (42).to_bytes(4, "big")
    assert rules.mask(HASH, age) == hashlib.sha256(b"pepper" + age).hexdigest().encode()
    assert rules.mask(HASH, age) == rules.mask(HASH, age)  # the same value, the same hash
    assert _rules(column_mask_hash_salt="salt2").mask(HASH, age) != rules.mask(HASH, age)
    assert rules.mask(CHARS, b"123-45-6789") == b"****"
    sha512 = _rules(column_mask_hash_algorithm="SHA-512").mask(HASH, age)
    assert sha512 == hashlib.sha512(b"pepper" + age).hexdigest().encode()


def test_a_rule_on_a_key_or_a_mask_on_a_collection_is_refused_by_name() -> None:
    with pytest.raises(CaptureError, match=r"crm\.people\.id is a primary key column: it "
                                           r"cannot be excluded"):
        _rules(column_exclude_list=["crm\\.people\\.id"]).actions(PEOPLE)
    with pytest.raises(CaptureError, match=r"crm\.people\.id is a primary key column: it "
                                           r"cannot be masked"):
        _rules(column_mask_chars=[".*\\.id"]).actions(PEOPLE)
    with pytest.raises(CaptureError, match=r"crm\.people\.tags is a non-frozen set<text>"):
        _rules(column_mask_hash=[".*\\.tags"]).actions(PEOPLE)


def test_a_snapshot_record_is_captured_like_a_live_one() -> None:
    rules = _rules(column_exclude_list=[".*\\.notes"], column_mask_hash=[".*\\.email"])
    actions = rules.actions(PEOPLE)
    published = captured_table(PEOPLE, actions)
    cell = {"path": None, "timestamp": 1, "ttl": 0, "local_deletion_time": None,
            "tombstone": False}
    record = {"schema_hash": PEOPLE.schema_hash, "complex_deletions": [
        {"column": "notes", "marked_for_delete_at": 1, "local_deletion_time": 2}],
        "cells": [cell | {"column": "email", "value": b"ada@example.com"},
                  cell | {"column": "notes", "value": b"private"},
                  cell | {"column": "age", "value": b"\x00\x00\x00\x07"}]}
    out = captured_record(record, rules, actions, published)
    assert out["schema_hash"] == published.schema_hash and out["complex_deletions"] == []
    assert [(c["column"], c["value"]) for c in out["cells"]] == [
        ("email", rules.mask(HASH, b"ada@example.com")), ("age", b"\x00\x00\x00\x07")]


def test_the_salt_is_required_read_from_a_file_and_never_printed(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"capture\.column_mask_hash needs a salt"):
        CaptureSettings(column_mask_hash=[".*\\.email"]).rules()
    salt = tmp_path / "salt"
    salt.write_text("from-a-file\n")
    cfg = load(PublisherConfig, None, ["capture.column_mask_hash=crm\\.people\\.email",
                                       f"capture.column_mask_hash_salt_file={salt}"], env={})
    assert cfg.capture.rules().salt == b"from-a-file"
    env = load(PublisherConfig, None, [], env={"CASSCADE_CAPTURE__COLUMN_MASK_HASH_SALT": "s3"})
    assert env.capture.rules().salt == b"s3"
    assert to_dict(env)["capture"]["column_mask_hash_salt"] == "***"


@pytest.mark.parametrize(("override", "message"), [
    ("capture.column_mask_hash_algorithm=MD5", "must be one of SHA-256, SHA-512"),
    ("capture.table_exclude_list=crm\\.(", "is not a regular expression"),
    ("capture.column_mask_chars_length=0", "at least 1"),
])
def test_bad_capture_settings_are_named(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(PublisherConfig, None, [override], env={})
