"""The predicate, checked by Spark's own parser and analyzer before any record is read.

Three steps, each answering with one message that names the expression and Spark's reason
(never a JVM stack trace):

1. parse: Spark's SQL parser (`parseExpression`), the one the scan will use;
2. refuse what must not run in the scan, found by walking the parsed tree, not by regexes:
   calls into arbitrary JVM methods (`reflect`, `java_method`, `try_reflect`), any function
   that is not one of Spark's built-ins (UDFs, catalog functions, qualified names), and
   subqueries (they would read other tables);
3. analyse: a `where()` over an empty frame with the scan's exact columns, so unknown columns,
   type errors, aggregates and non-boolean predicates fail here; the analysed tree is walked
   once more for JVM-calling or user-defined expressions, in case a built-in rewrote to one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark.errors import PySparkException
from pyspark.errors.exceptions.captured import convert_exception
from pyspark.sql import SparkSession

from offsetd.spark import scan
from offsetd.spark.errors import InvalidPredicate

__all__ = [
    "FORBIDDEN_CLASSES",
    "FORBIDDEN_FUNCTIONS",
    "SUBQUERY_CLASSES",
    "CheckedPredicate",
    "check_predicate",
    "check_value_schema",
    "spark_reason",
    "system_functions",
]

FORBIDDEN_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect"})
# Expression classes that call the JVM or user code; checked after analysis.
FORBIDDEN_CLASSES = frozenset(
    {
        "CallMethodViaReflection",
        "TryReflect",
        "ScalaUDF",
        "ScalaUDAF",
        "ScalaAggregator",
        "PythonUDF",
        "PythonUDAF",
        "HiveSimpleUDF",
        "HiveGenericUDF",
        "HiveGenericUDTF",
        "HiveUDAFFunction",
    }
)
SUBQUERY_CLASSES = frozenset({"ScalarSubquery", "Exists", "ListQuery", "InSubquery"})
_SYSTEM_FUNCTIONS: dict[int, frozenset[str]] = {}


@dataclass(frozen=True)
class CheckedPredicate:
    text: str
    columns: frozenset[str]  # top-level columns it refers to (headers are read only if used)


def check_value_schema(spark: SparkSession, ddl: str) -> None:
    """`--value-schema` must be a DDL list of fields, e.g. `order_id INT, status STRING`."""
    jvm: Any = spark._jvm
    try:
        jvm.org.apache.spark.sql.types.StructType.fromDDL(ddl)
    except (PySparkException, Py4JJavaError) as exc:
        raise InvalidPredicate(f"--value-schema {ddl!r}: {spark_reason(exc)}") from None


def check_predicate(
    spark: SparkSession, text: str, value_schema: str | None = None
) -> CheckedPredicate:
    if not text.strip():
        raise InvalidPredicate("the predicate is empty")
    tree = _parse(spark, text)
    if tree.getClass().getSimpleName() in ("Alias", "UnresolvedAlias"):
        # `offset > 5 and` parses as `offset > 5 AS and`: an alias is never a predicate.
        raise InvalidPredicate(
            f"predicate {text!r} does not parse as a predicate: Spark reads its end as an "
            f"alias ({tree.sql()})"
        )
    functions: list[str] = []
    columns: set[str] = set()
    classes: set[str] = set()
    _walk(tree, functions, columns, classes)
    _refuse(spark, text, functions, classes)
    _analyse(spark, text, value_schema)
    return CheckedPredicate(text, frozenset(columns))


def _parse(spark: SparkSession, text: str) -> Any:
    jspark: Any = spark._jsparkSession
    try:
        return jspark.sessionState().sqlParser().parseExpression(text)
    except (PySparkException, Py4JJavaError) as exc:
        raise InvalidPredicate(f"predicate {text!r} does not parse: {spark_reason(exc)}") from None


def _walk(node: Any, functions: list[str], columns: set[str], classes: set[str]) -> None:
    name = node.getClass().getSimpleName()
    classes.add(name)
    if name == "UnresolvedFunction":
        parts = node.nameParts()
        functions.append(".".join(str(parts.apply(i)) for i in range(parts.size())))
    elif name == "UnresolvedAttribute":
        parts = node.nameParts()
        if parts.size() > 0:
            columns.add(str(parts.apply(0)).lower())
    children = node.children()
    for i in range(children.size()):
        _walk(children.apply(i), functions, columns, classes)


def _refuse(spark: SparkSession, text: str, functions: list[str], classes: set[str]) -> None:
    builtins = system_functions(spark)
    problems = []
    for fn in functions:
        lowered = fn.lower()
        if lowered in FORBIDDEN_FUNCTIONS:
            problems.append(f"{fn}() calls JVM methods")
        elif "." in lowered:
            problems.append(f"{fn}() is a qualified name; only Spark's built-in functions")
        elif lowered not in builtins:
            problems.append(f"{fn}() is not a Spark built-in function (UDFs are not allowed)")
    if classes & SUBQUERY_CLASSES:
        problems.append("subqueries are not allowed")
    if problems:
        raise InvalidPredicate(f"predicate {text!r} refused: " + "; ".join(dict.fromkeys(problems)))


def system_functions(spark: SparkSession) -> frozenset[str]:
    """Spark's built-in function names (cached per session)."""
    key = id(spark)
    if key not in _SYSTEM_FUNCTIONS:
        rows = spark.sql("SHOW SYSTEM FUNCTIONS").collect()
        _SYSTEM_FUNCTIONS[key] = frozenset(str(r[0]).lower() for r in rows) - FORBIDDEN_FUNCTIONS
    return _SYSTEM_FUNCTIONS[key]


def _analyse(spark: SparkSession, text: str, value_schema: str | None) -> None:
    frame = scan.with_predicate_columns(scan.empty_kafka_frame(spark), value_schema)
    try:
        checked = frame.where(scan.matches(text))
        plan: Any = checked._jdf.queryExecution().analyzed()
    except (PySparkException, Py4JJavaError) as exc:
        raise InvalidPredicate(f"predicate {text!r} is invalid: {spark_reason(exc)}") from None
    classes: set[str] = set()
    _walk(plan.condition(), [], set(), classes)
    bad = sorted(classes & FORBIDDEN_CLASSES)
    if bad:
        raise InvalidPredicate(f"predicate {text!r} refused: it runs {', '.join(bad)}")


def spark_reason(exc: BaseException) -> str:
    """Spark's own message on one line: error class, text, SQLSTATE and the parse position,
    without the JVM stack trace or the analysed plan Spark appends to it."""
    if isinstance(exc, Py4JJavaError):
        converted = convert_exception(exc.java_exception)
        exc = converted if isinstance(converted, PySparkException) else exc
    if isinstance(exc, PySparkException):
        message = exc.getMessage() or str(exc)
    elif isinstance(exc, Py4JJavaError):
        message = str(exc.java_exception.getMessage())
    else:
        message = str(exc)
    flat = " ".join(line.strip() for line in message.strip().splitlines() if line.strip())
    found = _SHORT.match(flat)
    return (found.group(1) + (found.group(2) or "")).rstrip(";") if found else flat


_SHORT = re.compile(r"^(.*?SQLSTATE: \w+)(?:.*?(\s*\(line \d+, pos \d+\)))?")
