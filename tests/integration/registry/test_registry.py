"""The local schema registry (Apicurio 2.4.2.Final, `stack registry`) with casscade's own
registry client and Confluent's: register, read back by id, compatibility, status.

Runs private registries (own state directories, free ports) beside anything running, so a
developer's registry on 8085 is untouched; the build is the shared one in <lib>/apicurio.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from devstack import registry
from devstack.process import pid_alive, port_in_use
from devstack.settings import StackSettings, repo_root
from materializer.kafka.avro_registry import ConfluentRegistry, RegistryError

from support.services import free_port

pytestmark = pytest.mark.integration

V1 = {"type": "record", "name": "Row", "namespace": "casscade.test",
      "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": "string"}]}
# BACKWARD: data written with V1 must be readable with the new schema.
INCOMPATIBLE = {**V1, "fields": [*V1["fields"], {"name": "age", "type": "int"}]}
COMPATIBLE = {**V1, "fields": [*V1["fields"],
                               {"name": "age", "type": ["null", "int"], "default": None}]}


def _settings(state_dir: Path) -> StackSettings:
    return StackSettings(state_dir=state_dir, lib_root=StackSettings.from_env().lib_root,
                         registry_port=free_port())


@pytest.fixture(scope="module")
def reg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackSettings]:
    """A registry of its own, built if needed, started for this module and stopped after."""
    s = _settings(tmp_path_factory.mktemp("registry"))
    assert registry.up(s, log=lambda msg: print(f"[registry] {msg}"))
    try:
        yield s
    finally:
        registry.down(s)


def _subject() -> str:
    return f"t_{uuid.uuid4().hex[:8]}-value"


def test_register_and_read_back_by_id(reg: StackSettings) -> None:
    subject = _subject()
    ours = ConfluentRegistry(registry.url(reg))
    schema_id = ours.register(subject, V1)
    assert ours.register(subject, V1) == schema_id  # the same schema: the same id
    assert ours.header(subject, V1) == b"\x00" + schema_id.to_bytes(4, "big")

    theirs = SchemaRegistryClient({"url": registry.url(reg)})
    back = theirs.get_schema(schema_id)
    assert back.schema_type == "AVRO"
    assert json.loads(back.schema_str) == V1
    assert theirs.get_subjects().count(subject) == 1


def test_writers_racing_to_register_a_new_subject_all_get_its_id(reg: StackSettings) -> None:
    """Spark's Python workers register a table's schemas at once, one version or two (rows
    from before and after an ALTER TABLE in one micro-batch). Apicurio answers the losers
    of the race to create the subject with 409 "already exists" (and some with a 500 from
    its storage's sequence, retried): that must not stop the job (seen in test_connect_sink
    before the client looked the schema up, and registered again, on a conflict). Apicurio
    2.4.2 may record racing writes of one content as several versions; they share one id,
    which is what the messages carry."""
    url = registry.url(reg)
    for round_ in range(6):
        subject = _subject()
        schemas = [V1] * 8 if round_ % 2 == 0 else [V1, COMPATIBLE] * 4
        with ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(ConfluentRegistry(url).register, [subject] * len(schemas),
                                schemas))
        by_schema: dict[str, set[int]] = {}
        for schema, schema_id in zip(schemas, ids, strict=True):
            by_schema.setdefault(json.dumps(schema), set()).add(schema_id)
        assert all(len(found) == 1 for found in by_schema.values()), by_schema
        client = SchemaRegistryClient({"url": url})
        for text, (schema_id,) in by_schema.items():
            assert client.lookup_schema(subject, Schema(text, "AVRO")).schema_id == schema_id


def test_incompatible_version_is_refused(reg: StackSettings) -> None:
    subject = _subject()
    ours = ConfluentRegistry(registry.url(reg), attempts=1)
    ours.register(subject, V1)
    with pytest.raises(RegistryError) as err:
        ours.register(subject, INCOMPATIBLE)
    assert "HTTP 409" in str(err.value) and repr(subject) in str(err.value)
    theirs = SchemaRegistryClient({"url": registry.url(reg)})
    assert theirs.get_versions(subject) == [1]
    # the rule in force is Confluent's default, and the registry says so
    assert theirs.get_compatibility() == "BACKWARD"


def test_compatible_version_gets_a_new_id(reg: StackSettings) -> None:
    subject = _subject()
    ours = ConfluentRegistry(registry.url(reg))
    first = ours.register(subject, V1)
    second = ours.register(subject, COMPATIBLE)
    assert second != first
    theirs = SchemaRegistryClient({"url": registry.url(reg)})
    assert theirs.get_versions(subject) == [1, 2]
    latest = theirs.get_latest_version(subject)
    assert (latest.schema_id, latest.version) == (second, 2)


def test_second_build_is_a_no_op(reg: StackSettings) -> None:
    jar = registry.runner_jar(reg)
    before = jar.stat().st_mtime_ns
    started = time.monotonic()
    assert registry.build(reg, log=lambda _m: pytest.fail("rebuilt")) == jar
    assert time.monotonic() - started < 5
    assert jar.stat().st_mtime_ns == before


def _stack(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(repo_root() / "deploy" / "local" / "stack"), "registry", *args],
                          env=env, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


def test_cli_status_exit_codes(tmp_path: Path) -> None:
    s = _settings(tmp_path / "state")
    env = dict(os.environ, CASSCADE_STATE_DIR=str(s.state_dir),
               CASSCADE_LIB_DIR=str(s.lib_dir), CASSCADE_REGISTRY_PORT=str(s.registry_port))
    pid = None
    try:
        before = _stack(env, "status")
        assert before.returncode == 3 and "not running" in before.stdout

        up = _stack(env, "up")
        assert up.returncode == 0, up.stderr
        assert registry.url(s) in up.stdout
        pid = registry.running_pid(s)
        assert pid is not None

        again = _stack(env, "up")
        assert again.returncode == 0 and "already running" in again.stdout
        assert registry.running_pid(s) == pid

        running = _stack(env, "status")
        assert running.returncode == 0, running.stdout
        assert f"pid {pid}" in running.stdout
    finally:
        down = _stack(env, "down")
    assert down.returncode == 0 and "stopped" in down.stdout
    assert pid is not None and not pid_alive(pid)
    assert not port_in_use(s.registry_port)
    after = _stack(env, "status")
    assert after.returncode == 3 and "not running" in after.stdout


def test_dynamic_settings_are_indexed(reg: StackSettings) -> None:
    # The list comes from the stand-in build step (deploy/local/maven/apicurio/
    # config-index-deployment): without it the registry would not start, with a wrong one
    # this list would be empty. The registry lists those of them that its configuration
    # allows to change (<name>.dynamic.allow=true in the app's application.properties).
    # ccompat ids are content ids while legacy-id-mode is off.
    import urllib.request

    with urllib.request.urlopen(f"{registry.api_url(reg)}/admin/config/properties",
                                timeout=10) as resp:
        props = {p["name"]: p for p in json.load(resp)}
    mode = props["registry.ccompat.legacy-id-mode.enabled"]
    assert (mode["type"], mode["value"]) == ("java.lang.Boolean", "false")
    assert set(props) == {"registry.ccompat.legacy-id-mode.enabled",
                          "registry.download.href.ttl",
                          "registry.rest.artifact.deletion.enabled",
                          "registry.ui.features.readOnly"}
    assert props["registry.download.href.ttl"]["type"] == "java.lang.Long"
