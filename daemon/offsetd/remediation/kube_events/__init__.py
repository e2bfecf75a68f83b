"""Kubernetes Events on the Strimzi resources offsetd acts on: what each outcome says (`notes`,
pure), the events.k8s.io/v1 body and its series (`body`, pure), and the writer that publishes
them off the remediation's path (`publisher`)."""

__all__: list[str] = []
