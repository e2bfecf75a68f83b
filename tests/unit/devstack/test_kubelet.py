"""The projected service-account folder as the kubelet's atomic writer lays it out."""

from __future__ import annotations

import os
from pathlib import Path

from offsetd.devstack.kubelet import ProjectedFolder


def test_the_files_are_links_through_data_to_a_timestamped_folder(tmp_path: Path) -> None:
    folder = ProjectedFolder(tmp_path / "sa", b"CA", "team-a")
    first = folder.write("token-a")
    assert first.name.startswith("..20")
    assert os.readlink(tmp_path / "sa" / "..data") == first.name
    for name, text in (("token", "token-a"), ("ca.crt", "CA"), ("namespace", "team-a")):
        assert os.readlink(tmp_path / "sa" / name) == f"..data/{name}"
        assert (tmp_path / "sa" / name).read_text() == text


def test_a_rotation_swaps_data_and_removes_the_old_folder(tmp_path: Path) -> None:
    folder = ProjectedFolder(tmp_path / "sa", b"CA", "team-a")
    first = folder.write("token-a")
    second = folder.write("token-b")
    assert second != first
    assert not first.exists()
    assert folder.current() == second
    assert (tmp_path / "sa" / "token").read_text() == "token-b"
    assert sorted(p.name for p in (tmp_path / "sa").iterdir()) == sorted(
        [second.name, "..data", "token", "ca.crt", "namespace"]
    )
