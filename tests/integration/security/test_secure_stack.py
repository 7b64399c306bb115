"""The pipeline through locked doors (devstack.secure): Kafka on SASL_SSL with SCRAM-SHA-512
users and ACLs, Cassandra with PasswordAuthenticator, CassandraAuthorizer and client TLS
required, one CA made with keytool; no component is a super user.

The publisher agent (`casscade publisher run`) and the materializer connect as their own
users with configuration alone (passwords from files or the environment, never a flag); the
events equal Cassandra's SELECT; a wrong password, an untrusted CA, a user without ACLs and
a client without credentials are refused with a clear error; no secret reaches
--print-config or a log.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from devstack import cassandra, kafka, registry, secure, tls
from devstack import stack as devstack
from devstack.settings import StackSettings, repo_root
from materializer.kafka.avro_registry import ConfluentRegistry, RegistryError
from materializer.output.avro_wire import RegistryAccess
from shared.kafka_topics import TopicCreator, read_to_end
from shared.rowupdate import is_row_update
from shared.rowupdate_reader import read_row_update
from shared.schema import catalog_from_json
from shared.system_schema import read_system_schema
from shared.topic_names import raw_topic

from support.materializer_harness import (
    final_rows,
    materializer_command,
    oracle_rows,
    registry_events,
    run_materializer,
)
from support.publisher_harness import AgentProcess
from support.services import http_get, started_here
from support.workload import create_workload_tables, run_workload

pytestmark = pytest.mark.integration

PREFIX = f"sec{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def locked(stack: StackSettings) -> Iterator[StackSettings]:
    """The locked stack beside the open one (Kafka and a Cassandra node of its own), with
    the components' ACLs for PREFIX; what this module started is stopped after."""
    s = stack.secured()
    report = devstack.up(s, log=lambda msg: print(f"[locked] {msg}"))
    secure.grant_acls(s, PREFIX)
    try:
        yield s
    finally:
        if report.cassandra_started:
            cassandra.shutdown(s)
        if report.kafka_started:
            kafka.shutdown(s)


@pytest.fixture(scope="module")
def locked_registry(locked: StackSettings) -> Iterator[StackSettings]:
    """The locked stack's schema registry: https only, the stack's certificate."""
    with started_here(lambda: registry.up(locked, log=lambda m: print(f"[locked] {m}")),
                      lambda: registry.down(locked)):
        yield locked


@pytest.fixture(scope="module")
def admin_cql(locked: StackSettings):
    """A session as the locked node's superuser, over TLS."""
    cluster = cassandra.cql_cluster(locked)
    yield cluster.connect()
    cluster.shutdown()


def _security_sets(s: StackSettings, user: str) -> list[str]:
    return ["kafka.security.protocol=SASL_SSL", f"kafka.security.sasl_username={user}",
            f"kafka.security.ssl_ca_file={tls.ensure(s.state_dir).ca_pem}"]


def _raw_count(s: StackSettings, tables: list[str]) -> int:
    """The RowUpdates of `tables` ("ks.t") in the raw topic (none while it is missing;
    heartbeats are not counted)."""
    from confluent_kafka.admin import AdminClient

    conf = secure.client_config(s, secure.ADMIN)
    if raw_topic(PREFIX) not in AdminClient(conf).list_topics(timeout=10).topics:
        return 0
    records = (read_row_update(m.value()) for m in read_to_end(conf, raw_topic(PREFIX))
               if is_row_update(m.value()))
    return sum(f"{r['keyspace']}.{r['table']}" in tables for r in records)


def _locked_agent(s: StackSettings, workdir: Path, http_port: int,
                  kafka_password: str) -> AgentProcess:
    """An agent as the Kafka user and Cassandra role `publisher`, by configuration alone:
    the Kafka password in its environment, Cassandra's in a file, the stack's CA."""
    ca = str(tls.ensure(s.state_dir).ca_pem)
    cassandra_pw = secure.cassandra_password_file(s, "publisher")
    return AgentProcess(s, s, workdir, prefix=PREFIX, http_port=http_port, sections={
        "kafka": {"security": {"protocol": "SASL_SSL", "sasl_username": "publisher",
                               "ssl_ca_file": ca}},
        "cassandra": {"username": "publisher", "ssl": True, "ssl_ca_file": ca,
                      "password_file": str(cassandra_pw)}},
        env={"CASSCADE_KAFKA__SECURITY__SASL_PASSWORD": kafka_password})


def test_the_pipeline_runs_through_the_locked_doors(locked, locked_registry, admin_cql,
                                                   tmp_path) -> None:
    """Agent and job as their own users; Avro events through the https registry (the demo
    test runs JSON events through the same doors)."""
    ks = f"lk_{uuid.uuid4().hex[:8]}"
    admin_cql.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                      "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    ca = tls.ensure(locked.state_dir).ca_pem
    kafka_pw = secure.password(locked, "publisher")
    agent = _locked_agent(locked, tmp_path / "agent", 18190, kafka_pw)
    agent.start()
    try:
        agent.wait_serving(60)
        create_workload_tables(admin_cql, ks)
        run_workload(admin_cql, ks, 300)
        topics = [f"{ks}.r", f"{ks}.ctr"]
        # published when the count holds still for 5 s (the node syncs CDC every second)
        last, still = -1, 0.0
        deadline = time.monotonic() + 180
        while still < 5 and time.monotonic() < deadline:
            time.sleep(1)
            now = _raw_count(locked, topics)
            still = still + 1 if now == last and now > 0 else 0
            last = now
        assert last >= 200, f"the agent published {last} records"
        served = [http_get(18190, path) for path in ("/status", "/metrics", "/health")]
        assert [code for code, _ in served] == [200, 200, 200], served
    finally:
        assert agent.stop() == 0, agent.log.read_text()[-3000:]
    agent_log = agent.log.read_text()
    password = secure.password(locked, "materializer")
    cmd = materializer_command(locked, PREFIX, tmp_path / "ckpt",
                               *_security_sets(locked, "materializer"), "events.format=avro",
                               f"events.schema_registry_url={registry.url(locked)}",
                               f"events.schema_registry.ca_file={ca}")
    run_materializer(cmd, tmp_path / "job.log",
                     env={"CASSCADE_KAFKA__SECURITY__SASL_PASSWORD": password})
    tables = {t.table: t for t in catalog_from_json(read_system_schema(admin_cql)).values()
              if t.keyspace == ks}
    for name in ("r", "ctr"):
        events = registry_events(secure.client_config(locked, secure.ADMIN),
                                 f"{PREFIX}.{ks}.{name}", tables[name],
                                 {"url": registry.url(locked), "ssl.ca.location": str(ca)})
        assert final_rows([e[:4] for e in events]) == oracle_rows(admin_cql, tables[name]), name
    # `casscade verify` through the same doors, with the least docs/security.md lists:
    # Kafka as `verify` (READ, DESCRIBE on the prefix, groups read-), Cassandra as `verify`
    # (nothing until SELECT on this keyspace), the Avro schemas from the https registry
    verify_pw = secure.password(locked, "verify")
    refused = _verify_as_verify(locked, ks, ca, verify_pw)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert "SELECT" in refused.stderr and "verify" in refused.stderr, refused.stderr
    admin_cql.execute(f"GRANT SELECT ON KEYSPACE {ks} TO verify")
    # Cassandra caches a role's permissions for permissions_validity (2 s by default): the
    # refusal just seen stands that long
    time.sleep(2.5)
    checked = _verify_as_verify(locked, ks, ca, verify_pw)
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    assert "verified: all" in checked.stdout, checked.stdout
    secrets = [password, kafka_pw, verify_pw,
               secure.cassandra_password_file(locked, "publisher").read_text().strip(),
               secure.cassandra_password_file(locked, "verify").read_text().strip()]
    for text in (agent_log, (tmp_path / "job.log").read_text(), *(b for _, b in served),
                 checked.stdout + checked.stderr):
        assert not [s for s in secrets if s in text]
    shown = subprocess.run([*cmd, "--print-config"], capture_output=True, text=True,
                           cwd=repo_root(), timeout=60,
                           env={"CASSCADE_KAFKA__SECURITY__SASL_PASSWORD": password,
                                "PATH": "/usr/bin:/bin"})
    assert '"sasl_password": "***"' in shown.stdout, shown.stdout + shown.stderr
    assert password not in shown.stdout + shown.stderr


def _cassandra_refusal(locked: StackSettings, tmp_path: Path, **cassandra_section) -> str:
    """What `casscade publisher run` says when the node refuses it (it exits)."""
    agent = AgentProcess(locked, locked, tmp_path, prefix=PREFIX, http_port=18191,
                         sections={"cassandra": cassandra_section})
    agent.start()
    assert agent.proc is not None
    agent.proc.wait(60)
    return agent.log.read_text()


def test_cassandra_refuses_a_client_without_credentials(locked, tmp_path) -> None:
    said = _cassandra_refusal(locked, tmp_path, ssl=True,
                              ssl_ca_file=str(tls.ensure(locked.state_dir).ca_pem))
    assert f"cannot connect to Cassandra ({locked.host}:{locked.cql_port}: " in said
    assert "authentication" in said.lower(), said[-2000:]


def test_cassandra_refuses_a_wrong_password(locked, tmp_path) -> None:
    said = _cassandra_refusal(locked, tmp_path, ssl=True, username="publisher",
                              password="not-it",
                              ssl_ca_file=str(tls.ensure(locked.state_dir).ca_pem))
    assert "cannot connect to Cassandra" in said and "Bad credentials" in said, said[-2000:]
    assert "not-it" not in said


def test_cassandra_with_an_untrusted_ca_is_refused(locked, tmp_path) -> None:
    said = _cassandra_refusal(locked, tmp_path / "agent", ssl=True, username="publisher",
                              ssl_ca_file=str(tls.ensure(tmp_path).ca_pem))
    assert "cannot connect to Cassandra" in said and "CERTIFICATE_VERIFY_FAILED" in said, \
        said[-2000:]


def test_the_publisher_role_may_read_schemas_and_nothing_else(locked, admin_cql) -> None:
    from cassandra import Unauthorized

    from shared.cql import make_cluster

    cluster = make_cluster([locked.host], locked.cql_port, "publisher",
                           secure.cassandra_password_file(locked, "publisher").read_text()
                           .strip(), ssl_context=secure.cassandra_tls(locked))
    try:
        session = cluster.connect()
        assert session.execute("SELECT keyspace_name FROM system_schema.keyspaces").all()
        with pytest.raises(Unauthorized):
            session.execute("CREATE KEYSPACE nope WITH replication = "
                            "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    finally:
        cluster.shutdown()


def _refused(conf: dict[str, str], caplog: pytest.LogCaptureFixture) -> str:
    """Try to create a raw topic with `conf`; the error lines it logged."""
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="shared.kafka_topics"), \
            pytest.raises(KafkaException):
        TopicCreator(conf | {"log_level": 0}, 1, 1, timeout_s=5).ensure(raw_topic(PREFIX))
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
    # `connect` may read event topics, not create a raw one
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        TopicCreator(secure.client_config(locked, "connect"), 1, 1,
                     timeout_s=10).ensure(raw_topic(f"{PREFIX}.new"))


def test_plaintext_gets_nothing_from_the_locked_listener(locked) -> None:
    with pytest.raises(KafkaException):
        TopicCreator({"bootstrap.servers": locked.bootstrap_servers, "log_level": 0}, 1, 1,
                     timeout_s=5).ensure(raw_topic(PREFIX))


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


def test_the_demo_runs_on_the_locked_stack(stack, locked) -> None:
    """`make demo SECURE=1`: the demo's agent and job log in as publisher and materializer
    with configuration alone, the events come out, and no password reaches its output, its
    logs or the config files it writes."""
    env = dict(os.environ, CASSCADE_STATE_DIR=str(stack.state_dir))
    out = subprocess.run([sys.executable, "deploy/local/demo.py", "--secure"],
                         cwd=repo_root(), env=env, capture_output=True, text=True,
                         timeout=600, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "6 events: c=3, u=2, d=1" in out.stdout, out.stdout[-3000:]
    work = locked.state_dir / "demo"
    secrets = [p.read_text().strip()
               for d in (secure.secrets_dir(locked), work / "node" / "secrets")
               for p in d.glob("*.password")]
    assert len(secrets) >= 7  # Kafka's four users, the demo node's three roles
    written = [p.read_text(errors="replace") for p in (*work.glob("*.log"),
                                                      *work.glob("*.yaml"))]
    leaked = [s[:3] + "..." for s in secrets
              for text in (out.stdout, out.stderr, *written) if s in text]
    assert not leaked, f"passwords shown: {leaked}"


def _verify_as_verify(s: StackSettings, ks: str, ca: Path,
                      kafka_password: str) -> subprocess.CompletedProcess[str]:
    """`casscade verify` of the workload's tables as the Kafka user and Cassandra role
    `verify`, by configuration alone."""
    sets = [f"cassandra.port={s.cql_port}", "cassandra.username=verify",
            f"cassandra.password_file={secure.cassandra_password_file(s, 'verify')}",
            "cassandra.ssl=true", f"cassandra.ssl_ca_file={ca}",
            *_security_sets(s, "verify"), "events.format=avro",
            f"kafka.bootstrap_servers={s.bootstrap_servers}", f"kafka.topic_prefix={PREFIX}",
            f"events.schema_registry_url={registry.url(s)}",
            f"events.schema_registry.ca_file={ca}"]
    return subprocess.run(
        [sys.executable, "-m", "casscade.cli", "verify", "--table", f"{ks}.r", "--table",
         f"{ks}.ctr", "--grace", "1", *(f for kv in sets for f in ("--set", kv))],
        cwd=repo_root(), capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
        env=dict(os.environ, CASSCADE_KAFKA__SECURITY__SASL_PASSWORD=kafka_password))


def _operator_sets(s: StackSettings) -> list[str]:
    """The operator's Cassandra door by configuration: user, password file, CA."""
    return ["--set", f"cassandra.port={s.cql_port}", "--set", "cassandra.username=operator",
            "--set", "cassandra.password_file="
            f"{secure.cassandra_password_file(s, 'operator')}",
            "--set", "cassandra.ssl=true",
            "--set", f"cassandra.ssl_ca_file={tls.ensure(s.state_dir).ca_pem}"]


def _run(args: list[str], env: dict[str, str] | None = None) -> str:
    out = subprocess.run([sys.executable, "-m", "casscade.cli", *args], cwd=repo_root(),
                         capture_output=True, text=True, timeout=300,
                         stdin=subprocess.DEVNULL, env=dict(os.environ, **(env or {})))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout + out.stderr


def test_snapshot_filler_and_flush_through_the_locked_doors(locked, admin_cql,
                                                            tmp_path) -> None:
    """The operator's commands log in to Cassandra as `operator` (TLS, password file); the
    snapshot publishes as the Kafka user `publisher` (password from the environment);
    `publisher schema` reads the locked node's schema through the same settings."""
    ks = f"lo_{uuid.uuid4().hex[:8]}"
    admin_cql.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                      "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    admin_cql.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text) WITH cdc = true")
    for k in range(40):
        admin_cql.execute(f"INSERT INTO {ks}.t (k, v) VALUES ({k}, 'row {k}')")
    kafka_pw = secure.password(locked, "publisher")
    said = _run(["snapshot", "--table", f"{ks}.t", *_operator_sets(locked),
                 "--set", f"kafka.bootstrap_servers={locked.bootstrap_servers}",
                 "--set", f"kafka.topic_prefix={PREFIX}", "--set", "kafka.partitions=1",
                 "--set", f"state.path={tmp_path / 'snapshot-state'}",
                 *(f for kv in _security_sets(locked, "publisher") for f in ("--set", kv))],
                env={"CASSCADE_KAFKA__SECURITY__SASL_PASSWORD": kafka_pw})
    assert _raw_count(locked, [f"{ks}.t"]) == 40, said

    said += _run(["ops", "filler", *_operator_sets(locked), "--rate", "5", "--blob-kb", "1",
                  "--ttl", "30", "--duration", "3"])
    assert "filler:" in said

    nodetool = f"{sys.executable} -m casscade.cli dev nodetool --secure"
    data = locked.cassandra_dir / "data" / ks
    assert not list(data.glob("t-*/*Data.db"))  # still in the memtable
    said += _run(["ops", "flush", *_operator_sets(locked), "--nodetool", nodetool])
    assert f"{ks}.t" in said and list(data.glob("t-*/*Data.db")), said
    said += _run(["publisher", "schema", *_operator_sets(locked)])
    assert f'"{ks}"' in said and '"t"' in said, said[-2000:]
    secrets = [kafka_pw, secure.cassandra_password_file(locked, "operator").read_text().strip()]
    assert not [s for s in secrets if s in said]


def test_a_refused_agent_keeps_its_position(locked, admin_cql, tmp_path) -> None:
    """An agent with a wrong Kafka password says so in one line at start and exits non-zero
    (no retry can help); restarted with the right one from the same state, it publishes
    every row written meanwhile: none lost."""
    from support.services import wait_until

    ks = f"lr_{uuid.uuid4().hex[:8]}"
    admin_cql.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                      "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    admin_cql.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text) WITH cdc = true")

    def agent(password: str) -> AgentProcess:
        return _locked_agent(locked, tmp_path / "agent", 18191, password)

    topic = f"{ks}.t"
    for k in range(30):
        admin_cql.execute(f"INSERT INTO {ks}.t (k, v) VALUES ({k}, 'while refused')")
    time.sleep(3)  # the node syncs CDC every second: the rows are in cdc_raw
    refused = agent("not-the-password")
    started = time.monotonic()
    refused.start()
    assert refused.proc is not None
    assert refused.proc.wait(60) == 1
    assert time.monotonic() - started < 30
    said = refused.log.read_text()
    errors = [line for line in said.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and "Traceback" not in said, said[-3000:]
    assert errors[0].startswith(f"Error: Kafka at {locked.bootstrap_servers} refused "
                                "us: Kafka refused the credentials"), errors[0]
    assert "not-the-password" not in said
    assert _raw_count(locked, [topic]) == 0

    fixed = agent(secure.password(locked, "publisher"))
    fixed.start()
    try:
        wait_until(lambda: _raw_count(locked, [topic]) >= 30 or None, 90,
                   "the rows written while refused")
        time.sleep(3)  # nothing more arrives: each row once
    finally:
        assert fixed.stop() == 0, fixed.log.read_text()[-3000:]
    assert _raw_count(locked, [topic]) == 30


def test_the_registry_door_needs_its_ca(locked_registry) -> None:
    """Without the stack's CA the materializer's registry client stops at once with a clear
    message; with it (events.schema_registry.ca_file) the schema registers."""
    schema = {"type": "record", "name": "Door", "fields": [{"name": "id", "type": "int"}]}
    where = registry.url(locked_registry)
    assert where.startswith("https://")
    with pytest.raises(RegistryError, match="TLS handshake with the schema registry") as err:
        ConfluentRegistry(where).register(f"{PREFIX}.door-value", schema)
    assert "events.schema_registry.ca_file" in str(err.value) and where in str(err.value)
    access = RegistryAccess(ca_file=str(registry.ca_file(locked_registry)))
    assert ConfluentRegistry(where, access).register(f"{PREFIX}.door-value", schema) > 0
