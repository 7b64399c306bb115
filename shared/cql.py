"""One way to build a cassandra-driver Cluster for both stages and the tools."""

from __future__ import annotations

from typing import Any


def make_cluster(hosts: list[str], port: int, username: str | None = None,
                 password: str | None = None, request_timeout: float = 30,
                 pinned: bool = False, **options: Any):
    """A Cluster speaking protocol v5 with round-robin load balancing (no driver warnings
    about a missing policy), password authentication when a username is given; `pinned`
    sends every request to `hosts` only (a given node as coordinator)."""
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import RoundRobinPolicy, WhiteListRoundRobinPolicy

    policy = WhiteListRoundRobinPolicy(hosts) if pinned else RoundRobinPolicy()
    profile = ExecutionProfile(load_balancing_policy=policy,
                               request_timeout=request_timeout)
    auth = PlainTextAuthProvider(username, password) if username else None
    return Cluster(hosts, port=port, protocol_version=5, auth_provider=auth,
                   execution_profiles={EXEC_PROFILE_DEFAULT: profile}, **options)
