"""How the stack runs a JVM: one command-line shape for brokers, the storage tool and Connect."""

from __future__ import annotations

from pathlib import Path

__all__ = ["LOG4J2_PROPERTIES", "java_command", "render_properties", "write_log_config"]

LOG4J2_PROPERTIES = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p [%t] %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.stdout.ref = STDOUT
logger.zk.name = org.apache.kafka.clients
logger.zk.level = warn
"""


def write_log_config(config_dir: Path, name: str, level: str) -> Path:
    path = config_dir / f"log4j2-{name}.properties"
    path.write_text(LOG4J2_PROPERTIES.format(level=level))
    return path


def java_command(
    java: str,
    jar_dir: Path,
    main_class: str,
    args: list[str],
    *,
    log_config: Path,
    logs_dir: Path,
    heap_mb: int,
    jvm_options: tuple[str, ...] = (),
) -> list[str]:
    """The equivalent of Kafka's bin/kafka-run-class.sh, without the scripts.

    Serial GC and C1-only JIT keep three JVMs light on a 2-core machine; the workloads here are
    small, so peak throughput matters less than start-up time and CPU left for the tests.
    """
    return [
        java,
        f"-Xms{min(128, heap_mb)}m",
        f"-Xmx{heap_mb}m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Djava.awt.headless=true",
        f"-Dkafka.logs.dir={logs_dir}",
        f"-Dlog4j2.configurationFile={log_config}",
        *jvm_options,
        "-cp",
        f"{jar_dir}/*",
        main_class,
        *args,
    ]


def render_properties(props: dict[str, str | int]) -> str:
    return "".join(f"{key}={value}\n" for key, value in props.items())
