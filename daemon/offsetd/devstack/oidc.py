"""The OpenID Connect provider of the `--login oauth` stack: Ory Hydra, its public side on HTTPS.

Hydra runs from the cached build (`hydrabin`) with an in-memory store (`dsn: memory`: nothing
outlives the process, and a new stack registers its client again), JWT access tokens (the
brokers check them offline against Hydra's JWKS, KIP-768) and a short access-token lifetime, so
a test sees tokens refreshed within minutes.

The public endpoints (token, JWKS, discovery) are HTTPS with a certificate the stack's own CA
signed (`devstack.tls`; made at each start, `HydraTls`), as a real deployment's token endpoint
is: offsetd trusts it through `oauth.ca_file` alone, the brokers through their listener's JAAS
options (`devstack.oauth`). Hydra turns TLS on per interface with `serve.<iface>.tls.enabled`
(the cert and key paths alone do nothing); `--dev` would not switch it off, it only lets the
issuer be plain HTTP, which it no longer is, so Hydra runs without it. The admin endpoint
(registering the client, health) stays plain HTTP on 127.0.0.1: only the stack's own code calls
it, and no secret of offsetd's crosses it after the registration.

Hydra's request log (JSON, one line a request, no header or body: it redacts what could be a
secret unless told to leak it) is how the tests count the tokens it issued.
"""

from __future__ import annotations

import json
import secrets
import ssl
from dataclasses import dataclass
from pathlib import Path

import httpx

from offsetd.devstack.errors import DevStackError
from offsetd.devstack.ports import HOST

__all__ = ["HydraProvider", "HydraTls", "issued_tokens", "new_client_secret", "register_client"]

TOKEN_PATH = "/oauth2/token"  # noqa: S105 - a path, not a password
_KEYS_GENERATION_S = 240.0  # the first JWKS answer: Hydra generating its key sets (loaded machine)


@dataclass(frozen=True)
class HydraTls:
    """The public endpoints' certificate and key (PEM, signed by `ca_pem`), and that CA."""

    cert_pem: Path
    key_pem: Path  # unencrypted PKCS#8, mode 600
    ca_pem: Path  # what a client of the token endpoint trusts (offsetd's `oauth.ca_file`)


@dataclass(frozen=True)
class HydraProvider:
    """One Hydra process: its two ports (public, HTTPS: token and JWKS; admin, plain HTTP on
    loopback: clients, health)."""

    public_port: int
    admin_port: int
    token_ttl_s: int
    tls: HydraTls

    @property
    def issuer(self) -> str:
        return f"https://{HOST}:{self.public_port}"

    @property
    def token_url(self) -> str:
        return self.issuer + TOKEN_PATH

    @property
    def jwks_url(self) -> str:
        return self.issuer + "/.well-known/jwks.json"

    @property
    def admin_url(self) -> str:
        return f"http://{HOST}:{self.admin_port}"

    def write_config(self, config_dir: Path) -> Path:
        """Hydra's configuration file (mode 600: it holds the system secret signing cookies)."""
        path = config_dir / "hydra.json"
        config = {
            "dsn": "memory",
            "serve": {
                "public": {
                    "host": HOST,
                    "port": self.public_port,
                    "tls": {
                        "enabled": True,
                        "cert": {"path": str(self.tls.cert_pem)},
                        "key": {"path": str(self.tls.key_pem)},
                    },
                },
                "admin": {"host": HOST, "port": self.admin_port, "tls": {"enabled": False}},
            },
            "urls": {"self": {"issuer": self.issuer}},
            "secrets": {"system": [secrets.token_urlsafe(32)]},
            "strategies": {"access_token": "jwt"},
            "ttl": {"access_token": f"{self.token_ttl_s}s"},
            "log": {"level": "info", "format": "json", "leak_sensitive_values": False},
        }
        path.write_text(json.dumps(config, indent=2))
        path.chmod(0o600)
        return path

    def argv(self, hydra: Path, config: Path) -> list[str]:
        # no --dev: the issuer is HTTPS (see the module's docstring)
        return [str(hydra), "serve", "all", "--sqa-opt-out", "--config", str(config)]

    def public_verify(self) -> ssl.SSLContext:
        """What a client of the public endpoints trusts: the stack's CA, nothing else."""
        return ssl.create_default_context(cafile=str(self.tls.ca_pem))

    def is_ready(self) -> bool:
        """The admin side is ready and the JWKS answers over HTTPS, verified as offsetd would.

        The first JWKS request makes Hydra generate its RSA key sets, which takes a minute and
        more on a loaded machine; a client that gives up cancels that generation, and the next
        request starts it over. So the JWKS is asked once, with time to finish (the stack's
        deadline still bounds the wait: the probe is called again only after this returns)."""
        with httpx.Client(timeout=2.0) as http:
            if http.get(f"{self.admin_url}/health/ready").status_code != 200:
                return False
        timeout = httpx.Timeout(5.0, read=_KEYS_GENERATION_S)
        with httpx.Client(timeout=timeout, verify=self.public_verify()) as https:
            return https.get(self.jwks_url).status_code == 200


def register_client(
    provider: HydraProvider, name: str, secret: str, scope: str, audience: str
) -> str:
    """Register a client-credentials client that may ask for `scope` and `audience`; its id
    (Hydra makes it: a UUID)."""
    body = {
        "client_name": name,
        "client_secret": secret,
        "grant_types": ["client_credentials"],
        "response_types": ["token"],
        "scope": scope,
        "audience": [audience],
        "token_endpoint_auth_method": "client_secret_basic",
        "access_token_strategy": "jwt",
    }
    with httpx.Client(timeout=10.0) as http:
        response = http.post(f"{provider.admin_url}/admin/clients", json=body)
    if response.status_code != 201:
        raise DevStackError(
            f"registering the OAuth client {name} with Hydra failed: HTTP {response.status_code}"
        )
    return str(response.json()["client_id"])


def issued_tokens(log: Path) -> int:
    """How many tokens Hydra issued: its request log's successful token-endpoint requests."""
    count = 0
    for line in log.read_text(errors="replace").splitlines():
        if TOKEN_PATH not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        request, response = entry.get("http_request", {}), entry.get("http_response", {})
        if request.get("path") == TOKEN_PATH and response.get("status") == 200:
            count += 1
    return count


def new_client_secret() -> str:
    return secrets.token_urlsafe(24)
