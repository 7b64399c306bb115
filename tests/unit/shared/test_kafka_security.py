"""kafka.security written out for librdkafka and for Kafka's Java client (Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

from materializer.settings import MaterializerConfig
from shared.config import ConfigError, load, to_dict
from shared.kafka_security import KafkaSecurity, client_settings


def test_plaintext_is_the_default_and_adds_nothing_but_the_protocol() -> None:
    assert KafkaSecurity().librdkafka() == {"security.protocol": "PLAINTEXT"}
    assert client_settings("h:1", KafkaSecurity()) == {"bootstrap.servers": "h:1",
                                                       "security.protocol": "PLAINTEXT"}


def test_sasl_ssl_in_both_clients_names(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    pw = tmp_path / "pw"
    pw.write_text('se"cr\\et\nignored\n')
    sec = KafkaSecurity(protocol="SASL_SSL", sasl_username="publisher", sasl_password_file=pw,
                        ssl_ca_file=ca)
    assert sec.librdkafka() == {
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "publisher", "sasl.password": 'se"cr\\et',
        "ssl.ca.location": str(ca), "ssl.endpoint.identification.algorithm": "https"}
    java = sec.java()
    assert java["sasl.mechanism"] == "SCRAM-SHA-512"
    # the JAAS value is quoted: a quote or backslash in the password cannot end it early
    assert java["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="publisher" password="se\\"cr\\\\et";')
    assert (java["ssl.truststore.type"], java["ssl.truststore.location"]) == ("PEM", str(ca))


@pytest.mark.parametrize(("fields", "message"), [
    ({"protocol": "SASL_TLS"}, "kafka.security.protocol must be one of"),
    ({"protocol": "SASL_SSL", "sasl_username": "u"}, "needs sasl_username and a password"),
    ({"protocol": "SASL_SSL", "sasl_username": "u", "sasl_password": "p",
      "sasl_mechanism": "GSSAPI"}, "sasl_mechanism must be one of"),
    ({"protocol": "SSL", "ssl_ca_file": Path("/nonexistent/ca.pem")},
     "ssl_ca_file /nonexistent/ca.pem: no such file"),
    ({"protocol": "SASL_SSL", "sasl_username": "u", "sasl_password": "p",
      "sasl_password_file": Path("/x")}, "both set"),
])
def test_a_door_that_cannot_open_is_a_config_error(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        KafkaSecurity(**fields).librdkafka()


def test_the_password_comes_from_the_environment_and_is_never_printed() -> None:
    cfg = load(MaterializerConfig, None, ["kafka.security.protocol=SASL_SSL",
                                          "kafka.security.sasl_username=materializer"],
               env={"CASSCADE_KAFKA__SECURITY__SASL_PASSWORD": "hunter2"})
    assert cfg.kafka.client()["sasl.password"] == "hunter2"
    assert "hunter2" not in repr(to_dict(cfg))
    assert to_dict(cfg)["kafka"]["security"]["sasl_password"] == "***"
