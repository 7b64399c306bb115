"""The locked stack's doors: Kafka's SASL_SSL listener (SCRAM-SHA-512 users, ACLs on) and
the users and passwords of each component, kept under <state>/secrets (mode 600)."""

from __future__ import annotations

import secrets
import ssl
import time
from pathlib import Path
from typing import Any

from devstack import tls
from devstack.settings import HOST, StackSettings
from shared import topic_names

ADMIN = "admin"  # the broker's own identity and the stack's operator: a super user
# Components connect as themselves, with the ACLs `grant_acls` gives them and nothing else.
USERS = (ADMIN, "publisher", "materializer", "connect", "verify")
MECHANISM = "SCRAM-SHA-512"


def secrets_dir(s: StackSettings) -> Path:
    """Where each user's password file lives."""
    return s.state_dir / "secrets"


def password_file(s: StackSettings, user: str, system: str = "kafka") -> Path:
    """The file holding `user`'s password for `system` (kafka, cassandra), made on first
    use."""
    path = secrets_dir(s) / f"{system}-{user}.password"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.parent.chmod(0o700)
        path.write_text(secrets.token_urlsafe(18) + "\n")
        path.chmod(0o600)
    return path


def password(s: StackSettings, user: str) -> str:
    """`user`'s Kafka password."""
    return password_file(s, user).read_text().strip()


def scram_args(s: StackSettings) -> list[str]:
    """`kafka-storage format` arguments that create every user's SCRAM credential (KRaft
    stores them in the metadata log, so they exist before the broker serves anyone)."""
    out: list[str] = []
    for user in USERS:
        out += ["--add-scram", f"{MECHANISM}=[name={user},password={password(s, user)}]"]
    return out


def listener_properties(s: StackSettings) -> str:
    """Broker config: clients and brokers on SASL_SSL, the controller on its own loopback
    listener, the standard authorizer with ACLs (nothing allowed without one)."""
    files = tls.ensure(s.state_dir)
    jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{ADMIN}" password="{password(s, ADMIN)}";')
    return f"""listeners=SASL_SSL://{HOST}:{s.kafka_port},CONTROLLER://{HOST}:{s.kafka_controller_port}
advertised.listeners=SASL_SSL://{HOST}:{s.kafka_port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=SASL_SSL
listener.security.protocol.map=CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL
sasl.enabled.mechanisms={MECHANISM}
sasl.mechanism.inter.broker.protocol={MECHANISM}
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={jaas}
ssl.keystore.type=PKCS12
ssl.keystore.location={files.server_keystore}
ssl.keystore.password={tls.STORE_PASSWORD}
ssl.key.password={tls.STORE_PASSWORD}
ssl.truststore.type=PKCS12
ssl.truststore.location={files.truststore}
ssl.truststore.password={tls.STORE_PASSWORD}
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
# admin: the broker itself; ANONYMOUS: the controller listener (loopback, KRaft only)
super.users=User:{ADMIN};User:ANONYMOUS
"""


def client_config(s: StackSettings, user: str, ca_file: Path | None = None) -> dict[str, str]:
    """librdkafka settings for `user` through the SASL_SSL door (confluent-kafka)."""
    return {"bootstrap.servers": s.bootstrap_servers, "security.protocol": "SASL_SSL",
            "sasl.mechanisms": MECHANISM, "sasl.username": user,
            "sasl.password": password(s, user),
            "ssl.ca.location": str(ca_file or tls.ensure(s.state_dir).ca_pem)}


def java_client_config(s: StackSettings, user: str) -> dict[str, str]:
    """The same door for a Java client (Kafka Connect, Spark's Kafka source and sink)."""
    jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{user}" password="{password(s, user)}";')
    return {"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM,
            "sasl.jaas.config": jaas, "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(tls.ensure(s.state_dir).ca_pem)}


def acl_plan(prefix: str) -> dict[str, list[tuple[str, str, str, list[str]]]]:
    """Per user, (resource type, pattern type, name, operations): the least each component
    needs for the topics under `prefix` (docs/security.md lists them)."""
    raw, schemas = topic_names.raw_topic(prefix), topic_names.schema_topic(prefix)
    return {
        # creates the raw topic and the schema topic, writes both (idempotent producer)
        "publisher": [("TOPIC", "LITERAL", raw, ["CREATE", "WRITE", "DESCRIBE"]),
                      ("TOPIC", "LITERAL", schemas, ["CREATE", "WRITE", "DESCRIBE"])],
        # reads the raw topic and the schemas; creates and writes the event topics, the
        # dead-letter and Avro schema topics (all under `<prefix>.`); Spark's source uses
        # consumer groups named spark-kafka-source-*, its own readers read-*; its tasks
        # write in transactions (exactly-once) under ids casscade.<prefix>.*; its driver
        # reads an event topic's cleanup policy before a truncate event (DESCRIBE_CONFIGS)
        "materializer": [("TOPIC", "PREFIXED", f"{prefix}.", ["READ", "DESCRIBE", "CREATE",
                                                             "WRITE", "DESCRIBE_CONFIGS"]),
                         ("GROUP", "PREFIXED", "spark-kafka-source-", ["READ"]),
                         ("GROUP", "PREFIXED", "read-", ["READ"]),
                         ("TRANSACTIONAL_ID", "PREFIXED",
                          topic_names.transactional_id_prefix(prefix), ["WRITE", "DESCRIBE"])],
        # a sink reads the event topics and commits in its group connect-<name>
        "connect": [("TOPIC", "PREFIXED", f"{prefix}.", ["READ", "DESCRIBE"]),
                    ("GROUP", "PREFIXED", "connect-", ["READ"])],
        # `casscade verify` reads the event topics by assignment, committing nothing
        "verify": [("TOPIC", "PREFIXED", f"{prefix}.", ["READ", "DESCRIBE"]),
                   ("GROUP", "PREFIXED", "read-", ["READ"])],
    }


def grant_acls(s: StackSettings, prefix: str) -> int:
    """Create the ACLs of `acl_plan(prefix)` as the admin user; returns how many."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    bindings = [AclBinding(ResourceType[rtype], name, ResourcePatternType[ptype],
                           f"User:{user}", "*", AclOperation[op], AclPermissionType.ALLOW)
                for user, grants in acl_plan(prefix).items()
                for rtype, ptype, name, ops in grants for op in ops]
    admin = AdminClient(client_config(s, ADMIN))
    _upsert_users(admin, s)
    for binding, future in admin.create_acls(bindings, request_timeout=30).items():
        future.result()  # raises with the broker's reason
        del binding
    return len(bindings)


def _upsert_users(admin: Any, s: StackSettings) -> None:
    """Every component user's SCRAM credential, set again from its password file: a stack
    formatted before a user was added to USERS gets it too."""
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    upserts = [UserScramCredentialUpsertion(u, info, password(s, u).encode())
               for u in USERS if u != ADMIN]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result()


# ---- Cassandra ------------------------------------------------------------------------------
CASSANDRA_SUPERUSER = "cassandra"  # the role a new node makes, with password "cassandra"
# Component roles and what they may do (docs/security.md).
CASSANDRA_GRANTS = {
    # the agent reads table definitions only
    "publisher": ["GRANT SELECT ON KEYSPACE system_schema TO publisher"],
    # snapshot reads tables, the filler writes its table: an operator's role
    "operator": ["GRANT SELECT ON ALL KEYSPACES TO operator",
                 "GRANT MODIFY ON ALL KEYSPACES TO operator",
                 "GRANT CREATE ON ALL KEYSPACES TO operator"],
    # `casscade verify`: SELECT on the tables it checks, granted per keyspace by whoever
    # runs it (the tests grant their own)
    "verify": [],
}


def cassandra_yaml(s: StackSettings) -> str:
    """cassandra.yaml lines of a locked node: passwords, permissions, client TLS required."""
    files = tls.ensure(s.state_dir)
    return f"""authenticator: PasswordAuthenticator
authorizer: CassandraAuthorizer
role_manager: CassandraRoleManager
client_encryption_options:
  enabled: true
  optional: false
  keystore: {files.server_keystore}
  keystore_password: {tls.STORE_PASSWORD}
  store_type: PKCS12
  require_client_auth: false
"""


def cassandra_password_file(s: StackSettings, role: str) -> Path:
    """The file holding `role`'s Cassandra password (made on first use)."""
    return password_file(s, role, "cassandra")


def _locked_marker(s: StackSettings) -> Path:
    return secrets_dir(s) / "cassandra-locked"


def cassandra_login(s: StackSettings) -> tuple[str, str]:
    """The superuser's name and password: the default one until `lock_cassandra` ran."""
    if _locked_marker(s).exists():
        return CASSANDRA_SUPERUSER, cassandra_password_file(s, CASSANDRA_SUPERUSER) \
            .read_text().strip()
    return CASSANDRA_SUPERUSER, CASSANDRA_SUPERUSER


def cassandra_tls(s: StackSettings) -> ssl.SSLContext:
    """The client TLS context that trusts the stack's CA."""
    from shared.cql import tls_context

    return tls_context(tls.ensure(s.state_dir).ca_pem)


def lock_cassandra(s: StackSettings) -> bool:
    """Make the component roles with their grants (any missing: a node locked before a
    role was added gets it too); on a new node also give the superuser a password of its
    own. True when this locked the node."""
    from shared.cql import make_cluster

    was_locked = _locked_marker(s).exists()
    cluster = make_cluster([s.host], s.cql_port, *cassandra_login(s),
                           ssl_context=cassandra_tls(s))
    try:
        session = cluster.connect()
        for role, grants in CASSANDRA_GRANTS.items():
            pw = cassandra_password_file(s, role).read_text().strip()
            session.execute(f"CREATE ROLE IF NOT EXISTS {role} WITH LOGIN = true "
                            "AND PASSWORD = %s", [pw])
            for grant in grants:
                session.execute(grant)
        if was_locked:
            return False
        new = cassandra_password_file(s, CASSANDRA_SUPERUSER).read_text().strip()
        session.execute(f"ALTER ROLE {CASSANDRA_SUPERUSER} WITH PASSWORD = %s", [new])
    finally:
        cluster.shutdown()
    _locked_marker(s).write_text("the superuser's password is in "
                                 f"{cassandra_password_file(s, CASSANDRA_SUPERUSER).name}\n")
    _wait_for_login(s, CASSANDRA_SUPERUSER, new)
    return True


def _wait_for_login(s: StackSettings, role: str, password: str, timeout_s: float = 30) -> None:
    """Block until `role` logs in with `password`: the node caches credentials for
    credentials_validity (2 s by default), so the old password works for a moment."""
    from cassandra import AuthenticationFailed
    from cassandra.cluster import NoHostAvailable

    from shared.cql import make_cluster

    deadline = time.monotonic() + timeout_s
    while True:
        cluster = make_cluster([s.host], s.cql_port, role, password,
                               ssl_context=cassandra_tls(s))
        try:
            cluster.connect()
            return
        except (NoHostAvailable, AuthenticationFailed):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
        finally:
            cluster.shutdown()
