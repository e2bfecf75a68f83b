"""The `--login oauth` variant of the secure stack: offsetd logs in with OAUTHBEARER.

Beside the SCRAM listener (`devstack.security`: the brokers, Connect, MirrorMaker 2 and the
stack's admin keep it) each broker gets a second SASL_SSL listener, `OAUTH`, that accepts only
OAUTHBEARER and checks tokens with Kafka's own KIP-768 validator: the signature against the
provider's JWKS, the expiry, the issuer. The principal is the token's `sub`: for a
client-credentials token Hydra sets it to the client id, so offsetd's OAuth client is the
principal `User:<client id>` and gets exactly offsetd's least-privilege ACLs
(`security.OFFSETD_ACLS`, docs/security.md).

The listener bounds each session by `connections.max.reauth.ms` and the token's expiry
(KIP-368): a client must log in again with a fresh token before its token expires, or the
broker drops the connection. With the provider's short token lifetime that proves a running
daemon refreshes its tokens.

No expected audience: librdkafka's OIDC token request cannot ask for one and Hydra grants only
requested audiences (docs/security.md says what a provider must issue).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from offsetd.devstack.oidc import HydraProvider
from offsetd.devstack.security import OFFSETD_ACLS, Acl

__all__ = ["LISTENER", "SCOPE", "OAuthLogin"]

LISTENER = "OAUTH"
SCOPE = "kafka"
REAUTH_MS = 20_000
_VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@dataclass(frozen=True)
class OAuthLogin:
    """The provider, offsetd's registered client, and where its secret is kept."""

    provider: HydraProvider
    client_id: str
    secret_file: Path
    hydra_log: Path

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
            prefix + "oauthbearer.sasl.jaas.config": f"{_LOGIN_MODULE} required;",
            prefix + "oauthbearer.sasl.server.callback.handler.class": _VALIDATOR,
            prefix + "oauthbearer.connections.max.reauth.ms": str(REAUTH_MS),
            "sasl.oauthbearer.jwks.endpoint.url": self.provider.jwks_url,
            "sasl.oauthbearer.expected.issuer": self.provider.issuer,
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
            "scope": SCOPE,
            "token_ttl_s": self.provider.token_ttl_s,
            "reauth_ms": REAUTH_MS,
            "hydra_log": str(self.hydra_log),
        }
