"""How casscade's Kafka clients authenticate and encrypt: one `kafka.security` section for
every client of a stage, written out for librdkafka (confluent-kafka: the agent, the
materializer's Python side) and for Kafka's Java client (Spark's Kafka source and sink).

Secrets come from the environment (`CASSCADE_KAFKA__SECURITY__SASL_PASSWORD`) or a file
(`sasl_password_file`), never from a command line; `--print-config` shows them as ***.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.config import ConfigError, read_secret

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@dataclass
class KafkaSecurity:
    """The door to the brokers: protocol, SASL user and password, the CA to trust."""

    protocol: str = "PLAINTEXT"  # PROTOCOLS
    sasl_mechanism: str = "SCRAM-SHA-512"  # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    sasl_username: str | None = None
    sasl_password: str | None = None  # better: the environment, or sasl_password_file
    sasl_password_file: Path | None = None  # its first line is the password (read at start)
    ssl_ca_file: Path | None = None  # PEM CA bundle; unset: the system's trust store
    ssl_check_hostname: bool = True  # the broker's certificate must name the host dialled

    def password(self) -> str | None:
        """The SASL password: `sasl_password`, else the first line of `sasl_password_file`."""
        return read_secret(self.sasl_password, self.sasl_password_file,
                           "kafka.security.sasl_password")

    @property
    def sasl(self) -> bool:
        """Whether the protocol authenticates with SASL."""
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        """Whether the protocol encrypts with TLS."""
        return self.protocol in ("SSL", "SASL_SSL")

    def check(self) -> None:
        """ConfigError unless the settings make a usable door."""
        if self.protocol not in PROTOCOLS:
            raise ConfigError(f"kafka.security.protocol must be one of {', '.join(PROTOCOLS)}, "
                              f"not {self.protocol!r}")
        if self.sasl:
            if self.sasl_mechanism not in _LOGIN_MODULES:
                raise ConfigError(f"kafka.security.sasl_mechanism must be one of "
                                  f"{', '.join(_LOGIN_MODULES)}, not {self.sasl_mechanism!r}")
            if not self.sasl_username or self.password() is None:
                raise ConfigError(f"kafka.security.protocol {self.protocol} needs "
                                  "sasl_username and a password (sasl_password_file, or "
                                  "CASSCADE_KAFKA__SECURITY__SASL_PASSWORD)")
        if self.ssl_ca_file is not None and not Path(self.ssl_ca_file).is_file():
            raise ConfigError(f"kafka.security.ssl_ca_file {self.ssl_ca_file}: no such file")

    def librdkafka(self) -> dict[str, str]:
        """The settings in librdkafka's names (confluent-kafka clients)."""
        self.check()
        out = {"security.protocol": self.protocol}
        if self.sasl:
            out |= {"sasl.mechanisms": self.sasl_mechanism,
                    "sasl.username": str(self.sasl_username),
                    "sasl.password": str(self.password())}
        if self.tls:
            if self.ssl_ca_file is not None:
                out["ssl.ca.location"] = str(self.ssl_ca_file)
            out["ssl.endpoint.identification.algorithm"] = (
                "https" if self.ssl_check_hostname else "none")
        return out

    def java(self) -> dict[str, str]:
        """The settings in Kafka's Java client names (Spark's source and sink take them
        with a `kafka.` prefix)."""
        self.check()
        out = {"security.protocol": self.protocol}
        if self.sasl:
            user, pw = _jaas_quote(str(self.sasl_username)), _jaas_quote(str(self.password()))
            out |= {"sasl.mechanism": self.sasl_mechanism,
                    "sasl.jaas.config": f'{_LOGIN_MODULES[self.sasl_mechanism]} required '
                                        f'username="{user}" password="{pw}";'}
        if self.tls:
            if self.ssl_ca_file is not None:
                out |= {"ssl.truststore.type": "PEM",
                        "ssl.truststore.location": str(self.ssl_ca_file)}
            out["ssl.endpoint.identification.algorithm"] = (
                "https" if self.ssl_check_hostname else "")
        return out


def _jaas_quote(value: str) -> str:
    # JAAS option values are double-quoted strings: escape what would end them
    return value.replace("\\", "\\\\").replace('"', '\\"')


def client_settings(bootstrap_servers: str, security: KafkaSecurity) -> dict[str, str]:
    """librdkafka settings of a stage's clients: where the brokers are and the door."""
    return {"bootstrap.servers": bootstrap_servers} | security.librdkafka()


def client_conf(bootstrap: str | Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings from a bootstrap address or from a whole client config."""
    if isinstance(bootstrap, str):
        return {"bootstrap.servers": bootstrap}
    return dict(bootstrap)


_REFUSALS = {
    "_AUTHENTICATION": "Kafka refused the credentials (check kafka.security.sasl_username and "
                       "its password)",
    "_SSL": "the TLS handshake with Kafka failed (is kafka.security.ssl_ca_file the CA that "
            "signed the broker's certificate, and does it name the host dialled?)",
}
_LAST_REFUSAL: dict[str, float] = {}
_REFUSAL_EVERY_S = 30.0
# librdkafka's own log lines (FAIL and the like), through Python logging: on a refusal it
# writes one per connection attempt, several a second, which the error callback already
# says once per 30 s
_ECHOES = ("SASL authentication error", "SSL handshake failed", "certificate verify failed")


class _NoRefusalEcho(logging.Filter):
    """Drops librdkafka's lines about a refusal; keeps every other line."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(echo in message for echo in _ECHOES)


LIBRDKAFKA_LOG = logging.getLogger("librdkafka")
LIBRDKAFKA_LOG.addFilter(_NoRefusalEcho())


def refusal(error: Any) -> str | None:
    """What a librdkafka error means when a broker refuses us (credentials, TLS), with the
    broker's own words; None for any other error."""
    name = getattr(error, "name", lambda: "")()
    advice = _REFUSALS.get(name)
    return f"{advice}: {error.str()}" if advice else None


def with_refusal_log(conf: Mapping[str, Any], log: logging.Logger) -> dict[str, Any]:
    """`conf` plus an error callback that logs a refusal (bad credentials, untrusted
    certificate) as one clear error line, at most every 30 s per reason; other errors stay
    librdkafka's own (it retries them), its log lines go to the `librdkafka` logger
    (served by the client's poll) without its echoes of a refusal."""
    def on_error(error: Any) -> None:
        text = refusal(error)
        if text is None:
            return
        reason = f"{error.name()} {conf.get('bootstrap.servers')}"  # the words vary by try
        now = time.monotonic()
        if now - _LAST_REFUSAL.get(reason, -_REFUSAL_EVERY_S) >= _REFUSAL_EVERY_S:
            _LAST_REFUSAL[reason] = now
            log.error(text, extra={"bootstrap_servers": conf.get("bootstrap.servers"),
                                   "user": conf.get("sasl.username")})

    return dict(conf) | {"error_cb": on_error, "logger": LIBRDKAFKA_LOG}
