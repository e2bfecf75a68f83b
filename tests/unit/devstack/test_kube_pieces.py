"""Pure parts of the local Kubernetes API: the build's replaces, the stand-in's MM2 names."""

from __future__ import annotations

from offsetd.devstack.kubebin import staging_replaces
from offsetd.devstack.strimzi_standin import _mm2_connectors

GO_MOD = """module k8s.io/kubernetes

require (
\tk8s.io/api v0.0.0
\tk8s.io/kube-openapi v0.0.0-20250318190949-c8a335a9a2ff
\tk8s.io/utils v0.0.0-20241104100929-3ea5e8cea738
\tk8s.io/apiserver v0.0.0
)

replace k8s.io/api => ./staging/src/k8s.io/api
"""


def test_only_staging_modules_are_replaced_with_their_published_version() -> None:
    assert staging_replaces(GO_MOD, "v1.33.4") == [
        "replace k8s.io/api => k8s.io/api v0.33.4",
        "replace k8s.io/apiserver => k8s.io/apiserver v0.33.4",
    ]


def test_the_standin_names_mm2_connectors_of_both_api_versions() -> None:
    v1 = {"target": {"alias": "west"},
          "mirrors": [{"source": {"alias": "east"}, "sourceConnector": {},
                       "checkpointConnector": {}}]}  # fmt: skip
    v1beta2 = {"mirrors": [{"sourceCluster": "east", "targetCluster": "west",
                            "sourceConnector": {}}]}  # fmt: skip
    assert [n for n, _ in _mm2_connectors(v1)] == [
        "east->west.MirrorSourceConnector",
        "east->west.MirrorCheckpointConnector",
    ]
    assert [n for n, _ in _mm2_connectors(v1beta2)] == ["east->west.MirrorSourceConnector"]


def test_the_apiserver_build_is_stamped_with_its_version() -> None:
    from offsetd.devstack.kubebin import version_stamp

    assert version_stamp("v1.33.4").split() == [
        "-X",
        "k8s.io/component-base/version.gitVersion=v1.33.4",
        "-X",
        "k8s.io/component-base/version.gitMajor=1",
        "-X",
        "k8s.io/component-base/version.gitMinor=33",
        "-X",
        "k8s.io/component-base/version.gitTreeState=clean",
    ]
