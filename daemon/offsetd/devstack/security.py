"""The secure variant of the local stack: SASL_SSL brokers with ACLs, HTTPS + basic-auth Connect.

- Each KRaft node serves clients on a SASL_SSL listener (SCRAM-SHA-512, certificates from
  `devstack.tls`) and talks to its own controller over SASL_PLAINTEXT with PLAIN: KRaft keeps
  SCRAM credentials in the metadata log, so a controller listener cannot use SCRAM. The
  controller listener is bound to loopback and only the broker principal has a password there.
- The StandardAuthorizer denies whatever no ACL allows (`allow.everyone.if.no.acl.found=false`);
  the super users are the broker and the stack's own `admin`, nobody else.
- Connect (`connect`) and MirrorMaker 2 (`mm2`) are ordinary principals with ACLs of their own,
  broad on purpose (every topic and group): they are the stack's workload, not what is proven.
  offsetd's principal (`offsetd`) gets exactly the ACLs the least-privilege table in
  docs/security.md lists.
- Connect's REST API listens on HTTPS with Kafka's `BasicAuthSecurityRestExtension`, reading
  users from a property file through JAAS.

Every password is random per run directory and kept there (mode 600).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import (  # type: ignore[attr-defined]  # not in its __all__
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from offsetd.devstack.errors import DevStackError
from offsetd.devstack.tls import TlsMaterial, make_tls_material

__all__ = [
    "BASIC_AUTH_EXTENSION",
    "PRINCIPALS",
    "SASL_MECHANISM",
    "STACK_ACLS",
    "Acl",
    "StackSecurity",
    "grant_acls",
    "load_or_make",
    "workload_acls",
]

SASL_MECHANISM = "SCRAM-SHA-512"
PRINCIPALS = ("admin", "broker", "connect", "mm2", "offsetd")
REST_USERS = ("admin", "offsetd")
BASIC_AUTH_EXTENSION = (
    "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
)
_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def _jaas_value(text: str) -> str:
    return json.dumps(text)  # a JAAS option value is a double-quoted string, JSON-escaped


@dataclass(frozen=True)
class StackSecurity:
    tls: TlsMaterial
    passwords: dict[str, str]  # Kafka principal -> SCRAM password
    rest_passwords: dict[str, str]  # Connect REST user -> password
    folder: Path

    # -- Kafka: brokers --------------------------------------------------------------------------

    def scram_format_args(self) -> list[str]:
        """`kafka-storage format` arguments creating every principal's SCRAM credential."""
        args: list[str] = []
        for user, password in self.passwords.items():
            args += ["--add-scram", f"{SASL_MECHANISM}=[name={user},password={password}]"]
        return args

    def broker_properties(
        self, host: str, broker_port: int, controller_port: int
    ) -> dict[str, str]:
        broker = self.passwords["broker"]
        return {
            "listeners": f"SASL_SSL://{host}:{broker_port},CONTROLLER://{host}:{controller_port}",
            "advertised.listeners": f"SASL_SSL://{host}:{broker_port}",
            "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": SASL_MECHANISM,
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": (
                f'{_PLAIN_LOGIN} required username="broker" password={_jaas_value(broker)} '
                f"user_broker={_jaas_value(broker)};"
            ),
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": SASL_MECHANISM,
            f"listener.name.sasl_ssl.{SASL_MECHANISM.lower()}.sasl.jaas.config": (
                f'{_SCRAM_LOGIN} required username="broker" password={_jaas_value(broker)};'
            ),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.tls.keystore),
            "ssl.keystore.password": self.tls.password,
            "ssl.key.password": self.tls.password,
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(self.tls.truststore),
            "ssl.truststore.password": self.tls.password,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": "User:broker;User:admin",
        }

    # -- Kafka: clients --------------------------------------------------------------------------

    def client_config(self, user: str) -> dict[str, str]:
        """librdkafka settings of `user` (the stack's own admin, offsetd, ...)."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SASL_MECHANISM,
            "sasl.username": user,
            "sasl.password": self.passwords[user],
            "ssl.ca.location": str(self.tls.ca_pem),
        }

    def java_client_properties(self, user: str, prefix: str = "") -> dict[str, str]:
        """Java client settings of `user`, each key under `prefix` (`producer.`, `consumer.`,
        `source.cluster.` ...); the CA as a PKCS12 truststore, which Connect's REST server
        (Jetty) can read too when the settings are a worker's top-level ones."""
        props = {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SASL_MECHANISM,
            "sasl.jaas.config": (
                f"{_SCRAM_LOGIN} required username={_jaas_value(user)} "
                f"password={_jaas_value(self.passwords[user])};"
            ),
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(self.tls.truststore),
            "ssl.truststore.password": self.tls.password,
        }
        return {prefix + key: value for key, value in props.items()}

    # -- Connect ---------------------------------------------------------------------------------

    def connect_worker_properties(self, host: str, rest_port: int) -> dict[str, str]:
        """HTTPS + basic auth for the REST API, and the worker's own clients as `connect`."""
        # Unprefixed: Kafka 4.2's REST server takes `listeners.https.*` all or nothing and then
        # misses the defaults it needs (a NullPointerException on the cipher suites). The
        # worker's Kafka clients see the keystore too; the brokers never ask for it.
        props = {
            "listeners": f"https://{host}:{rest_port}",
            "rest.advertised.listener": "https",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.tls.keystore),
            "ssl.keystore.password": self.tls.password,
            "ssl.key.password": self.tls.password,
            "rest.extension.classes": BASIC_AUTH_EXTENSION,
        }
        props.update(self.java_client_properties("connect"))
        for prefix in ("producer.", "consumer.", "admin."):
            props.update(self.java_client_properties("connect", prefix))
        return props

    def connect_jvm_options(self) -> tuple[str, ...]:
        """Options of the workers' JVMs: the JAAS file of the REST users."""
        return (f"-Djava.security.auth.login.config={self.connect_jaas_file()}",)

    def rest_client_args(self, user: str = "admin") -> dict[str, Any]:
        """`ConnectRest` keyword arguments for `user`: its REST login and the CA."""
        return {"auth": self.rest_auth(user), "ca_file": str(self.tls.ca_pem)}

    def stack_acls(self) -> list[Acl]:
        """The ACLs the stack grants on each cluster."""
        return STACK_ACLS

    def connect_jaas_file(self) -> Path:
        """The JAAS file the workers' JVMs are started with (`-Djava.security.auth.login.config`)
        and the users file it names."""
        users = self.folder / "connect-rest-users.properties"
        users.write_text("".join(f"{u}: {p}\n" for u, p in self.rest_passwords.items()))
        users.chmod(0o600)
        jaas = self.folder / "connect-jaas.conf"
        jaas.write_text(
            "KafkaConnect {\n"
            "  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule "
            f"required file={_jaas_value(str(users))};\n"
            "};\n"
        )
        jaas.chmod(0o600)
        return jaas

    def rest_auth(self, user: str = "admin") -> tuple[str, str]:
        return user, self.rest_passwords[user]

    # -- persistence -----------------------------------------------------------------------------

    def as_json(self) -> dict[str, Any]:
        return {
            "tls": {k: str(v) for k, v in asdict(self.tls).items()},
            "passwords": self.passwords,
            "rest_passwords": self.rest_passwords,
            "folder": str(self.folder),
        }


def load_or_make(java: str, folder: Path) -> StackSecurity:
    """The run directory's security material: certificates and passwords, made once."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    tls = make_tls_material(java, folder / "tls")
    secrets_file = folder / "passwords.json"
    if secrets_file.exists():
        saved = json.loads(secrets_file.read_text())
        passwords, rest = saved["passwords"], saved["rest_passwords"]
    else:
        passwords = {user: secrets.token_urlsafe(18) for user in PRINCIPALS}
        rest = {user: secrets.token_urlsafe(18) for user in REST_USERS}
        secrets_file.write_text(json.dumps({"passwords": passwords, "rest_passwords": rest}))
        secrets_file.chmod(0o600)
    return StackSecurity(tls, passwords, rest, folder)


# -- ACLs -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Acl:
    """One ALLOW rule: `principal` may do `operation` on the resource(s) `name` names."""

    principal: str
    resource: str  # topic | group | cluster | transactional_id
    name: str  # a literal name, "*", or a prefix when `prefixed`
    operation: str  # Kafka's operation names: READ, WRITE, DESCRIBE, ...
    prefixed: bool = False

    def binding(self) -> AclBinding:
        return AclBinding(
            _RESOURCE[self.resource],
            self.name,
            ResourcePatternType.PREFIXED if self.prefixed else ResourcePatternType.LITERAL,
            f"User:{self.principal}",
            "*",
            AclOperation[self.operation],
            AclPermissionType.ALLOW,
        )


_RESOURCE = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "cluster": ResourceType.BROKER,
    "transactional_id": ResourceType.TRANSACTIONAL_ID,
}


def workload_acls(principal: str) -> list[Acl]:
    """Connect's and MirrorMaker 2's ACLs: everything they may touch, on purpose broad."""
    return [
        Acl(principal, "topic", "*", "ALL"),
        Acl(principal, "group", "*", "ALL"),
        Acl(principal, "transactional_id", "*", "ALL"),
        *(
            Acl(principal, "cluster", "kafka-cluster", op)
            for op in ("CREATE", "DESCRIBE", "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE")
        ),
    ]


# offsetd's ACLs: the least-privilege table (docs/security.md, "Least privilege"), each one
# needed by a feature (tests/integration/test_least_privilege.py removes each in turn). READ,
# WRITE and DELETE imply DESCRIBE, so no DESCRIBE is granted where one of them is.
OFFSETD_ACLS = [
    # every reader: Connect's status, config and offsets topics, DLQs, the records a rule checks
    # or quarantines, MM2's offset syncs and checkpoints, the topics a rewind plan scans
    Acl("offsetd", "topic", "*", "READ"),
    # offline writes of source connectors' offsets
    Acl("offsetd", "topic", "connect-offsets", "WRITE"),
    # offsetd's own topics: audit, sagas, control, quarantine, snapshots, the daemon's internal
    Acl("offsetd", "topic", "offsetd", "CREATE", prefixed=True),
    Acl("offsetd", "topic", "offsetd", "WRITE", prefixed=True),
    Acl("offsetd", "topic", "offsetd", "DESCRIBE_CONFIGS", prefixed=True),  # snapshots: compacted?
    # the daemon's consumer groups (`daemon.app_id` and `<app_id>-ingest`)
    Acl("offsetd", "group", "offsetd", "READ", prefixed=True),
    # lag's checkpointed groups, and sinks whose group is not `connect-<name>`: offsets read
    Acl("offsetd", "group", "*", "DESCRIBE"),
    # offline writes of sink connectors' groups (Connect's default `connect-<name>`)
    Acl("offsetd", "group", "connect-", "READ", prefixed=True),
    Acl("offsetd", "group", "connect-", "DELETE", prefixed=True),
]

STACK_ACLS = [*workload_acls("connect"), *workload_acls("mm2"), *OFFSETD_ACLS]


def grant_acls(admin_config: dict[str, str], acls: list[Acl], timeout_s: float = 30.0) -> None:
    """Create `acls` with the stack's super user (idempotent: an existing ACL is kept)."""
    admin = AdminClient(dict(admin_config))
    futures = admin.create_acls([acl.binding() for acl in acls], request_timeout=timeout_s)
    for binding, future in futures.items():
        try:
            future.result(timeout=timeout_s)
        except Exception as exc:
            raise DevStackError(f"creating the ACL {binding} failed: {exc}") from None
