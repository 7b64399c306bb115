"""Apicurio Registry 2.4.2.Final on loopback: a Confluent-compatible schema registry (its
ccompat API) built from Maven Central jars, with in-memory storage.

Maven Central serves the registry's app jar but not the build-time half of one small
Quarkus extension it uses, so the registry is re-augmented locally by the Quarkus Maven
plugin from deploy/local/maven/apicurio (a stand-in for that half is a module there). The
build lands in <lib>/apicurio, shared by every state directory of the checkout, and is
redone only when those sources change.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from devstack import artifacts, tls
from devstack.process import (
    StackError,
    pid_alive,
    port_in_use,
    read_pid,
    require_free_ports,
    spawn,
    stop,
    tail,
)
from devstack.settings import HOST, StackSettings, repo_root

VERSION = "2.4.2.Final"
_RUNNER = "apicurio-registry-local-1-runner.jar"  # the app module's artifactId-version
JVM_OPTS = [
    # A development registry holds a few hundred schemas: a small heap and the serial
    # collector (two cores) are plenty; measured RSS ~200 MB.
    "-Xmx256m", "-XX:+UseSerialGC",
    # Otherwise Narayana (the transaction manager) opens a socket to make a process id.
    "-DCoreEnvironmentBean.processImplementationClassName="
    "com.arjuna.ats.internal.arjuna.utils.UuidProcessId",
]
# Confluent Schema Registry's default; Apicurio's is none (every version accepted).
COMPATIBILITY = "BACKWARD"
_JSON = "application/vnd.schemaregistry.v1+json"


def source_dir() -> Path:
    """The Maven reactor the registry is built from."""
    return repo_root() / "deploy" / "local" / "maven" / "apicurio"


def build_dir(s: StackSettings) -> Path:
    """Where the built registry lives (shared by every stack of the checkout)."""
    return s.lib_dir / "apicurio"


def runner_jar(s: StackSettings) -> Path:
    """The registry's executable jar (its lib/ folder beside it)."""
    return build_dir(s) / "app" / _RUNNER


def pid_file(s: StackSettings) -> Path:
    """The registry's pid file."""
    return s.registry_dir / "registry.pid"


def log_file(s: StackSettings) -> Path:
    """The registry's combined stdout/stderr log."""
    return s.registry_dir / "logs" / "registry.log"


def _base(s: StackSettings) -> str:
    # the locked stack's registry speaks https only, with the stack's server certificate
    return f"{'https' if s.secure else 'http'}://{HOST}:{s.registry_port}"


def url(s: StackSettings) -> str:
    """Base URL of the Confluent-compatible API (what casscade's
    events.schema_registry_url takes)."""
    return f"{_base(s)}/apis/ccompat/v7"


def ca_file(s: StackSettings) -> Path | None:
    """The CA a client must trust on the locked stack (None on the open one)."""
    return tls.ensure(s.state_dir).ca_pem if s.secure else None


def _context(s: StackSettings) -> ssl.SSLContext | None:
    ca = ca_file(s)
    return None if ca is None else ssl.create_default_context(cafile=str(ca))


def api_url(s: StackSettings) -> str:
    """Base URL of Apicurio's own API (what its Kafka Connect converter's
    apicurio.registry.url takes)."""
    return f"{_base(s)}/apis/registry/v2"


def source_digest() -> str:
    """A digest of the reactor's sources (POMs, settings, Java, resources), not its output."""
    root = source_dir()
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root)
        if "target" in rel.parts:
            continue
        digest.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def build(s: StackSettings, log: Callable[[str], None] = print) -> Path:
    """Build the registry unless the build matches the sources already; its runner jar.

    Maven's local repository caches downloads (~210 MB into a cold one, ~60 s), so a
    rebuild, or a build in a fresh clone on the same machine, works offline in ~9 s.
    """
    target = build_dir(s)
    target.mkdir(parents=True, exist_ok=True)
    # Two builders at once (a test beside `stack registry up`) would share one work tree.
    with open(target / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        digest = source_digest()
        stamp = target / ".src-sha256"
        if (stamp.exists() and stamp.read_text().strip() == digest
                and runner_jar(s).exists()):
            return runner_jar(s)
        stamp.unlink(missing_ok=True)
        _maven_build(target, log)
        stamp.write_text(digest + "\n")
    return runner_jar(s)


def _maven_build(target: Path, log: Callable[[str], None]) -> None:
    # Built in a copy: the checkout stays free of target/ folders, and a failed build
    # leaves the previous registry in place.
    work = target / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source_dir(), work, ignore=shutil.ignore_patterns("target"))
    log(f"building Apicurio Registry {VERSION} from Maven Central jars "
        "(cached in the local Maven repo) ...")
    started = time.monotonic()
    # `package` is enough: the Quarkus plugin resolves the stand-in deployment module from
    # the reactor, so nothing goes into ~/.m2 under Apicurio's coordinates.
    artifacts.run_maven(["-s", str(work / "settings.xml"), "-f", str(work / "pom.xml"),
                         "package"], f"Maven could not build the registry ({source_dir()})")
    built = work / "app" / "target"
    app = target / "app"
    shutil.rmtree(app, ignore_errors=True)
    app.mkdir()
    shutil.move(built / _RUNNER, app / _RUNNER)
    shutil.move(built / "lib", app / "lib")
    shutil.rmtree(work, ignore_errors=True)
    log(f"registry built in {time.monotonic() - started:.0f}s")


def running_pid(s: StackSettings) -> int | None:
    """The pid of the registry this state directory started, if it is alive."""
    return read_pid(pid_file(s))


def start(s: StackSettings, jar: Path) -> int:
    """Start the registry on 127.0.0.1:registry_port (in-memory storage); its pid."""
    require_free_ports({"schema registry": s.registry_port})
    java = artifacts.find_java()
    s.registry_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        str(java), *JVM_OPTS, *s.jit_options,
        f"-Dquarkus.http.host={HOST}", f"-Dquarkus.http.port={s.registry_port}",
        f"-Dregistry.rules.global.compatibility={COMPATIBILITY}",
        *(_https_only(s) if s.secure else []),
        "-jar", str(jar),
    ]
    # cwd: Narayana would keep its ObjectStore/ folder in the working directory.
    return spawn(argv, pid_file(s), log_file(s), cwd=s.registry_dir)


def _https_only(s: StackSettings) -> list[str]:
    """Quarkus flags: TLS on the registry's port with the stack's server key pair, no
    plain HTTP listener."""
    files = tls.ensure(s.state_dir)
    return [f"-Dquarkus.http.ssl-port={s.registry_port}",
            "-Dquarkus.http.insecure-requests=disabled",
            f"-Dquarkus.http.ssl.certificate.key-store-file={files.server_keystore}",
            "-Dquarkus.http.ssl.certificate.key-store-file-type=PKCS12",
            f"-Dquarkus.http.ssl.certificate.key-store-password={tls.STORE_PASSWORD}"]


def answers(s: StackSettings, timeout_s: float = 2.0) -> bool:
    """True when GET <ccompat>/subjects answers 200."""
    try:
        with urllib.request.urlopen(f"{url(s)}/subjects", timeout=timeout_s,
                                    context=_context(s)) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def wait_ready(s: StackSettings, pid: int, timeout_s: float = 90.0) -> None:
    """Block until the ccompat API answers; StackError with the log tail otherwise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            raise StackError("the schema registry exited during start-up; last lines of "
                             f"{log_file(s)}:\n" + tail(log_file(s)))
        if answers(s):
            _publish_compatibility(s)
            return
        time.sleep(0.25)
    raise StackError(f"the schema registry did not answer on {url(s)} within "
                     f"{timeout_s:.0f}s; last lines of {log_file(s)}:\n" + tail(log_file(s)))


def _publish_compatibility(s: StackSettings) -> None:
    # The start-up property already enforces the rule; storing it too makes GET /config
    # (Confluent clients' get_compatibility) report it instead of NONE.
    body = json.dumps({"compatibility": COMPATIBILITY}).encode()
    req = urllib.request.Request(f"{url(s)}/config", data=body, method="PUT",
                                 headers={"Content-Type": _JSON})
    try:
        with urllib.request.urlopen(req, timeout=10, context=_context(s)) as resp:
            resp.read()
    except (urllib.error.URLError, OSError) as exc:
        raise StackError(f"the schema registry at {url(s)} refused its global "
                         f"compatibility {COMPATIBILITY}: {exc}") from exc


def up(s: StackSettings, log: Callable[[str], None] = print) -> bool:
    """Build if needed, start the registry unless it runs, and wait until it answers.
    True when this call started it."""
    jar = build(s, log)
    if running_pid(s) is not None:
        log(f"schema registry already running: {url(s)}")
        return False
    started = time.monotonic()
    pid = start(s, jar)
    try:
        wait_ready(s, pid)
    except StackError:
        stop(pid_file(s), timeout_s=10)
        raise
    log(f"schema registry (Apicurio {VERSION}) up in {time.monotonic() - started:.1f}s: "
        f"{url(s)} (Apicurio API: {api_url(s)})")
    return True


def down(s: StackSettings) -> bool:
    """Stop the registry this state directory started; True when one was running."""
    return stop(pid_file(s), timeout_s=20)


def status(s: StackSettings) -> tuple[bool, str]:
    """Whether the registry runs and answers, and a line saying so."""
    pid = running_pid(s)
    if pid is None:
        taken = port_in_use(s.registry_port)
        return False, ("not running" + (f" (but something else listens on port "
                                         f"{s.registry_port})" if taken else ""))
    if not answers(s):
        return False, f"pid {pid} alive but {url(s)} does not answer (see `registry logs`)"
    return True, f"running (pid {pid}) at {url(s)}"
