"""A broker's "not authorized" as one line an operator can act on: which ACL is missing, where.

A broker that refuses for want of an ACL answers with a bare code (TOPIC_AUTHORIZATION_FAILED,
GROUP_AUTHORIZATION_FAILED, ...): the request's own resource names are not in it, and
librdkafka words it "Broker: Topic authorization failed". The call site knows what it asked
for, so it names the operation and the resources it touched, and `denied` turns the code into
`KafkaAccessDenied` (exit 58): the principal, the operation, the resource and the bootstrap
servers — the ACL to grant, as the least-privilege table in docs/security.md lists it. Never a
secret: only `sasl.username` (or the OAuth client id), `bootstrap.servers` and the client
certificate (public: its subject is the principal of a TLS login) are read from the client
settings.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException

from offsetd.errors import KafkaAccessDenied

__all__ = ["DENIED", "denied", "is_denied", "principal", "raise_if_denied"]

DENIED = "not authorized: "  # how every KafkaAccessDenied message begins

_RESOURCE_OF_CODE = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "group",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "cluster",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "transactional_id",
}
# librdkafka's wording of the codes, for errors that reach us as text (a delivery report's or
# a fetch error's string, a CreateTopics result that says only "Authorization failed.").
_RESOURCE_OF_TEXT = {
    "topic authorization failed": "topic",
    "group authorization failed": "group",
    "cluster authorization failed": "cluster",
    "transactional id authorization failed": "transactional_id",
    "authorization failed": "",
}


def _code(error: object) -> int | None:
    if isinstance(error, KafkaException) and error.args:
        error = error.args[0]
    if isinstance(error, KafkaError):
        return int(error.code())
    return None


def _denied_resource(error: object) -> str | None:
    """The kind of resource a denial is about ("" when the broker did not say), else None."""
    code = _code(error)
    if code is not None and code in _RESOURCE_OF_CODE:
        return _RESOURCE_OF_CODE[code]
    text = str(error.args[0] if isinstance(error, KafkaException) and error.args else error)
    lowered = text.lower()
    for words, resource in _RESOURCE_OF_TEXT.items():
        if words in lowered:
            return resource
    return None


def is_denied(error: object) -> bool:
    """The broker refused for want of an ACL (any resource kind)."""
    return _denied_resource(error) is not None


def principal(conf: Mapping[str, str]) -> str:
    """The principal the broker sees, as its ACLs name it (no secret is read)."""
    user = conf.get("sasl.username")
    if user:
        return f"User:{user}"
    client = conf.get("sasl.oauthbearer.client.id")
    if client:  # the broker names the token's `sub`: for client credentials, the client id
        return f"User:{client} (OAuth client {client}, if its tokens' sub is its id)"
    if str(conf.get("security.protocol", "")).upper() in ("SSL",):
        subject = _subject(conf.get("ssl.certificate.location"))
        return f"User:{subject}" if subject else "the client certificate's principal"
    return "User:ANONYMOUS"


# X.509 attribute names as Java's X500Principal (RFC 2253) writes them: Kafka's default
# `ssl.principal.mapping.rules` makes that string the principal (Strimzi's `User:CN=<name>`).
_RDN = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
}


def _subject(cert_file: str | None) -> str | None:
    """The certificate's subject as Kafka's default mapping names it, most specific first
    (`CN=offsetd,O=acme`); None when unreadable or not plainly expressible (a value that
    would need escaping, an attribute Java writes as an OID)."""
    if not cert_file:
        return None
    try:
        decoded = ssl._ssl._test_decode_cert(cert_file)  # type: ignore[attr-defined]
    except (OSError, ssl.SSLError, ValueError):
        return None
    parts = []
    for rdn in reversed(decoded.get("subject", ())):
        if len(rdn) != 1 or rdn[0][0] not in _RDN or any(c in rdn[0][1] for c in ',+"\\<>;='):
            return None
        parts.append(f"{_RDN[rdn[0][0]]}={rdn[0][1]}")
    return ",".join(parts) or None


def denied(
    error: object,
    conf: Mapping[str, str],
    *,
    topic: tuple[str, str] | None = None,
    group: tuple[str, str] | None = None,
    cluster: str | None = None,
) -> KafkaAccessDenied | None:
    """`KafkaAccessDenied` when `error` is an authorization failure, else None.

    `topic` and `group` are (OPERATION, name) of what the refused request needed of each kind;
    `cluster` the cluster operation. The error's code picks which one is missing; a denial
    that does not say (CreateTopics answers "Authorization failed.") names every one given.
    """
    resource = _denied_resource(error)
    if resource is None:
        return None
    wanted = {"topic": topic, "group": group}
    if resource in wanted and wanted[resource] is not None:
        needs = [_acl(resource, wanted[resource])]
    elif resource == "cluster" and cluster:
        needs = [f"{cluster} on the cluster"]
    else:
        needs = [_acl(kind, want) for kind, want in wanted.items() if want is not None]
        needs += [f"{cluster} on the cluster"] if cluster else []
    what = " and ".join(needs) or _plain(resource)
    return KafkaAccessDenied(
        f"{DENIED}{principal(conf)} needs {what} on Kafka at "
        f"{conf.get('bootstrap.servers', '?')} (no ACL allows it; see the "
        "least-privilege table in docs/security.md)"
    )


def raise_if_denied(
    error: object,
    conf: Mapping[str, str],
    *,
    topic: tuple[str, str] | None = None,
    group: tuple[str, str] | None = None,
    cluster: str | None = None,
) -> None:
    """Raise `denied(...)` when `error` is an authorization failure."""
    found = denied(error, conf, topic=topic, group=group, cluster=cluster)
    if found is not None:
        raise found from None


def _acl(kind: str, want: tuple[str, str] | None) -> str:
    assert want is not None
    operation, name = want
    return f"{operation} on {kind} {name!r}"


def _plain(resource: str) -> str:
    return f"an ACL on a {resource.replace('_', ' ')}" if resource else "an ACL"
