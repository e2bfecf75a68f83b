"""`spark-submit` entry point: the same command and options as `offsetd rewind plan`.

    spark-submit --master yarn --py-files offsetd.zip \\
      --packages org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version> \\
      daemon/offsetd/spark/__main__.py --config offsetd.yaml --connector orders-sink \\
      --predicate 'value.order_id > 1000' --value-schema 'order_id INT' --out plan.json

`python -m offsetd.spark ...` works too. The session is stopped on the way out.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from offsetd.cli.rewind import plan


def main() -> None:
    try:
        plan(prog_name="offsetd-rewind-plan")
    finally:
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()


if __name__ == "__main__":
    main()
