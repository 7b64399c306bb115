"""The pipeline through a locked Kafka: SASL_SSL with SCRAM-SHA-512 users, a CA made with
keytool, ACLs on and no super user for the components (devstack.secure).

The publisher and the materializer connect as their own users with configuration alone
(the materializer's password from the environment, never a flag); the events equal
Cassandra's SELECT; a wrong password, an untrusted CA and a user without ACLs are refused
with a clear error; no secret reaches --print-config or a log.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from materializer_harness import (
    final_rows,
    materializer_command,
    oracle_rows,
    publish_new_cdc,
    read_events,
    run_materializer,
)
from reference import cdc_offsets
from test_decode_random_workload import create_workload_tables, run_workload

from devstack import artifacts, kafka, secure, tls
from devstack.settings import StackSettings, repo_root
from publisher.commitlog.schema_source import read_system_schema
from shared.kafka_topics import TopicCreator
from shared.schema import catalog_from_json

pytestmark = pytest.mark.integration

PREFIX = f"sec{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def locked(stack: StackSettings) -> Iterator[StackSettings]:
    """A locked Kafka beside the stack's own (its Cassandra stays the stack's), with the
    components' ACLs for PREFIX; stopped after if this module started it."""
    s = stack.secured()
    started = kafka.running_pid(s) is None
    if started:
        pid = kafka.start(s, artifacts.find_java())
        kafka.wait_ready(s, pid)
    secure.grant_acls(s, PREFIX)
    try:
        yield s
    finally:
        if started:
            kafka.shutdown(s)


def _security_sets(s: StackSettings, user: str) -> list[str]:
    return ["kafka.security.protocol=SASL_SSL", f"kafka.security.sasl_username={user}",
            f"kafka.security.ssl_ca_file={tls.ensure(s.state_dir).ca_pem}"]


def test_the_pipeline_runs_through_the_locked_doors(locked, stack, cql, tmp_path) -> None:
    ks = f"lk_{uuid.uuid4().hex[:8]}"
    cql.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    try:
        create_workload_tables(cql, ks)
        before = cdc_offsets(stack.cdc_raw_dir)
        run_workload(cql, ks, 300)
        acked = publish_new_cdc(stack, cql, before, PREFIX, tmp_path,
                                kafka=secure.client_config(locked, "publisher"))
        assert acked >= 300
        password = secure.password(locked, "materializer")
        cmd = materializer_command(locked, PREFIX, tmp_path / "ckpt",
                                   *_security_sets(locked, "materializer"))
        run_materializer(cmd, tmp_path / "job.log",
                         env={"CASSCADE_KAFKA__SECURITY__SASL_PASSWORD": password})
        tables = {t.table: t for t in catalog_from_json(read_system_schema(cql)).values()
                  if t.keyspace == ks}
        for name in ("r", "ctr"):
            events = read_events(secure.client_config(locked, secure.ADMIN),
                                 f"{PREFIX}.{ks}.{name}")
            assert final_rows(events) == oracle_rows(cql, tables[name]), name
        assert password not in (tmp_path / "job.log").read_text()
        shown = subprocess.run([*cmd, "--print-config"], capture_output=True, text=True,
                               cwd=repo_root(), timeout=60,
                               env={"CASSCADE_KAFKA__SECURITY__SASL_PASSWORD": password,
                                    "PATH": "/usr/bin:/bin"})
        assert '"sasl_password": "***"' in shown.stdout, shown.stdout + shown.stderr
        assert password not in shown.stdout + shown.stderr
    finally:
        cql.execute(f"DROP KEYSPACE {ks}")


def _refused(conf: dict[str, str], caplog: pytest.LogCaptureFixture) -> str:
    """Try to create a raw topic with `conf`; the error lines it logged."""
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="shared.kafka_topics"), \
            pytest.raises(KafkaException):
        TopicCreator(conf | {"log_level": 0}, 1, 1, timeout_s=5).ensure(f"{PREFIX}.raw.x.y")
    return "\n".join(r.getMessage() for r in caplog.records)


def test_a_wrong_password_is_refused_with_a_clear_message(locked, caplog) -> None:
    conf = secure.client_config(locked, "publisher") | {"sasl.password": "not-it"}
    said = _refused(conf, caplog)
    assert "Kafka refused the credentials" in said
    assert f"sasl_ssl://127.0.0.1:{locked.kafka_port}" in said
    assert "not-it" not in said


def test_an_untrusted_certificate_is_refused_with_a_clear_message(locked, caplog,
                                                                  tmp_path) -> None:
    other_ca = tls.ensure(tmp_path).ca_pem  # a CA of its own: not the broker's
    said = _refused(secure.client_config(locked, "publisher", other_ca), caplog)
    assert "the TLS handshake with Kafka failed" in said
    assert "certificate verify failed" in said


def test_a_user_without_acls_is_refused(locked) -> None:
    # `connect` may read event topics, not create raw ones
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        TopicCreator(secure.client_config(locked, "connect"), 1, 1,
                     timeout_s=10).ensure(f"{PREFIX}.raw.a.b")


def test_plaintext_gets_nothing_from_the_locked_listener(locked) -> None:
    with pytest.raises(KafkaException):
        TopicCreator({"bootstrap.servers": locked.bootstrap_servers, "log_level": 0}, 1, 1,
                     timeout_s=5).ensure(f"{PREFIX}.raw.a.b")


def test_print_config_of_the_publisher_hides_the_password(locked) -> None:
    password = secure.password(locked, "publisher")
    out = subprocess.run(
        [sys.executable, "-m", "casscade.cli", "publisher", "run", "--print-config",
         "--set", "kafka.security.protocol=SASL_SSL",
         "--set", "kafka.security.sasl_username=publisher"],
        capture_output=True, text=True, cwd=repo_root(), timeout=60,
        env={"CASSCADE_KAFKA__SECURITY__SASL_PASSWORD": password, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert '"sasl_password": "***"' in out.stdout and password not in out.stdout
    assert Path(secure.password_file(locked, "publisher")).stat().st_mode & 0o077 == 0
