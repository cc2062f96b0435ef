"""Tests for sriov_dra.host.atomic_file: atomic replace, durable removal, leftovers after a kill."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from tests.fakes import rename_kill

from sriov_dra.host import atomic_file


def test_write_creates_the_file_with_content_and_mode(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    atomic_file.write_atomic(target, b"{}\n", mode=0o600)
    assert target.read_bytes() == b"{}\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert atomic_file.stale_temporaries(target) == []


def test_write_replaces_existing_content_with_a_new_inode(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_bytes(b"old")
    old_inode = target.stat().st_ino
    atomic_file.write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert target.stat().st_ino != old_inode  # renamed over, never rewritten in place


def test_write_replaces_a_symlink_itself_not_its_target(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"keep")
    target = tmp_path / "state.json"
    target.symlink_to(elsewhere)
    atomic_file.write_atomic(target, b"new")
    assert not target.is_symlink()
    assert elsewhere.read_bytes() == b"keep"


def test_write_into_a_missing_directory_fails_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        atomic_file.write_atomic(tmp_path / "missing" / "state.json", b"x")
    assert list(tmp_path.iterdir()) == []


def test_failed_rename_removes_the_temporary_and_keeps_the_target(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.mkdir()  # a directory cannot be replaced by a file: the rename fails
    (target / "inside").write_bytes(b"keep")
    with pytest.raises(IsADirectoryError):
        atomic_file.write_atomic(target, b"x")
    assert atomic_file.stale_temporaries(target) == []
    assert (target / "inside").read_bytes() == b"keep"


@pytest.mark.parametrize(
    ("durable", "fsyncs"),
    [(True, 2), (False, 0)],
    ids=["durable:file-and-directory-fsynced", "derived:atomic-rename-without-fsync"],
)
def test_write_fsyncs_the_file_and_directory_only_when_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durable: bool, fsyncs: int
) -> None:
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    target = tmp_path / "state.json"
    target.write_bytes(b"old")
    old_inode = target.stat().st_ino
    atomic_file.write_atomic(target, b"new", mode=0o600, durable=durable)
    assert len(calls) == fsyncs
    assert target.read_bytes() == b"new" and target.stat().st_ino != old_inode  # still a rename
    assert stat.S_IMODE(target.stat().st_mode) == 0o600 and atomic_file.stale_temporaries(target) == []


def test_remove_durable_removes_and_reports(tmp_path: Path) -> None:
    target = tmp_path / "spec.json"
    target.write_bytes(b"x")
    assert atomic_file.remove_durable(target) is True
    assert not target.exists()


def test_remove_durable_of_an_absent_file_succeeds(tmp_path: Path) -> None:
    assert atomic_file.remove_durable(tmp_path / "absent.json") is False


def test_read_optional_distinguishes_absent_from_empty(tmp_path: Path) -> None:
    assert atomic_file.read_optional(tmp_path / "absent") is None
    (tmp_path / "empty").write_bytes(b"")
    assert atomic_file.read_optional(tmp_path / "empty") == b""


def _kill_between_temp_write_and_rename(target: Path, data: bytes) -> None:
    """Run write_atomic in a child that blocks at the rename; SIGKILL it there."""
    rename_kill.kill_at_rename(
        setup="from sriov_dra.host import atomic_file\n",
        write=f"atomic_file.write_atomic(Path({str(target)!r}), {data!r})\n",
    )


def test_kill_between_temp_write_and_rename_leaves_the_old_file_intact(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    atomic_file.write_atomic(target, b"old complete content")
    _kill_between_temp_write_and_rename(target, b"new complete content")
    assert target.read_bytes() == b"old complete content"
    (leftover,) = atomic_file.stale_temporaries(target)
    assert leftover.read_bytes() == b"new complete content"  # fsynced before the rename point


def test_remove_stale_temporaries_removes_only_this_targets_leftovers(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_bytes(b"keep")
    _kill_between_temp_write_and_rename(target, b"lost")
    unrelated = [tmp_path / ".other.json.abc.tmp", tmp_path / "state.json.tmp", tmp_path / ".state.json.abc"]
    for path in unrelated:
        path.write_bytes(b"x")
    removed = atomic_file.remove_stale_temporaries(target)
    assert len(removed) == 1
    assert atomic_file.stale_temporaries(target) == []
    assert target.read_bytes() == b"keep"
    assert all(path.exists() for path in unrelated)


def test_stale_temporaries_of_a_missing_directory_is_empty(tmp_path: Path) -> None:
    assert atomic_file.stale_temporaries(tmp_path / "missing" / "state.json") == []
