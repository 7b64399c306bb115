"""Where Avro event schemas are published (the headers themselves: `output.avro_wire`).

- `ConfluentRegistry`: a Confluent-compatible schema registry (REST). Subjects follow the
  TopicNameStrategy (`<topic>-key`, `<topic>-value`); messages use the Confluent wire
  format: byte 0, then the 4-byte big-endian schema id.
- `SchemaTopic`: no registry. Messages use Avro's single-object encoding (bytes C3 01, then
  the schema's 8-byte little-endian CRC-64-AVRO fingerprint), and every schema goes to a
  compacted topic keyed by its fingerprint in hex, where any consumer can look it up.

Both are asked once per schema per Python worker, so this I/O is off the per-row path.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from materializer.output.avro_wire import (
    CONFLUENT_MAGIC,
    OPEN,
    SINGLE_OBJECT_MAGIC,
    RegistryAccess,
    schema_fingerprint,
)
from shared.kafka_security import client_conf
from shared.reach import Unreachable

if TYPE_CHECKING:
    from materializer.output.event_settings import EventSettings

log = logging.getLogger(__name__)
_REGISTRY_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryError(RuntimeError):
    """The schema registry refused a schema or could not be reached."""


class RegistryUnreachable(RegistryError, Unreachable):
    """The registry did not answer within a command's start-up wait, or refused us."""


def registry_checks(events: EventSettings | None) -> list[Callable[[], None]]:
    """The schema registry's reach check (for shared.reach.reach_or_exit) when Avro events
    register their schemas there; none otherwise (None: no events are written)."""
    if events is None or events.format != "avro" or not events.schema_registry_url:
        return []
    url, access = events.schema_registry_url, events.schema_registry

    def check() -> None:
        ConfluentRegistry(url, access.access()).check()

    return [check]


def _pause(attempt: int) -> None:
    """Wait before retry `attempt` + 1: doubling from 0.1 s up to 5 s, each wait drawn from
    half to one and a half of that, so writers that raced into one failure (Spark's
    workers registering one table's schema at once) do not race again in step."""
    time.sleep(min(0.1 * 2.0 ** attempt, 5.0) * random.uniform(0.5, 1.5))


class ConfluentRegistry:
    """Registers schemas with a Confluent-compatible registry at `url`.

    A 5xx or no answer is retried for `retry_s` (a registry restarting, or its storage's
    lock contention, heals in seconds: failing the task then would only restart it), or
    at most `attempts` times when that is given; a 4xx is a refusal, never retried."""

    def __init__(self, url: str, access: RegistryAccess = OPEN,
                 timeout_s: float = 10.0, retry_s: float = 60.0,
                 attempts: int | None = None) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self.attempts = attempts
        self._context = (ssl.create_default_context(cafile=access.ca_file)
                         if access.ca_file else None)
        self._headers = {"Content-Type": _REGISTRY_TYPE, "Accept": _REGISTRY_TYPE}
        if access.username is not None:
            token = f"{access.username}:{access.password or ''}".encode()
            self._headers["Authorization"] = "Basic " + base64.b64encode(token).decode()

    def check(self, wait_s: float = 15.0) -> None:
        """RegistryUnreachable (a RegistryError) in one line when the registry does not
        answer within `wait_s` (tried again meanwhile), or refuses us: a job's start,
        before Spark."""
        deadline = time.monotonic() + wait_s
        req = urllib.request.Request(f"{self.url}/subjects", headers=self._headers)
        while True:
            try:
                with urllib.request.urlopen(req, timeout=min(self.timeout_s, wait_s),
                                            context=self._context):
                    return
            except urllib.error.HTTPError as exc:
                if exc.code < 500:
                    hint = (" (check events.schema_registry.username and its password)"
                            if exc.code in (401, 403) else "")
                    raise RegistryUnreachable(f"schema registry {self.url} refused us: HTTP "
                                              f"{exc.code} {exc.reason}{hint}") from None
                failure = f"HTTP {exc.code} {exc.reason}"
            except urllib.error.URLError as exc:
                failure = str(exc.reason)
                if isinstance(exc.reason, ssl.SSLError):
                    raise RegistryUnreachable(f"the TLS handshake with the schema registry "
                                              f"{self.url} failed: {failure}") from None
            except OSError as exc:
                failure = str(exc)
            if time.monotonic() + 2 > deadline:
                raise RegistryUnreachable(f"schema registry {self.url} did not answer within "
                                          f"{wait_s:.0f} s: {failure}")
            time.sleep(2)

    def schema(self, schema_id: int) -> Any:
        """The Avro schema the registry holds under `schema_id` (a reader's lookup)."""
        req = urllib.request.Request(f"{self.url}/schemas/ids/{schema_id}",
                                     headers=self._headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s,
                                        context=self._context) as resp:
                return json.loads(json.load(resp)["schema"])
        except (urllib.error.URLError, OSError, KeyError, ValueError) as exc:
            raise RegistryError(f"schema registry {self.url}: cannot read schema id "
                                f"{schema_id}: {exc}") from None

    def register(self, subject: str, schema: Any) -> int:
        """The registry's id of `schema` under `subject` (registering it if new)."""
        body = json.dumps({"schema": json.dumps(schema), "schemaType": "AVRO"}).encode()
        subject_path = f"{self.url}/subjects/{urllib.request.quote(subject, safe='')}"
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._register_once(subject_path, body)
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode(errors="replace")[:500]
                if exc.code < 500:  # incompatible or malformed: retrying cannot help
                    hint = (" (check events.schema_registry.username and its password)"
                            if exc.code in (401, 403) else "")
                    raise RegistryError(f"schema registry {self.url} refused subject "
                                        f"{subject!r}: HTTP {exc.code} {detail}{hint}") from exc
                failure: Exception = RegistryError(f"HTTP {exc.code} {detail}")
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, ssl.SSLError):  # a certificate does not heal
                    raise RegistryError(
                        f"the TLS handshake with the schema registry {self.url} failed (is "
                        f"events.schema_registry.ca_file the CA that signed its "
                        f"certificate?): {exc.reason}") from exc
                failure = exc
            except (OSError, ValueError, KeyError) as exc:
                failure = exc
            spent = time.monotonic() - started
            if attempt == self.attempts or spent >= self.retry_s:
                raise RegistryError(f"schema registry {self.url} unreachable for subject "
                                    f"{subject!r} after {attempt} attempts in {spent:.1f} s: "
                                    f"{failure}")
            log.warning("schema registry not answering; retrying",
                        extra={"url": self.url, "subject": subject, "attempt": attempt,
                               "error": str(failure)})
            _pause(attempt)

    def _register_once(self, subject_path: str, body: bytes, again: bool = True) -> int:
        """POST the schema; on a conflict (409) find it under the subject, or POST once more.

        A 409 is an incompatible schema, or (Apicurio) the loss of a race to create the
        subject: another worker created it a moment ago with this schema (the lookup finds
        its id) or with another version of the table (registering again adds ours)."""
        try:
            return self._post(f"{subject_path}/versions", body)
        except urllib.error.HTTPError as exc:
            if exc.code != 409:
                raise
            found = self._lookup(subject_path, body)
            if found is not None:
                return found
            if not again:
                raise
        return self._register_once(subject_path, body, again=False)

    def _post(self, where: str, body: bytes) -> int:
        req = urllib.request.Request(where, data=body, method="POST", headers=self._headers)
        with urllib.request.urlopen(req, timeout=self.timeout_s,
                                    context=self._context) as resp:
            return int(json.load(resp)["id"])

    def _lookup(self, subject_path: str, body: bytes) -> int | None:
        """The id of this schema under the subject (POST /subjects/{subject}); None if the
        subject does not hold it."""
        try:
            return self._post(subject_path, body)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def header(self, subject: str, schema: Any) -> bytes:
        """Confluent wire format header: magic byte 0 + 4-byte big-endian schema id."""
        return CONFLUENT_MAGIC + self.register(subject, schema).to_bytes(4, "big")


class SchemaTopic:
    """Publishes schemas to a compacted Kafka topic, keyed by fingerprint (hex)."""

    def __init__(self, bootstrap: str | Mapping[str, str], topic: str,
                 ensure_topic: Any = None) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.ensure_topic = ensure_topic  # (topic, compacted) -> None
        self._sent: set[bytes] = set()

    def header(self, subject: str, schema: Any) -> bytes:
        """Single-object encoding header; the schema is on the topic before this returns."""
        fp = schema_fingerprint(schema)
        if fp not in self._sent:
            self._publish(fp, schema)
            self._sent.add(fp)
        return SINGLE_OBJECT_MAGIC + fp

    def _publish(self, fp: bytes, schema: Any) -> None:
        from confluent_kafka import Producer

        if self.ensure_topic is not None:
            self.ensure_topic(self.topic, True)
        producer = Producer(client_conf(self.bootstrap) | {"acks": "all",
                                                           "enable.idempotence": True})
        errors: list[str] = []
        producer.produce(self.topic, key=fp.hex().encode(), value=json.dumps(schema).encode(),
                         on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
        left = producer.flush(30)
        if left or errors:
            raise RuntimeError(f"could not publish an Avro schema to {self.topic} at "
                               f"{client_conf(self.bootstrap)['bootstrap.servers']}: "
                               f"{errors or 'delivery timed out'}")
