"""MirrorMaker 2 failover and failback of consumer groups: the offset step of disaster recovery.

A group committed on one cluster moves to the other with MM2's own semantics: the checkpoints
the flow wrote on the target, its offset syncs where a checkpoint is older than the group's
commit, and, to move back, the inverse of the forward flow's offset syncs. `policy` names
topics the way the flow's replication policy does; `syncs` decodes and searches offset syncs;
`plan` is the pure translation (every partition's new offset, its re-read bound, every refusal);
`kafka` reads what a plan needs (the target's topics; the source's commits when it answers);
`apply` commits a plan safely (members refused, snapshot first, read back); `render` prints it.
"""

__all__: list[str] = []
