"""TLS material for the locked stack, made with the JDK's keytool: a CA, one server key pair
for every loopback service (127.0.0.1-9 and localhost), a client key pair, and a truststore.

Java services read the PKCS12 stores; Python clients (librdkafka, the Cassandra driver) read
the PEM files. Everything lives in <state>/tls and is made once.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from devstack import artifacts
from devstack.process import StackError
from devstack.settings import MAX_NODES

# The stores' password: they guard throw-away keys of a loopback dev stack, so a fixed one
# keeps every config readable; production keys come from the operator, not from here.
STORE_PASSWORD = "casscade-local"
_SAN = ",".join([*(f"ip:127.0.0.{n}" for n in range(1, MAX_NODES + 1)), "dns:localhost"])
_DAYS = "3650"


@dataclass(frozen=True)
class TlsFiles:
    """Where the material is: stores for the JVMs, PEM files for Python clients."""

    root: Path

    @property
    def ca_pem(self) -> Path:
        """The CA certificate every client trusts."""
        return self.root / "ca.pem"

    @property
    def truststore(self) -> Path:
        """PKCS12 truststore holding the CA (JVM clients and servers)."""
        return self.root / "truststore.p12"

    @property
    def server_keystore(self) -> Path:
        """PKCS12 keystore of the services (Kafka's listener, Cassandra's client port)."""
        return self.root / "server.p12"

    @property
    def client_cert_pem(self) -> Path:
        """A client certificate signed by the CA (for optional client authentication)."""
        return self.root / "client.pem"

    @property
    def client_key_pem(self) -> Path:
        """The client certificate's private key, PEM (PKCS8, unencrypted)."""
        return self.root / "client-key.pem"


def ensure(state_dir: Path) -> TlsFiles:
    """Make the CA, the server and client key pairs and the truststore unless they exist."""
    files = TlsFiles(state_dir / "tls")
    if files.client_key_pem.exists():
        return files
    files.root.mkdir(parents=True, exist_ok=True)
    keytool = str(artifacts.find_java().parent / "keytool")
    ca = files.root / "ca.p12"
    common = ["-storepass", STORE_PASSWORD, "-storetype", "PKCS12"]

    def kt(*args: str) -> bytes:
        done = subprocess.run([keytool, *args], capture_output=True, cwd=files.root)
        if done.returncode != 0:
            raise StackError(f"keytool {args[0]} failed: "
                             + (done.stdout + done.stderr).decode(errors="replace")[-1500:])
        return done.stdout

    kt("-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048", "-validity",
       _DAYS, "-dname", "CN=casscade local CA", "-ext", "bc:c", "-keystore", str(ca),
       *common)
    kt("-exportcert", "-rfc", "-alias", "ca", "-keystore", str(ca), "-file",
       str(files.ca_pem), *common)
    kt("-importcert", "-noprompt", "-alias", "ca", "-file", str(files.ca_pem),
       "-keystore", str(files.truststore), *common)
    for name, store, dname in (("server", files.server_keystore, "CN=localhost"),
                               ("client", files.root / "client.p12", "CN=casscade-client")):
        kt("-genkeypair", "-alias", name, "-keyalg", "RSA", "-keysize", "2048", "-validity",
           _DAYS, "-dname", dname, "-keystore", str(store), *common)
        csr = files.root / f"{name}.csr"
        kt("-certreq", "-alias", name, "-keystore", str(store), "-file", str(csr), *common)
        signed = files.root / f"{name}.crt"
        ext = ["-ext", f"SAN={_SAN}"] if name == "server" else []
        kt("-gencert", "-rfc", "-alias", "ca", "-keystore", str(ca), "-infile", str(csr),
           "-outfile", str(signed), "-validity", _DAYS, *ext, *common)
        kt("-importcert", "-noprompt", "-alias", "ca", "-file", str(files.ca_pem),
           "-keystore", str(store), *common)
        kt("-importcert", "-alias", name, "-file", str(signed), "-keystore", str(store),
           *common)
    files.client_cert_pem.write_bytes((files.root / "client.crt").read_bytes())
    _export_key(files.root / "client.p12", files.client_key_pem)
    return files


def _export_key(store: Path, out: Path) -> None:
    """The client's private key as PEM, with openssl (keytool cannot export a key)."""
    done = subprocess.run(["openssl", "pkcs12", "-in", str(store), "-nocerts", "-nodes",
                           "-passin", f"pass:{STORE_PASSWORD}", "-out", str(out)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise StackError(f"openssl could not export the client key of {store}: "
                         + done.stderr[-1000:])
    out.chmod(0o600)
