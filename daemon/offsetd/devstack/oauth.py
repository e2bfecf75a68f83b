"""The `--login oauth` variant of the secure stack: offsetd logs in with OAUTHBEARER.

Beside the SCRAM listener (`devstack.security`: the brokers, Connect, MirrorMaker 2 and the
stack's admin keep it) each broker gets a second SASL_SSL listener, `OAUTH`, that accepts only
OAUTHBEARER and checks tokens with Kafka's own KIP-768 validator: the signature against the
provider's JWKS, the expiry, the issuer, the audience. The principal is the token's `sub`: for a
client-credentials token Hydra sets it to the client id, so offsetd's OAuth client is the
principal `User:<client id>` and gets exactly offsetd's least-privilege ACLs
(`security.OFFSETD_ACLS`, docs/security.md).

The broker ends each session when its token expires (KIP-368: Kafka takes an OAUTHBEARER
token's lifetime as the session's, with or without `connections.max.reauth.ms`, which could only
make it shorter): a client must log in again with a fresh token before then, or the broker drops
the connection. With the provider's 30 s tokens that proves a running daemon renews its tokens
and sessions (librdkafka re-authenticates; aiokafka's connections are renewed by
`offsetd.oauthtoken`). `connections.max.reauth.ms` is left unset: below 80 % of the token
lifetime it would end aiokafka's sessions before offsetd renews them.

The brokers expect the audience `kafka`: Hydra grants an audience only when the token request
asks for it (offsetd's `oauth.audience`) and the client may have it (its registration).

Hydra's public endpoints are HTTPS with a certificate of the stack's CA (`devstack.oidc`). The
brokers fetch its JWKS trusting that CA and nothing wider: Kafka's KIP-768 validator builds the
HTTPS client of its JWKS fetch from the `ssl.*` options of the listener's own JAAS entry
(`VerificationKeyResolverFactory` -> `JaasOptionsUtils.createSSLSocketFactory`, Kafka 4.2), so
the truststore is named there, on the OAUTH listener only, not JVM-wide
(`javax.net.ssl.trustStore` would change every TLS client of the broker). offsetd trusts the
token endpoint through `oauth.ca_file` (`dev env --write-config` writes the stack's CA).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offsetd.devstack.hydrabin import ensure_hydra
from offsetd.devstack.mtls import client_certificate
from offsetd.devstack.oidc import HydraProvider, HydraTls, new_client_secret, register_client
from offsetd.devstack.procs import ProcessRecord
from offsetd.devstack.security import OFFSETD_ACLS, Acl
from offsetd.devstack.tls import TlsMaterial

__all__ = [
    "AUDIENCE",
    "LISTENER",
    "SCOPE",
    "TOKEN_TTL_S",
    "OAuthLogin",
    "offsetd_sasl",
    "start_provider",
]

LISTENER = "OAUTH"
SCOPE = "kafka"
AUDIENCE = "kafka"
TOKEN_TTL_S = 30  # short: a running daemon must refresh its token every half minute
_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@dataclass(frozen=True)
class OAuthLogin:
    """The provider, offsetd's registered client, and where its secret is kept."""

    provider: HydraProvider
    client_id: str
    secret_file: Path
    hydra_log: Path
    listener_ports: tuple[int, ...]  # the OAUTH listener's, one per cluster
    truststore: Path  # the stack's CA as a PKCS12 truststore: what the brokers' JWKS fetch trusts
    truststore_password: str

    def jaas_config(self) -> str:
        """The OAUTH listener's JAAS entry: its `ssl.*` options are the JWKS fetch's TLS
        settings (see the module's docstring).

        The same entry is the broker's own login on this listener, which Kafka performs at
        start-up with its default (unsecured) login handler: with no option it makes no token,
        with any it builds an unsigned one and fails the broker's start without a `sub`
        ("No principal name in JWT claim: sub"). That token is never presented: the brokers
        talk to each other over the SCRAM listener, and this listener's validator would refuse
        an unsigned token anyway."""
        options = {
            "ssl.truststore.location": str(self.truststore),
            "ssl.truststore.password": self.truststore_password,
            "ssl.truststore.type": "PKCS12",
            "unsecuredLoginStringClaim_sub": "broker",
        }
        # a JAAS option value is a double-quoted string, JSON-escaped
        rendered = " ".join(f"{key}={json.dumps(value)}" for key, value in options.items())
        return f"{_LOGIN_MODULE} required {rendered};"

    def broker_properties(self, base: dict[str, Any], host: str, port: int) -> dict[str, str]:
        """The OAUTH listener added to a secure broker's settings (`base`)."""
        prefix = f"listener.name.{LISTENER.lower()}."
        return {
            "listeners": f"{base['listeners']},{LISTENER}://{host}:{port}",
            "advertised.listeners": f"{base['advertised.listeners']},{LISTENER}://{host}:{port}",
            "listener.security.protocol.map": (
                f"{base['listener.security.protocol.map']},{LISTENER}:SASL_SSL"
            ),
            prefix + "sasl.enabled.mechanisms": "OAUTHBEARER",
            prefix + "oauthbearer.sasl.jaas.config": self.jaas_config(),
            prefix + "oauthbearer.sasl.server.callback.handler.class": _VALIDATOR,
            "sasl.oauthbearer.jwks.endpoint.url": self.provider.jwks_url,
            "sasl.oauthbearer.expected.issuer": self.provider.issuer,
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.scope.claim.name": "scp",  # Hydra's claim for the granted scopes
        }

    def jvm_options(self) -> tuple[str, ...]:
        """Kafka 4 fetches only from URLs it is told to trust (here: the provider's JWKS)."""
        allowed = f"{self.provider.jwks_url},{self.provider.token_url}"
        return (f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={allowed}",)

    def acls(self) -> list[Acl]:
        """offsetd's least-privilege ACLs, for the OAuth client's principal."""
        return [dataclasses.replace(acl, principal=self.client_id) for acl in OFFSETD_ACLS]

    def describe(self) -> dict[str, Any]:
        """What `StackInfo.security["oauth"]` holds (the secret as a file)."""
        return {
            "token_endpoint_url": self.provider.token_url,
            "jwks_url": self.provider.jwks_url,
            "issuer": self.provider.issuer,
            "admin_url": self.provider.admin_url,
            "client_id": self.client_id,
            "client_secret_file": str(self.secret_file),
            "ca_file": str(self.provider.tls.ca_pem),
            "scope": SCOPE,
            "audience": AUDIENCE,
            "token_ttl_s": self.provider.token_ttl_s,
            "hydra_log": str(self.hydra_log),
        }


def hydra_tls(tls: TlsMaterial, folder: Path) -> HydraTls:
    """Hydra's certificate (127.0.0.1 and localhost), signed by the stack's CA: PEM files, made
    with openssl in milliseconds (a fresh one at each start: the config folder is new)."""
    folder.mkdir(parents=True, exist_ok=True)
    cert = client_certificate((tls.ca_store, tls.ca_pem), folder, "hydra", tls.password)
    cert.keystore.unlink()  # Hydra reads PEM; the PKCS12 copy is not needed
    return HydraTls(cert.cert_pem, cert.key_pem, tls.ca_pem)


def start_provider(
    run_dir: Path,
    ports: list[int],
    tls: TlsMaterial,
    spawn: Callable[[str, list[str]], ProcessRecord],
    wait: Callable[[str, ProcessRecord, Callable[[], bool]], None],
    log: Callable[[str], None],
) -> OAuthLogin:
    """Start Hydra (built the first time) on HTTPS with a certificate of the stack's CA (`tls`),
    wait for it, register offsetd's client; the client secret goes to a file in the run
    directory's security folder (mode 600)."""
    hydra = ensure_hydra(log=log)
    provider = HydraProvider(
        ports[0], ports[1], TOKEN_TTL_S, hydra_tls(tls, run_dir / "config" / "hydra-tls")
    )
    config = provider.write_config(run_dir / "config")
    log(f"starting the OIDC provider (Ory Hydra) on {provider.issuer}")
    record = spawn("hydra", provider.argv(hydra, config))
    wait("the OIDC provider (Hydra)", record, provider.is_ready)
    secret = new_client_secret()
    client_id = register_client(provider, "offsetd", secret, SCOPE, AUDIENCE)
    secret_file = run_dir / "security" / "offsetd-oauth-client-secret"
    secret_file.parent.mkdir(parents=True, exist_ok=True)
    secret_file.write_text(secret + "\n")
    secret_file.chmod(0o600)
    return OAuthLogin(
        provider,
        client_id,
        secret_file,
        Path(record.log),
        tuple(ports[2:]),
        tls.truststore,
        tls.password,
    )


def offsetd_sasl(oauth: dict[str, Any]) -> dict[str, Any]:
    """offsetd's `sasl` section for the stack (`StackInfo.security["oauth"]`): the token
    endpoint trusted through `ca_file`, the stack's CA, alone."""
    return {
        "mechanism": "OAUTHBEARER",
        "oauth": {
            "token_endpoint_url": oauth["token_endpoint_url"],
            "client_id": oauth["client_id"],
            "client_secret": {"file": oauth["client_secret_file"]},
            "scope": oauth["scope"],
            "audience": oauth["audience"],
            "ca_file": oauth["ca_file"],
        },
    }
