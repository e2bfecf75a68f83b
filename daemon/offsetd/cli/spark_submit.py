"""`spark-submit` entry point: the same command and options as `offsetd rewind plan`.

    spark-submit --master yarn --py-files offsetd.zip \\
      --packages org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version> \\
      daemon/offsetd/cli/spark_submit.py --config offsetd.yaml --connector orders-sink \\
      --predicate 'value.order_id > 1000' --value-schema 'order_id INT' --out plan.json

`python -m offsetd.cli.spark_submit ...` works too. The session is stopped on the way out. It
lives with the CLI because it is one: the Spark package computes plans and never imports the
command line.
"""

from __future__ import annotations

from offsetd.cli.rewind import plan
from offsetd.spark.session import stop_active_session

__all__ = ["main"]


def main() -> None:
    try:
        plan(prog_name="offsetd-rewind-plan")
    finally:
        stop_active_session()


if __name__ == "__main__":
    main()
