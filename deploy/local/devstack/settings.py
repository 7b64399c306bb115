"""Where the local stack lives and which loopback ports it uses (env-overridable)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from devstack import cassandra_versions

HOST = "127.0.0.1"
MAX_NODES = 9  # 127.0.0.1 .. 127.0.0.9; JMX ports jmx_port .. jmx_port + 8
# StackSettings.server_jit: its names and the JVM options each means
SERVER_JIT: dict[str, tuple[str, ...]] = {"tiered": (), "c1": ("-XX:TieredStopAtLevel=1",)}


def repo_root() -> Path:
    """The casscade checkout this code runs from (holds deploy/local)."""
    env = os.environ.get("CASSCADE_REPO")
    root = Path(env) if env else Path(__file__).resolve().parents[3]
    if not (root / "deploy" / "local" / "maven").is_dir():
        raise RuntimeError(
            f"{root} is not a casscade checkout (no deploy/local/maven); the local stack runs "
            "from a source checkout: set CASSCADE_REPO to one"
        )
    return root


@dataclass(frozen=True)
class StackSettings:
    """Everything that varies between two local stacks: state directory, ports, sizes."""

    state_dir: Path
    kafka_port: int = 9092
    kafka_controller_port: int = 9093
    cql_port: int = 9042
    storage_port: int = 7000
    jmx_port: int = 7199
    connect_port: int = 8083  # Kafka Connect's REST API
    postgres_port: int = 5433  # not 5432: leave a system PostgreSQL alone
    # Apicurio Registry (`stack registry up`); not 8081-8082: Spark's worker UIs use them
    registry_port: int = 8085
    hdfs_port: int = 9820  # the NameNode's RPC port (`stack hdfs up`; devstack.hdfs)
    # Kafka's own default (kafka-server-start.sh). 512m ran out of heap (OutOfMemoryError,
    # then the broker's fatal fault) after the benchmarks had made and deleted some 5,000
    # partitions of 1,000-table runs
    kafka_heap: str = "1g"
    connect_heap: str = "384m"
    cassandra_heap: str = "1024m"
    # Which Cassandra line the nodes run: 4.0, 4.1 or 5.0 (devstack.cassandra_versions).
    cassandra_version: str = cassandra_versions.DEFAULT
    # 5.0 only (4.x has no such setting and always writes commit log version 7):
    # CASSANDRA_4 (5.0's default) writes commit log descriptor version 7; NONE writes 8.
    storage_compatibility_mode: str = "CASSANDRA_4"
    commitlog_sync_period: str = "1000ms"
    commitlog_segment_size: str = "4MiB"
    cdc_total_space: str = "1024MiB"
    # None, or a commit log compressor class: LZ4Compressor, SnappyCompressor,
    # DeflateCompressor, ZstdCompressor.
    commitlog_compression: str | None = None
    cluster_name: str = "casscade-local"
    # Nodes of the ring: node n listens on 127.0.0.n with the same CQL and storage ports,
    # JMX on jmx_port + n - 1; node 1 is the seed. `node_index` is which node these
    # settings describe (see node()).
    nodes: int = 1
    node_index: int = 1
    # Jars are shared by every stack of one checkout (the fixture generator runs its own).
    lib_root: Path | None = None
    extra: dict[str, str] = field(default_factory=dict)
    # The locked stack (devstack.secure): Kafka on SASL_SSL with SCRAM users and ACLs.
    secure: bool = False
    # cassandra.yaml's cdc_on_repair_enabled (5.0; true is Cassandra's default and what
    # docs/operations.md recommends): data a node receives by streaming (bootstrap,
    # decommission, replace, rebuild, repair) goes through its commit log, so its publisher
    # sees it. 4.x always does so and has no such key (cassandra_versions.FIXED_BEHAVIOUR).
    cdc_on_repair_enabled: bool = True
    # What one node does at its first start (set on StackSettings.node(n)'s copy; see
    # devstack.topology). auto_bootstrap None: the stack's rule, node 1 only (nodes 2..n of
    # a fresh ring have nothing to stream); True: join a ring that holds data by streaming.
    auto_bootstrap: bool | None = None
    # Take the tokens of the dead node at this address, streaming its data
    # (-Dcassandra.replace_address_first_boot; bootstraps, so auto_bootstrap cannot be False).
    replace_address: str | None = None
    # -Dcassandra.ring_delay_ms (Cassandra: 30 s): how long a joining, leaving or replacing
    # node waits for gossip to spread its state. None keeps Cassandra's.
    ring_delay_ms: int | None = None
    # The JIT of the stack's own JVMs (Cassandra nodes, nodetool, Kafka, Connect, the
    # registry): "tiered", the JVM's default (C1, then C2), as a production node runs; "c1",
    # HotSpot's first tier only (-XX:TieredStopAtLevel=1), for stacks that live minutes:
    # measured here, a 5.0 node's start took 6.5-7.4 CPU-s instead of 8.7-13.5 and 40,000
    # inserts 5.6-5.8 instead of 9.1-16.2; a broker's start 2.0-2.2 instead of 4.2-4.8.
    server_jit: str = "tiered"

    def __post_init__(self) -> None:
        spec = cassandra_versions.line(self.cassandra_version)  # ValueError: unknown line
        if self.server_jit not in SERVER_JIT:
            raise ValueError(f"server_jit {self.server_jit!r}: one of {', '.join(SERVER_JIT)}")
        if not self.cdc_on_repair_enabled and "cdc_on_repair_enabled" in spec.left_out:
            raise ValueError(f"Cassandra {spec.name} has no cdc_on_repair_enabled: it streams "
                             "CDC tables through the commit log always (as true does)")
        if self.replace_address is not None and self.auto_bootstrap is False:
            # Cassandra refuses it too, at start-up, unless told it is unsafe
            raise ValueError(f"node {self.node_index}: a replacement streams the data of "
                             f"{self.replace_address}; auto_bootstrap cannot be false")

    @property
    def bootstraps(self) -> bool:
        """The node's auto_bootstrap: as set, else true for node 1 and for a replacement."""
        if self.auto_bootstrap is not None:
            return self.auto_bootstrap
        return self.node_index == 1 or self.replace_address is not None

    @classmethod
    def from_env(cls, state_dir: Path | None = None) -> StackSettings:
        """Defaults, overridden by CASSCADE_* environment variables."""
        env = os.environ
        base = Path(env.get("CASSCADE_STATE_DIR") or (repo_root() / ".casscade"))
        lib = Path(env.get("CASSCADE_LIB_DIR") or (repo_root() / ".casscade" / "lib"))
        s = cls(state_dir=(state_dir or base).resolve(), lib_root=lib.resolve())
        ints = {
            "kafka_port": "CASSCADE_KAFKA_PORT",
            "kafka_controller_port": "CASSCADE_KAFKA_CONTROLLER_PORT",
            "cql_port": "CASSCADE_CQL_PORT",
            "storage_port": "CASSCADE_STORAGE_PORT",
            "jmx_port": "CASSCADE_JMX_PORT",
            "nodes": "CASSCADE_NODES",
            "connect_port": "CASSCADE_CONNECT_PORT",
            "postgres_port": "CASSCADE_POSTGRES_PORT",
            "registry_port": "CASSCADE_REGISTRY_PORT",
            "hdfs_port": "CASSCADE_HDFS_PORT",
        }
        changes: dict[str, object] = {
            attr: int(env[var]) for attr, var in ints.items() if env.get(var)
        }
        strs = {
            "kafka_heap": "CASSCADE_KAFKA_HEAP",
            "cassandra_heap": "CASSCADE_CASSANDRA_HEAP",
            "storage_compatibility_mode": "CASSCADE_STORAGE_COMPATIBILITY_MODE",
            "cassandra_version": cassandra_versions.ENV_VAR,
            "server_jit": "CASSCADE_SERVER_JIT",
        }
        changes.update({attr: env[var] for attr, var in strs.items() if env.get(var)})
        return replace(s, **changes)  # type: ignore[arg-type]

    def secured(self) -> StackSettings:
        """The locked stack beside this one: its own state directory (secure/) and ports
        (Kafka, Connect, PostgreSQL, the registry +100; Cassandra +200, clear of the test
        ring's +100), so they can all run at once."""
        if self.secure:
            return self
        return replace(self, secure=True, state_dir=self.state_dir / "secure",
                       cluster_name=self.cluster_name + "-secure",
                       kafka_port=self.kafka_port + 100,
                       kafka_controller_port=self.kafka_controller_port + 100,
                       cql_port=self.cql_port + 200, storage_port=self.storage_port + 200,
                       jmx_port=self.jmx_port + 200, connect_port=self.connect_port + 100,
                       postgres_port=self.postgres_port + 100,
                       registry_port=self.registry_port + 100)

    @property
    def jit_options(self) -> list[str]:
        """The JVM options that select `server_jit` (none for the JVM's own)."""
        return list(SERVER_JIT[self.server_jit])

    # ---- nodes --------------------------------------------------------------------------
    def node(self, n: int) -> StackSettings:
        """The settings of node `n` (1-based) of this ring."""
        if not 1 <= n <= MAX_NODES:
            raise ValueError(f"node {n}: nodes are numbered 1 to {MAX_NODES}")
        return replace(self, node_index=n)

    def all_nodes(self) -> list[StackSettings]:
        """Settings of every node of the ring, node 1 first."""
        return [self.node(n) for n in range(1, self.nodes + 1)]

    @property
    def host(self) -> str:
        """The loopback address this node binds (127.0.0.n)."""
        return f"127.0.0.{self.node_index}"

    @property
    def seed(self) -> str:
        """The ring's seed: node 1's storage endpoint."""
        return f"{HOST}:{self.storage_port}"

    @property
    def node_jmx_port(self) -> int:
        """This node's JMX port (JMX binds loopback 127.0.0.1 whatever the node's address)."""
        return self.jmx_port + self.node_index - 1

    # ---- layout -------------------------------------------------------------------------
    @property
    def lib_dir(self) -> Path:
        """Jars resolved from Maven Central, one folder per component."""
        return self.lib_root or self.state_dir / "lib"

    @property
    def kafka_dir(self) -> Path:
        """The broker's config, data, logs and pid file."""
        return self.state_dir / "kafka"

    @property
    def connect_dir(self) -> Path:
        """The Connect worker's config, offsets, logs and pid file."""
        return self.state_dir / "connect"

    @property
    def registry_dir(self) -> Path:
        """The schema registry's pid file, log and transaction object store."""
        return self.state_dir / "registry"

    @property
    def postgres_dir(self) -> Path:
        """PostgreSQL's data directory parent: data/, its socket, logs."""
        return self.state_dir / "postgres"

    @property
    def cassandra_line(self) -> cassandra_versions.CassandraLine:
        """The Cassandra line the nodes run: its release, jars, Java and yaml dialect."""
        return cassandra_versions.line(self.cassandra_version)

    @property
    def cassandra_dir(self) -> Path:
        """The node's config, data, commitlog, cdc_raw, hints, logs and pid file
        (node 1: cassandra/, node n: cassandra-n/)."""
        name = "cassandra" if self.node_index == 1 else f"cassandra-{self.node_index}"
        return self.state_dir / name

    @property
    def cdc_raw_dir(self) -> Path:
        """Where Cassandra hard-links CDC commit log segments and writes `_cdc.idx` files."""
        return self.cassandra_dir / "cdc_raw"

    @property
    def commitlog_dir(self) -> Path:
        """Cassandra's live commit log directory."""
        return self.cassandra_dir / "commitlog"

    @property
    def bootstrap_servers(self) -> str:
        """Kafka bootstrap address for clients."""
        return f"{HOST}:{self.kafka_port}"
