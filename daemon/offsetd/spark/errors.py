"""Errors of a rewind plan, each with its own exit code (continuing the tree in offsetd.errors).

OffsetdError
├── InvalidPredicate   exit 25  the predicate or --value-schema does not parse, is refused,
│                               or does not analyse (the message names it and Spark's reason)
├── SkipRunRefused     exit 26  skip-run's matches are not one run from the committed offset
│                               (defined with the plan, offsetd.offsets.rewind_plan)
├── NothingToRewind    exit 27  no record matched anywhere: no plan is written
└── SparkJobFailed     exit 28  Spark could not run the scan (jars, JVM, Kafka source)
"""

from __future__ import annotations

from offsetd.errors import OffsetdError
from offsetd.offsets.rewind_plan import SkipRunRefused

__all__ = ["InvalidPredicate", "NothingToRewind", "SkipRunRefused", "SparkJobFailed"]


class InvalidPredicate(OffsetdError):
    exit_code = 25


class NothingToRewind(OffsetdError):
    exit_code = 27


class SparkJobFailed(OffsetdError):
    exit_code = 28
