"""A real HDFS on loopback (`stack hdfs up`): one NameNode and one DataNode, two JVMs run
from Apache Hadoop's own jars on Maven Central (deploy/local/maven/hdfs), for a checkpoint
on `hdfs://127.0.0.1:9820/...` as a cluster user has.

Ports are Hadoop's defaults, all moved together by CASSCADE_HDFS_PORT (the NameNode's RPC
port; its web UI +50, the DataNode's data transfer +46, web UI +44, IPC +47). The
NameNode's process user is HDFS's superuser; `shell(..., user=)` acts as another user
(simple authentication: HADOOP_USER_NAME), which is how a permissions test becomes a
plain user.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from devstack import artifacts, process
from devstack.process import StackError, read_pid, require_free_ports, tail
from devstack.settings import HOST, StackSettings

NAMENODE_CLASS = "org.apache.hadoop.hdfs.server.namenode.NameNode"
DATANODE_CLASS = "org.apache.hadoop.hdfs.server.datanode.DataNode"
SHELL_CLASS = "org.apache.hadoop.fs.FsShell"
DAEMONS = {"namenode": NAMENODE_CLASS, "datanode": DATANODE_CLASS}
HEAP = "256m"
JVM_OPTS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            # a line per block added or reported: noise for a checkpoint's small files
            "-Dorg.slf4j.simpleLogger.log.BlockStateChange=warn",
            "-Dorg.slf4j.simpleLogger.log.org.apache.hadoop.hdfs.StateChange=warn"]


def hdfs_dir(s: StackSettings) -> Path:
    """The NameNode's and DataNode's config, data, logs and pid files."""
    return s.state_dir / "hdfs"


def ports(s: StackSettings) -> dict[str, int]:
    """Every port the two daemons bind on loopback (Hadoop's defaults at port 9820)."""
    p = s.hdfs_port
    return {"namenode RPC": p, "namenode web": p + 50, "datanode data": p + 46,
            "datanode web": p + 44, "datanode IPC": p + 47}


def uri(s: StackSettings, path: str = "/") -> str:
    """The hdfs:// URI of `path` on this file system."""
    return f"hdfs://{HOST}:{s.hdfs_port}/{path.lstrip('/')}"


def site_files(s: StackSettings) -> dict[str, str]:
    """core-site.xml and hdfs-site.xml of the two daemons and the shell."""
    d, p = hdfs_dir(s), ports(s)
    core = {"fs.defaultFS": uri(s, ""), "hadoop.tmp.dir": str(d / "tmp")}
    hdfs = {
        "dfs.replication": "1",  # one DataNode
        "dfs.namenode.rpc-address": f"{HOST}:{p['namenode RPC']}",
        "dfs.namenode.http-address": f"{HOST}:{p['namenode web']}",
        "dfs.datanode.address": f"{HOST}:{p['datanode data']}",
        "dfs.datanode.http.address": f"{HOST}:{p['datanode web']}",
        "dfs.datanode.ipc.address": f"{HOST}:{p['datanode IPC']}",
        "dfs.namenode.name.dir": str(d / "name"),
        "dfs.datanode.data.dir": str(d / "data"),
        "dfs.permissions.enabled": "true",
        # leave safe mode as soon as the blocks are reported (default: 30 s later), so a
        # NameNode restarted mid-stream serves again in seconds
        "dfs.namenode.safemode.extension": "0",
    }
    return {"core-site.xml": _xml(core), "hdfs-site.xml": _xml(hdfs)}


def _xml(props: dict[str, str]) -> str:
    rows = "".join(f"  <property><name>{k}</name><value>{v}</value></property>\n"
                   for k, v in props.items())
    return ("<?xml version=\"1.0\"?>\n<!-- written by casscade's local stack on every "
            f"`stack hdfs up` -->\n<configuration>\n{rows}</configuration>\n")


def conf_dir(s: StackSettings) -> Path:
    """The Hadoop configuration directory (HADOOP_CONF_DIR for a client of this HDFS)."""
    return hdfs_dir(s) / "conf"


def pid_file(s: StackSettings, daemon: str) -> Path:
    """A daemon's pid file (namenode, datanode)."""
    return hdfs_dir(s) / f"{daemon}.pid"


def log_file(s: StackSettings, daemon: str) -> Path:
    """A daemon's combined stdout/stderr log."""
    return hdfs_dir(s) / "logs" / f"{daemon}.log"


def running_pid(s: StackSettings, daemon: str) -> int | None:
    """The pid of the daemon this state directory started, if it is alive."""
    return read_pid(pid_file(s, daemon))


def _java_cmd(s: StackSettings, java: Path, main: str, *args: str) -> list[str]:
    lib = artifacts.lib_dir(s.lib_dir, "hdfs")
    return [str(java), f"-Xmx{HEAP}", *JVM_OPTS, "-cp", f"{conf_dir(s)}:{lib}/*", main, *args]


def _client(s: StackSettings, log: Callable[[str], None] = print) -> None:
    """What any of its JVMs needs: the jars fetched, the site files written."""
    artifacts.fetch(s.lib_dir, "hdfs", log)
    conf_dir(s).mkdir(parents=True, exist_ok=True)
    for name, text in site_files(s).items():
        (conf_dir(s) / name).write_text(text)


def _prepare(s: StackSettings, java: Path, log: Callable[[str], None]) -> None:
    """The jars and site files; the NameNode's directory formatted on first use."""
    _client(s, log)
    if not (hdfs_dir(s) / "name" / "current" / "VERSION").exists():
        fmt = subprocess.run(_java_cmd(s, java, NAMENODE_CLASS, "-format", "-nonInteractive"),
                             capture_output=True, text=True, timeout=120)
        if fmt.returncode != 0:
            raise StackError(f"formatting the NameNode's directory {hdfs_dir(s) / 'name'} "
                             "failed:\n" + (fmt.stdout + fmt.stderr)[-2000:])


def start_daemon(s: StackSettings, daemon: str, java: Path | None = None,
                 log: Callable[[str], None] = print) -> bool:
    """Start `daemon` unless it runs (False then) and wait until the file system serves."""
    java = java or artifacts.find_java()
    if running_pid(s, daemon) is None:
        _prepare(s, java, log)
        own = {k: v for k, v in ports(s).items() if k.startswith(daemon)}
        require_free_ports(own)
        pid = process.spawn(_java_cmd(s, java, DAEMONS[daemon]), pid_file(s, daemon),
                            log_file(s, daemon), cwd=hdfs_dir(s))
        log(f"hdfs {daemon}: starting (pid {pid})")
        started = True
    else:
        started = False
    if running_pid(s, "namenode") and running_pid(s, "datanode"):
        wait_ready(s)
    return started


def up(s: StackSettings, log: Callable[[str], None] = print) -> list[str]:
    """Start the NameNode, then the DataNode (what runs is reused), and wait until the
    NameNode has a live DataNode and is out of safe mode; the daemons it started."""
    t0 = time.monotonic()
    java = artifacts.find_java()
    started = [d for d in DAEMONS if start_daemon(s, d, java, log)]
    log(f"hdfs: {uri(s)} serving after {time.monotonic() - t0:.1f}s (web UI "
        f"http://{HOST}:{ports(s)['namenode web']}, conf {conf_dir(s)})")
    return started


def namenode_state(s: StackSettings, timeout_s: float = 2.0) -> dict | None:
    """The NameNode's FSNamesystemState bean from its web UI's /jmx, None if it does not
    answer."""
    url = (f"http://{HOST}:{ports(s)['namenode web']}/jmx"
           "?qry=Hadoop:service=NameNode,name=FSNamesystemState")
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            beans = json.load(resp).get("beans", [])
    except (OSError, ValueError):
        return None
    return beans[0] if beans else None


def list_names(s: StackSettings, path: str, timeout_s: float = 5.0) -> list[str] | None:
    """The names in directory `path`, through the NameNode's WebHDFS (no JVM to start);
    None if it does not exist, StackError if the NameNode does not answer."""
    url = (f"http://{HOST}:{ports(s)['namenode web']}/webhdfs/v1/{path.strip('/')}"
           "?op=LISTSTATUS")
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            listing = json.load(resp)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise StackError(f"WebHDFS {url}: HTTP {exc.code}") from exc
    except (OSError, ValueError) as exc:
        raise StackError(f"WebHDFS {url}: {exc}") from exc
    return sorted(st["pathSuffix"] for st in listing["FileStatuses"]["FileStatus"])


def wait_ready(s: StackSettings, timeout_s: float = 120.0) -> None:
    """Block until the NameNode reports a live DataNode and is out of safe mode."""
    deadline = time.monotonic() + timeout_s
    state: dict | None = None
    while time.monotonic() < deadline:
        for daemon in DAEMONS:
            if running_pid(s, daemon) is None:
                raise StackError(f"the HDFS {daemon} exited during start-up; last lines of "
                                 f"{log_file(s, daemon)}:\n" + tail(log_file(s, daemon)))
        state = namenode_state(s)
        if state and state.get("NumLiveDataNodes", 0) >= 1 and state.get("FSState") == \
                "Operational":
            return
        time.sleep(0.5)
    raise StackError(f"HDFS at {uri(s)} was not serving within {timeout_s:.0f}s (NameNode "
                     f"state: {state or 'no answer'}); logs in {hdfs_dir(s) / 'logs'}")


def stop_daemon(s: StackSettings, daemon: str) -> bool:
    """Stop (SIGTERM) one daemon; True when it ran."""
    return process.stop(pid_file(s, daemon), timeout_s=30)


def kill_daemon(s: StackSettings, daemon: str) -> bool:
    """SIGKILL one daemon (a lost machine); True when it ran."""
    return process.kill(pid_file(s, daemon))


def down(s: StackSettings) -> list[str]:
    """Stop the DataNode, then the NameNode; the daemons that ran."""
    return [d for d in reversed(DAEMONS) if stop_daemon(s, d)]


def status(s: StackSettings) -> list[tuple[str, str]]:
    """One (daemon, description) line each."""
    rows = []
    for daemon in DAEMONS:
        pid = running_pid(s, daemon)
        rows.append((daemon, f"running, pid {pid}, log {log_file(s, daemon)}" if pid
                     else "not running"))
    state = namenode_state(s)
    if state:
        rows.append(("fs", f"{uri(s)}: {state.get('FSState')}, "
                           f"{state.get('NumLiveDataNodes')} live DataNode(s)"))
    return rows


def shell(s: StackSettings, *args: str, user: str | None = None,
          timeout_s: float = 120.0) -> subprocess.CompletedProcess:
    """`hadoop fs ARGS` against this HDFS (as `user`, else this process's user)."""
    env = dict(os.environ)
    if user:
        env["HADOOP_USER_NAME"] = user
    _client(s)
    return subprocess.run(_java_cmd(s, artifacts.find_java(), SHELL_CLASS, *args),
                          capture_output=True, text=True, env=env, timeout=timeout_s)


def fs(s: StackSettings, *args: str, user: str | None = None) -> str:
    """`hadoop fs ARGS`; its output, StackError with its message if it fails."""
    done = shell(s, *args, user=user)
    if done.returncode != 0:
        # the shell's own message, without the JVM's warnings and stack frames
        said = [ln for ln in done.stderr.splitlines() if ln.strip() and not ln.startswith(
            ("SLF4J", "\tat ", "WARNING")) and "NativeCodeLoader" not in ln]
        raise StackError(f"hadoop fs {' '.join(args)} failed: " + "\n".join(said[-5:]))
    return done.stdout
