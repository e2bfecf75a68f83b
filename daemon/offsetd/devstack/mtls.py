"""The mutual-TLS variant of the secure stack (`offsetd dev up --secure --login mtls`).

Every principal logs in with a client certificate the stack's own CA (`devstack.tls`) signed,
subject `CN=<name>`; nobody has a password:

- Each KRaft node serves clients and its controller on SSL listeners with
  `ssl.client.auth=required`. The principal is Kafka's default mapping of the certificate's
  subject, the whole distinguished name: `User:CN=offsetd`. That is what Strimzi's User
  Operator grants its `tls` KafkaUsers their ACLs for (it leaves `ssl.principal.mapping.rules`
  at DEFAULT), so the ACLs here read as they would on Strimzi.
- The same StandardAuthorizer and ACLs as the SCRAM stack (`devstack.security`), on the
  certificates' principals: super users `CN=broker` and `CN=admin`; `CN=connect` and `CN=mm2`
  broad; `CN=offsetd` exactly the least-privilege table of docs/security.md.
- Connect's REST API listens on HTTPS and requires a client certificate of the stack's CA
  (`ssl.client.auth=required`); there is no basic-auth extension. The worker presents its own
  certificate (`CN=connect`) both as the REST server and to the brokers.

Keys are random per run folder and kept there (mode 600), made with openssl (the stack's CA
is keytool's, `devstack.tls`): Java principals (broker, Connect, MM2) read PKCS12 stores;
offsetd and the admin read a PEM certificate and an unencrypted PKCS#8 PEM key (librdkafka,
httpx and Kafka's Java `ssl.keystore.type=PEM` all read it).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offsetd.devstack.errors import DevStackError
from offsetd.devstack.security import OFFSETD_ACLS, Acl, StackSecurity, workload_acls
from offsetd.devstack.tls import TlsMaterial, make_tls_material

__all__ = [
    "LOGIN",
    "PRINCIPALS",
    "ClientCert",
    "MtlsSecurity",
    "client_certificate",
    "load_or_make",
    "offsetd_acls",
    "offsetd_config_sections",
    "principal",
]

LOGIN = "mtls"
PRINCIPALS = ("admin", "broker", "connect", "mm2", "offsetd")
_NAMES = "IP:127.0.0.1,DNS:localhost"  # every certificate may serve too (the broker's, Connect's)
_PASSWORD_ENV = "OFFSETD_DEV_STORE_PASSWORD"  # noqa: S105 - a variable name, not a password


def principal(name: str) -> str:
    """The Kafka principal name of a stack certificate (`User:` is the ACL's prefix)."""
    return f"CN={name}"


def offsetd_acls(name: str = "offsetd") -> list[Acl]:
    """offsetd's least-privilege ACLs (`security.OFFSETD_ACLS`) for certificate `CN=<name>`."""
    return [dataclasses.replace(acl, principal=principal(name)) for acl in OFFSETD_ACLS]


@dataclass(frozen=True)
class ClientCert:
    """One principal's certificate: a PKCS12 store (Java) and the same as PEM files."""

    name: str
    keystore: Path  # PKCS12, the stack's store password
    cert_pem: Path  # the certificate (signed by the CA)
    key_pem: Path  # its key, unencrypted PKCS#8 (mode 600)


def _openssl() -> str:
    found = shutil.which("openssl")
    if found is None:
        raise DevStackError(
            "openssl was not found: the mTLS stack makes its client certificates with it "
            "(Debian: apt-get install openssl)"
        )
    return found


def _run(args: list[str], what: str, password: str, **kwargs: Any) -> bytes:
    """One openssl command; the store password reaches it by environment, never argv."""
    done = subprocess.run(
        [_openssl(), *args],
        capture_output=True, timeout=60, check=False,
        env={**os.environ, _PASSWORD_ENV: password}, **kwargs,
    )  # fmt: skip
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip().splitlines()[:1] or ["no output"]
        raise DevStackError(f"openssl could not {what}: {detail[0]}")
    out: bytes = done.stdout
    return out


def _private(path: Path) -> Path:
    """`path` made empty with mode 600 before anything secret is written to it."""
    path.unlink(missing_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    return path


_REQUEST = """\
[req]
distinguished_name = dn
prompt = no
x509_extensions = ext
[dn]
CN = {name}
[ext]
basicConstraints = critical,CA:false
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth,clientAuth
subjectAltName = {names}
"""


def client_certificate(ca: tuple[Path, Path], folder: Path, name: str, password: str) -> ClientCert:
    """A certificate `CN=<name>` signed by `ca` (its PKCS12 store, the store's password, and
    its PEM): the key as unencrypted PKCS#8 PEM (what Kafka's PEM key store requires; librdkafka
    and httpx read it too), the certificate as PEM, and both in a PKCS12 store for Java. One
    openssl command each, milliseconds (keytool takes a JVM start per step). Tests make wrong
    ones with it too (another CA)."""
    ca_store, ca_pem = ca
    cert = ClientCert(
        name, folder / f"{name}.p12", folder / f"{name}.crt", folder / f"{name}-key.pem"
    )
    env_pw = f"env:{_PASSWORD_ENV}"
    ca_key = _private(folder / f".{name}-signing-key.pem")  # the CA's key, for this signature
    request = folder / f".{name}-request.cnf"
    try:
        exported = _run(
            ["pkcs12", "-in", str(ca_store), "-nocerts", "-nodes", "-passin", env_pw],
            f"read the CA store {ca_store.name}", password,
        )  # fmt: skip
        _run(["pkey", "-out", str(ca_key)], "write the CA key", password, input=exported)
        request.write_text(_REQUEST.format(name=name, names=_NAMES))
        _private(cert.key_pem)  # openssl truncates it, keeping the mode
        _run(
            ["req", "-x509", "-config", str(request), "-newkey", "rsa:2048", "-nodes",
             "-keyout", str(cert.key_pem), "-CA", str(ca_pem), "-CAkey", str(ca_key),
             "-days", "3650", "-out", str(cert.cert_pem)],
            f"sign the certificate of {name}", password,
        )  # fmt: skip
        _private(cert.keystore)
        _run(
            ["pkcs12", "-export", "-in", str(cert.cert_pem), "-inkey", str(cert.key_pem),
             "-certfile", str(ca_pem), "-name", name, "-out", str(cert.keystore),
             "-passout", env_pw],
            f"write the key store of {name}", password,
        )  # fmt: skip
    finally:
        ca_key.unlink(missing_ok=True)
        request.unlink(missing_ok=True)
    return cert


@dataclass(frozen=True)
class MtlsSecurity(StackSecurity):
    """`StackSecurity` with certificates instead of passwords (see the module docstring)."""

    certs: dict[str, ClientCert]

    # -- Kafka: brokers --------------------------------------------------------------------------

    def scram_format_args(self) -> list[str]:
        return []  # no SCRAM credentials: nobody logs in with a password

    def broker_properties(
        self, host: str, broker_port: int, controller_port: int
    ) -> dict[str, str]:
        return {
            "listeners": f"SSL://{host}:{broker_port},CONTROLLER://{host}:{controller_port}",
            "advertised.listeners": f"SSL://{host}:{broker_port}",
            "listener.security.protocol.map": "CONTROLLER:SSL,SSL:SSL",
            "inter.broker.listener.name": "SSL",
            "ssl.client.auth": "required",
            **self._java_store(self.certs["broker"]),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": f"User:{principal('broker')};User:{principal('admin')}",
        }

    def stack_acls(self) -> list[Acl]:
        return [
            *workload_acls(principal("connect")),
            *workload_acls(principal("mm2")),
            *offsetd_acls(),
        ]

    # -- Kafka: clients --------------------------------------------------------------------------

    def client_config(self, user: str) -> dict[str, str]:
        cert = self.certs[user]
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.tls.ca_pem),
            "ssl.certificate.location": str(cert.cert_pem),
            "ssl.key.location": str(cert.key_pem),
        }

    def java_client_properties(self, user: str, prefix: str = "") -> dict[str, str]:
        props = {"security.protocol": "SSL", **self._java_store(self.certs[user])}
        return {prefix + key: value for key, value in props.items()}

    def _java_store(self, cert: ClientCert) -> dict[str, str]:
        return {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(cert.keystore),
            "ssl.keystore.password": self.tls.password,
            "ssl.key.password": self.tls.password,
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(self.tls.truststore),
            "ssl.truststore.password": self.tls.password,
        }

    # -- Connect ---------------------------------------------------------------------------------

    def connect_worker_properties(self, host: str, rest_port: int) -> dict[str, str]:
        """HTTPS REST requiring a client certificate; the worker's clients as `CN=connect`."""
        # Unprefixed, as on the SCRAM stack (`listeners.https.*` is all or nothing): the REST
        # server and the worker's Kafka clients share the `CN=connect` store.
        props = {
            "listeners": f"https://{host}:{rest_port}",
            "rest.advertised.listener": "https",
            "ssl.client.auth": "required",
            **self.java_client_properties("connect"),
        }
        for prefix in ("producer.", "consumer.", "admin."):
            props.update(self.java_client_properties("connect", prefix))
        return props

    def connect_jvm_options(self) -> tuple[str, ...]:
        return ()  # no REST users file: the certificate is the login

    def rest_client_args(self, user: str = "admin") -> dict[str, Any]:
        cert = self.certs[user]
        return {"ca_file": str(self.tls.ca_pem), "cert": (str(cert.cert_pem), str(cert.key_pem))}

    def describe(self) -> dict[str, Any]:
        """What `StackInfo.security` holds: offsetd's certificate and key as files, the admin's
        for the stack and its tests."""
        offsetd, admin = self.certs["offsetd"], self.certs["admin"]
        return {
            "login": LOGIN,
            "ca_pem": str(self.tls.ca_pem),
            "offsetd_cert_file": str(offsetd.cert_pem),
            "offsetd_key_file": str(offsetd.key_pem),
            "admin_client": self.client_config("admin"),
            "rest_admin_cert": [str(admin.cert_pem), str(admin.key_pem)],
            "principals": {name: principal(name) for name in self.certs},
            "folder": str(self.folder),
        }

    def as_json(self) -> dict[str, Any]:
        return {
            **super().as_json(),
            "certs": {n: {k: str(v) for k, v in vars(c).items()} for n, c in self.certs.items()},
        }


def offsetd_config_sections(security: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """offsetd.yaml's Kafka and Connect security sections for an mTLS stack (`StackInfo.
    security`): its certificate and key as files, no password anywhere."""
    tls = {
        "ca_file": security["ca_pem"],
        "cert_file": security["offsetd_cert_file"],
        "key_file": security["offsetd_key_file"],
    }
    return {"security_protocol": "SSL", "tls": dict(tls)}, {"tls": dict(tls)}


def load_or_make(java: str, folder: Path) -> MtlsSecurity:
    """The run directory's CA and certificates, made once (a certificate missing is remade)."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    tls = make_tls_material(java, folder / "tls")
    certs_dir = folder / "certs"
    certs_dir.mkdir(exist_ok=True)
    certs_dir.chmod(0o700)
    certs = _certificates(tls, certs_dir, PRINCIPALS)
    return MtlsSecurity(tls, {}, {}, folder, certs)


def _certificates(tls: TlsMaterial, folder: Path, names: Iterable[str]) -> dict[str, ClientCert]:
    made = {
        name: ClientCert(
            name, folder / f"{name}.p12", folder / f"{name}.crt", folder / f"{name}-key.pem"
        )
        for name in names
    }
    stamp = folder / "signed-by-ca.pem"  # the CA they were made with: a new CA remakes them
    current = tls.ca_pem.read_text()
    fresh = stamp.exists() and stamp.read_text() == current
    missing = [
        n
        for n, c in made.items()
        if not (fresh and c.keystore.exists() and c.cert_pem.exists() and c.key_pem.exists())
    ]
    if missing:
        ca = (tls.ca_store, tls.ca_pem)
        made.update({n: client_certificate(ca, folder, n, tls.password) for n in missing})
        stamp.write_text(current)
    return made
