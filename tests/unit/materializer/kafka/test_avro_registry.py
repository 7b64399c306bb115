"""ConfluentRegistry's side of the registry REST contract, against an in-process HTTP server.

This checks what casscade sends and how it reads the answers (the documented Confluent API:
POST /subjects/{subject}/versions → {"id": N}), and the retry on a 5xx that a real registry
does not give on demand. The real registry (Apicurio, `stack registry`) is met by
tests/integration/registry/test_registry.py and connect/test_connect_sink.py.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from materializer.kafka import avro_registry
from materializer.kafka.avro_registry import ConfluentRegistry, RegistryError
from materializer.output.avro_wire import RegistryAccess
from materializer.settings import MaterializerConfig
from shared.config import ConfigError, load, to_dict

SCHEMA = {"type": "record", "name": "k", "fields": [{"name": "id", "type": "int"}]}
_BASIC = "Basic " + base64.b64encode(b"key:s3cret").decode()


class _Registry(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str, Any]]] = []
    auth: ClassVar[list[str | None]] = []
    failures_left: ClassVar[dict[str, int]] = {"flaky-value": 1, "locked-table-value": 9}

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append((self.path, self.headers["Content-Type"], body))
        self.auth.append(self.headers.get("Authorization"))
        parts = self.path.split("/")
        subject, lookup = parts[2], len(parts) == 3  # POST /subjects/{s}: is it there?
        if subject == "locked-value" and self.headers.get("Authorization") != _BASIC:
            self._answer(401, {"error_code": 401, "message": "Unauthorized"})
        elif lookup:
            if subject == "raced-value":
                self._answer(200, {"subject": subject, "version": 1, "id": 7})
            else:
                self._answer(404, {"error_code": 40403, "message": "schema not found"})
        elif subject in ("bad-value", "raced-value"):
            # raced: Apicurio's answer when another writer created the subject just now
            self._answer(409, {"error_code": 409, "message": "incompatible schema"})
        elif self.failures_left.get(subject, 0) > 0:
            self.failures_left[subject] -= 1
            self._answer(503, {"error_code": 50302, "message": "not ready"})
        else:
            self._answer(200, {"id": 42})

    def _answer(self, code: int, doc: dict[str, Any]) -> None:
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def registry() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Registry.seen.clear()
    _Registry.auth.clear()
    _Registry.failures_left.update({"flaky-value": 1, "locked-table-value": 9})
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_header_is_magic_byte_and_big_endian_id(registry: str) -> None:
    header = ConfluentRegistry(registry).header("p.ks.t-value", SCHEMA)
    assert header == b"\x00\x00\x00\x00\x2a"
    (path, ctype, body), = _Registry.seen
    assert path == "/subjects/p.ks.t-value/versions"
    assert ctype == "application/vnd.schemaregistry.v1+json"
    assert body["schemaType"] == "AVRO" and json.loads(body["schema"]) == SCHEMA


def test_refusal_names_the_subject_and_is_not_retried(registry: str) -> None:
    with pytest.raises(RegistryError, match=r"refused subject 'bad-value': HTTP 409"):
        ConfluentRegistry(registry).register("bad-value", SCHEMA)
    # a conflict is looked up and registered once more (a race to create the subject
    # looks the same), then it is a refusal: no retries after that
    assert [path for path, _, _ in _Registry.seen] == ["/subjects/bad-value/versions",
                                                       "/subjects/bad-value"] * 2


def test_a_conflict_with_the_schema_already_there_is_its_id(registry: str) -> None:
    assert ConfluentRegistry(registry).register("raced-value", SCHEMA) == 7
    (_, _, lookup), = [s for s in _Registry.seen if s[0] == "/subjects/raced-value"]
    assert json.loads(lookup["schema"]) == SCHEMA


def test_server_errors_are_retried(registry: str) -> None:
    assert ConfluentRegistry(registry).register("flaky-value", SCHEMA) == 42
    assert len(_Registry.seen) == 2


def test_server_errors_are_retried_past_five_apart_not_in_step(
        registry: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nine 500s in a row (Apicurio's H2 lock timeouts under eight racing writers): still
    its id, and the pauses are spread, so racing writers do not meet again in step."""
    pauses: list[float] = []
    monkeypatch.setattr(avro_registry.time, "sleep", pauses.append)
    assert ConfluentRegistry(registry).register("locked-table-value", SCHEMA) == 42
    assert len(pauses) == 9
    steps = [min(0.1 * 2.0 ** attempt, 5.0) for attempt in range(1, 10)]
    assert all(0.5 * step <= pause <= 1.5 * step for pause, step in zip(pauses, steps,
                                                                         strict=True))
    assert pauses != steps


def test_unreachable_registry_fails_loudly_after_its_time() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = ConfluentRegistry(f"http://127.0.0.1:{port}", timeout_s=1, retry_s=1.0)
    with pytest.raises(RegistryError, match=r"unreachable for subject 'x-key' after \d+ "
                                            r"attempts in \d+\.\d s"):
        client.register("x-key", SCHEMA)


def test_unreachable_registry_fails_loudly_after_its_attempts() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = ConfluentRegistry(f"http://127.0.0.1:{port}", timeout_s=1, attempts=2)
    with pytest.raises(RegistryError, match="unreachable for subject 'x-key' after 2 attempts"):
        client.register("x-key", SCHEMA)


def test_basic_credentials_are_sent_and_a_refusal_says_which_settings(registry: str) -> None:
    access = RegistryAccess(username="key", password="s3cret")
    assert ConfluentRegistry(registry, access).register("locked-value", SCHEMA) == 42
    assert _Registry.auth == [_BASIC]
    wrong = RegistryAccess(username="key", password="not-it")
    with pytest.raises(RegistryError) as err:
        ConfluentRegistry(registry, wrong).register("locked-value", SCHEMA)
    assert "HTTP 401" in str(err.value) and "events.schema_registry.username" in str(err.value)
    assert "not-it" not in str(err.value) and "not-it" not in repr(wrong)
    assert ConfluentRegistry(registry).register("open-value", SCHEMA) == 42
    assert _Registry.auth[-1] is None  # no credentials configured: none sent


def test_registry_settings_read_the_password_and_never_print_it(tmp_path) -> None:
    secret = tmp_path / "registry.password"
    secret.write_text("s3cret\n")
    cfg = load(MaterializerConfig, None, ["events.schema_registry.username=key",
                                          f"events.schema_registry.password_file={secret}",
                                          "events.schema_registry.ca_file=/etc/ca.pem"], env={})
    access = cfg.events.schema_registry.access()
    assert (access.username, access.password, access.ca_file) == ("key", "s3cret",
                                                                  "/etc/ca.pem")
    from_env = load(MaterializerConfig, None, [],
                    env={"CASSCADE_EVENTS__SCHEMA_REGISTRY__PASSWORD": "hunter2"})
    assert from_env.events.schema_registry.access().password == "hunter2"
    assert to_dict(from_env)["events"]["schema_registry"]["password"] == "***"
    assert "hunter2" not in repr(to_dict(from_env))
    both = load(MaterializerConfig, None, [f"events.schema_registry.password_file={secret}"],
                env={"CASSCADE_EVENTS__SCHEMA_REGISTRY__PASSWORD": "hunter2"})
    with pytest.raises(ConfigError, match=r"events\.schema_registry\.password and"):
        both.events.schema_registry.access()


def test_the_workers_copy_holds_the_password_read_on_the_driver(tmp_path) -> None:
    secret = tmp_path / "registry.password"
    secret.write_text("s3cret\n")
    cfg = load(MaterializerConfig, None, ["events.format=avro",
                                          "events.schema_registry_url=https://r:8081",
                                          f"events.schema_registry.password_file={secret}"],
               env={})
    shipped = cfg.events.resolved()
    secret.unlink()  # a worker's host has no such file
    assert shipped.schema_registry.password_file is None
    assert shipped.schema_registry.access().password == "s3cret"
    assert "s3cret" not in repr(shipped)
    assert cfg.events.schema_registry.password is None  # the config itself is untouched


def test_a_bad_event_setting_is_refused_when_the_config_loads() -> None:
    with pytest.raises(ValueError, match=r"events\.varint_mode must be one of"):
        load(MaterializerConfig, None, ["events.varint_mode=huge"], env={})
    with pytest.raises(ValueError, match=r"events\.format must be one of json, avro"):
        load(MaterializerConfig, None, ["events.format=protobuf"], env={})
