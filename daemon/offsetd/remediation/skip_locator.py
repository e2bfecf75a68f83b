"""The skip's locator: `locate` with its one-record-batch override made durable, so a crash
can undo it (`recovery`), and the proof that the connector's configuration handles records.

It reads the skip's parameters (`check`, `single_record_batches`) from the typed `SkipSpec`
of the decision's skip action, parsed as the executor parses it
(`offsetd.remediation.actions.parse_action`). It sits beside the skip (`remediation.skip`), not
inside it: the actions import the skip saga, and this module imports the actions, so inside the
skip package it would close a cycle between them.
"""

from __future__ import annotations

from pydantic import ValidationError

from offsetd.config import Settings
from offsetd.connect.client import ConnectClient
from offsetd.engine import Decision
from offsetd.events.models import RecordRef
from offsetd.offsets.model import ConnectorKind, next_offset_of
from offsetd.remediation.actions import parse_action
from offsetd.remediation.actions.skip import SkipSpec
from offsetd.remediation.locate import LocateAnswer, Located, locate, pin_latest_start
from offsetd.remediation.locate.proof import config_history_of, delivered_before, proven_answer
from offsetd.remediation.sagas import SagaRecord, SagaStore, locate_key

__all__ = ["SagaLocator", "skip_spec"]


def skip_spec(decision: Decision) -> SkipSpec | None:
    """The decision's skip action as its typed spec (None: it plans no skip).

    An action whose parameters do not fit its spec is passed over: the executor's dispatch
    refuses it before any handler (and so this locator) runs for it.
    """
    for action in decision.actions:
        try:
            spec = parse_action(action)
        except ValidationError:
            continue
        if isinstance(spec, SkipSpec):
            return spec
    return None


class SagaLocator:
    """`locate` with its one-record-batch override made durable, so a crash can undo it."""

    def __init__(self, settings: Settings, owner: str) -> None:
        self.settings = settings
        self.owner = owner

    async def locate(
        self, client: ConnectClient, decision: Decision, sagas: SagaStore, *, prove: bool = True
    ) -> LocateAnswer:
        """Locate `decision`'s record. `prove`: also say whether the connector's current
        configuration is known to handle records (read before locating changes its config)."""
        spec = skip_spec(decision)
        check = spec.check if spec is not None else None
        single_record_batches = spec.single_record_batches if spec is not None else True
        key = locate_key(decision.connect_cluster, decision.connector)
        written: list[SagaRecord] = []
        before: dict[tuple[str, int], int] = {}
        history = None
        if prove:  # what proves the configuration, read before locating changes it
            before = await delivered_before(self.settings, client, decision)
            history = await config_history_of(self.settings, decision)

        async def on_override(original: str | None) -> None:
            record = SagaRecord(
                key=key,
                kind="locate",
                connect_cluster=decision.connect_cluster,
                connector=decision.connector,
                decision_id=decision.id,
                rule=decision.rule,
                epoch=1,
                owner=self.owner,
                override={"original": original},
            )
            written.append(await sagas.put(record))

        target = decision
        if decision.record_status == "exact" and decision.record is not None:
            exact = decision.record
            committed = await _committed_next(client, decision.connector, exact)
            # No committed offset: the sink starts from auto.offset.reset, so records before N
            # may be undelivered too. Past N: the recheck in the saga says "already moved on".
            if committed is not None and committed >= exact.offset:
                named = {"topic": exact.topic, "partition": exact.partition, "offset": exact.offset}
                return await proven_answer(
                    self.settings, client, decision, named, "dlq",
                    "named by the DLQ record's context headers", 0, before, history, prove,
                )  # fmt: skip
            # Records committed..N-1 were in the failed batch and never delivered: skipping to
            # N+1 now would lose them. One-record batches deliver them first (and must stop at N).
            target = decision.model_copy(update={"record_status": "to_locate", "record": None})
        try:
            result = await locate(
                client,
                target,
                self.settings,
                check=check,
                single_record_batches=single_record_batches,
                on_override=on_override,
            )
        finally:
            if written:  # locate restored the override itself (or raised ConfigNotRestored)
                await sagas.put(written[-1].ended("done", written[-1].updated_at_ms))
        if isinstance(result, Located):
            ref = result.record
            wanted = decision.record if target is not decision else None
            if wanted is not None and (ref.topic, ref.partition, ref.offset) != (
                wanted.topic,
                wanted.partition,
                wanted.offset,
            ):
                return LocateAnswer(
                    None,
                    "undelivered_prefix",
                    f"the DLQ named {wanted.topic}-{wanted.partition}@{wanted.offset}, but with "
                    f"one-record batches the connector stopped at {ref.offset}: not skipping",
                )
            named = {"topic": ref.topic, "partition": ref.partition, "offset": ref.offset}
            return await proven_answer(
                self.settings, client, decision, named, result.how, result.detail,
                result.delivered, before, history, prove,
            )  # fmt: skip
        return LocateAnswer(None, result.reason, result.describe())

    async def pin_unstarted(self, client: ConnectClient, decision: Decision) -> str | None:
        """Before a restart of a sink whose consumer starts at `latest` and has committed
        nothing: its start committed, so the restart does not jump past the failed records
        (`offsetd.remediation.sink_start`). The sentence for the audit, or None."""
        return await pin_latest_start(client, decision, self.settings)


async def _committed_next(client: ConnectClient, connector: str, record: RecordRef) -> int | None:
    """The sink's committed offset (next to read) on the record's partition, if any."""
    for entry in await client.offsets(connector):
        part = entry.partition
        if (part.get("kafka_topic"), part.get("kafka_partition")) == (
            record.topic,
            record.partition,
        ):
            return next_offset_of(ConnectorKind.SINK, entry.offset)
    return None
