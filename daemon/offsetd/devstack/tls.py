"""TLS material for the secure local stack, made at start with the JDK's keytool.

One certificate authority per run directory signs the brokers' and Connect's server
certificate (subject alternative names 127.0.0.1 and localhost). Java reads PKCS12 stores;
librdkafka and httpx read the CA as PEM. `server_certificate` also makes the wrong ones a test
needs: expired, for another host, or signed by a CA nobody trusts.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from offsetd.devstack.errors import DevStackError

__all__ = ["TlsMaterial", "keytool_of", "make_ca", "make_tls_material", "server_certificate"]


@dataclass(frozen=True)
class TlsMaterial:
    """Where the stack's stores are; one password for every store (it lives in the run dir)."""

    ca_pem: Path  # what clients trust
    ca_store: Path  # the CA's own key (signs the certificates)
    keystore: Path  # the servers' key and certificate chain (PKCS12)
    truststore: Path  # the CA as a Java truststore (PKCS12)
    password: str


def keytool_of(java: str) -> str:
    """The keytool next to `java` (a JDK or JRE of the same installation)."""
    found = shutil.which(java)
    if found is None:
        raise DevStackError(f"{java} was not found")
    keytool = Path(found).resolve().parent / "keytool"
    if not keytool.is_file():
        raise DevStackError(f"keytool was not found next to {Path(found).resolve()}")
    return str(keytool)


def _keytool(keytool: str, *args: str) -> None:
    done = subprocess.run(
        [keytool, *args], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise DevStackError(f"keytool {args[0]} failed: {detail[0]}")


def make_ca(keytool: str, folder: Path, name: str, password: str) -> tuple[Path, Path]:
    """A self-signed CA: (its PKCS12 store, its certificate as PEM)."""
    store, pem = folder / f"{name}.p12", folder / f"{name}.pem"
    _keytool(
        keytool, "-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048",
        "-dname", f"CN={name}", "-ext", "bc:c", "-validity", "3650",
        "-keystore", str(store), "-storetype", "PKCS12", "-storepass", password,
    )  # fmt: skip
    _keytool(
        keytool, "-exportcert", "-rfc", "-alias", "ca", "-keystore", str(store),
        "-storepass", password, "-file", str(pem),
    )  # fmt: skip
    return store, pem


def server_certificate(
    keytool: str,
    ca: tuple[Path, Path],
    keystore: Path,
    password: str,
    *,
    names: str = "ip:127.0.0.1,dns:localhost",
    dname: str = "CN=offsetd-dev-server",
    start: str | None = None,
    validity_days: int = 3650,
) -> Path:
    """A PKCS12 keystore with a server key and its chain, signed by `ca` (store, PEM).

    `names` are the subject alternative names; `dname` the subject (a client certificate's
    principal, `CN=<name>`, on the mTLS stack); `start` a keytool start date such as `-3d`.
    """
    ca_store, ca_pem = ca
    request, signed = keystore.with_suffix(".csr"), keystore.with_suffix(".crt")
    _keytool(
        keytool, "-genkeypair", "-alias", "server", "-keyalg", "RSA", "-keysize", "2048",
        "-dname", dname, "-validity", str(validity_days),
        "-keystore", str(keystore), "-storetype", "PKCS12", "-storepass", password,
    )  # fmt: skip
    _keytool(
        keytool, "-certreq", "-alias", "server", "-keystore", str(keystore),
        "-storepass", password, "-file", str(request),
    )  # fmt: skip
    dates = ["-startdate", start] if start is not None else []
    _keytool(
        keytool, "-gencert", "-alias", "ca", "-keystore", str(ca_store), "-storepass", password,
        "-infile", str(request), "-outfile", str(signed), "-rfc", *dates,
        "-validity", str(validity_days), "-ext", f"SAN={names}",
        "-ext", "ku:c=digitalSignature,keyEncipherment", "-ext", "eku=serverAuth,clientAuth",
    )  # fmt: skip
    _keytool(
        keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem),
        "-keystore", str(keystore), "-storepass", password,
    )  # fmt: skip
    _keytool(
        keytool, "-importcert", "-alias", "server", "-file", str(signed),
        "-keystore", str(keystore), "-storepass", password,
    )  # fmt: skip
    request.unlink()
    return keystore


def make_tls_material(java: str, folder: Path) -> TlsMaterial:
    """A CA, the servers' keystore and a truststore in `folder` (made once; reused after)."""
    folder.mkdir(parents=True, exist_ok=True)
    password_file = folder / "store-password"
    material = TlsMaterial(
        folder / "ca.pem", folder / "ca.p12", folder / "server.p12", folder / "truststore.p12",
        password_file.read_text().strip() if password_file.exists() else "",
    )  # fmt: skip
    if material.password and all(
        p.exists() for p in (material.ca_pem, material.keystore, material.truststore)
    ):
        return material
    password = secrets.token_urlsafe(18)
    password_file.write_text(password + "\n")
    password_file.chmod(0o600)
    keytool = keytool_of(java)
    for stale in folder.glob("*.p12"):
        stale.unlink()
    ca = make_ca(keytool, folder, "ca", password)
    server_certificate(keytool, ca, material.keystore, password)
    _keytool(
        keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", str(ca[1]),
        "-keystore", str(material.truststore), "-storetype", "PKCS12", "-storepass", password,
    )  # fmt: skip
    return TlsMaterial(ca[1], ca[0], material.keystore, material.truststore, password)
