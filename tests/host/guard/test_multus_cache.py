"""The shim's DEL-time check of Multus's delegate cache, on a real cache directory (host tier).

Multus v4.3.0 skips every delegate DEL when ``<cniDir>/<container ID>`` is not valid JSON
(multus-cni #948, #1087). Before DEL the shim moves such a file aside, keeping it as
``<file>.corrupt-<stamp>`` next to it, so Multus takes its cache-missing path; a valid or missing
cache is never touched.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sriov_dra.guard import shim
from sriov_dra_rules import multus_cache

ID = "0f3c2a9d8e7b6a5f4e3d2c1b0a998877665544332211ffeeddccbbaa00112233"
STAMP = "20261201T214500Z"
CACHE = json.dumps([{"Conf": {"type": ""}, "Name": "lab-primary"}, {"Name": "ns/dra-sriov-a"}]).encode()


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    """Multus's cniDir as Multus makes it (mode 0700), with another container's valid cache in it."""
    d = tmp_path / "multus"
    d.mkdir(mode=0o700)
    (d / "other-container").write_bytes(CACHE)
    return d


def _listing(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir()}


def test_valid_cache_is_left_exactly_as_multus_wrote_it(cache_dir: Path) -> None:
    path = cache_dir / ID
    path.write_bytes(CACHE)
    path.chmod(0o600)
    before = os.stat(path)
    assert multus_cache.set_aside_unreadable_cache(str(cache_dir), ID, stamp=STAMP) is None
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns, after.st_mode) == (
        before.st_ino,
        before.st_mtime_ns,
        before.st_mode,
    )
    assert _listing(cache_dir) == {"other-container": CACHE, ID: CACHE}


def test_missing_cache_is_left_missing(cache_dir: Path) -> None:
    assert multus_cache.set_aside_unreadable_cache(str(cache_dir), ID, stamp=STAMP) is None
    assert _listing(cache_dir) == {"other-container": CACHE}


@pytest.mark.parametrize(
    ("data", "problem"),
    [(b"", "0 bytes"), (CACHE[: len(CACHE) // 2], "not JSON")],
    ids=["zero-bytes", "half-written"],
)
def test_unreadable_cache_is_moved_aside_with_the_copy_kept_next_to_it(
    cache_dir: Path, data: bytes, problem: str
) -> None:
    path = cache_dir / ID
    path.write_bytes(data)
    path.chmod(0o600)
    inode = os.stat(path).st_ino

    moved = multus_cache.set_aside_unreadable_cache(str(cache_dir), ID, stamp=STAMP)

    copy = cache_dir / f"{ID}.corrupt-{STAMP}"
    assert moved is not None and moved[:2] == (str(path), str(copy)) and problem in moved[2]
    assert not path.exists()  # Multus's DEL now takes its cache-missing path
    assert _listing(cache_dir) == {"other-container": CACHE, copy.name: data}
    assert os.stat(copy).st_ino == inode and os.stat(copy).st_mode & 0o777 == 0o600  # the file itself


def test_an_earlier_copy_is_never_overwritten(cache_dir: Path) -> None:
    earlier = cache_dir / f"{ID}.corrupt-{STAMP}"
    earlier.write_bytes(b"[")
    (cache_dir / ID).write_bytes(b"")
    moved = multus_cache.set_aside_unreadable_cache(str(cache_dir), ID, stamp=STAMP)
    assert moved is not None and moved[1] == f"{earlier}.1"
    assert earlier.read_bytes() == b"[" and (cache_dir / f"{earlier.name}.1").read_bytes() == b""


def test_a_directory_by_the_container_name_is_not_a_cache_and_stays(cache_dir: Path) -> None:
    (cache_dir / ID).mkdir()
    assert multus_cache.set_aside_unreadable_cache(str(cache_dir), ID, stamp=STAMP) is None
    assert (cache_dir / ID).is_dir()


def test_a_container_id_that_is_a_path_is_refused_and_nothing_outside_is_touched(
    cache_dir: Path, tmp_path: Path
) -> None:
    (tmp_path / "victim").write_bytes(b"")
    with pytest.raises(ValueError, match="not a container ID"):
        multus_cache.set_aside_unreadable_cache(str(cache_dir), "../victim", stamp=STAMP)
    assert (tmp_path / "victim").exists()


def _conf(tmp_path: Path, cache: Path, **multus: object) -> shim.GuardConf:
    primary = tmp_path / "10-primary.conflist"
    primary.write_text(json.dumps({"cniVersion": "1.0.0", "name": "p", "plugins": [{"type": "macvlan"}]}))
    doc = {
        "cniVersion": "1.0.0",
        "name": "multus-cni-network",
        "multus": {"mode": "thin", "primaryConfig": str(primary), "config": {"cniDir": str(cache)}, **multus},
    }
    return shim.parse_conf(json.dumps(doc).encode())


def test_del_logs_the_move_with_the_container_id_and_both_paths(
    cache_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (cache_dir / ID).write_bytes(b"")
    shim._set_aside_before_del(_conf(tmp_path, cache_dir), {"CNI_COMMAND": "DEL", "CNI_CONTAINERID": ID})
    logged = capsys.readouterr().err
    assert f"op=DEL container={ID} cache={cache_dir / ID} copy={cache_dir / ID}.corrupt-" in logged
    assert "unreadable (0 bytes)" in logged and logged.count("\n") == 1


def test_del_check_that_cannot_run_is_logged_and_never_stops_the_del(
    cache_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = _conf(tmp_path, cache_dir, mode="thick", daemonConfigFile=str(tmp_path / "gone.json"))
    (cache_dir / ID).write_bytes(b"")
    shim._set_aside_before_del(conf, {"CNI_COMMAND": "DEL", "CNI_CONTAINERID": ID})
    logged = capsys.readouterr().err
    assert f"op=DEL container={ID}: cannot check Multus's delegate cache" in logged and "gone.json" in logged
    assert (cache_dir / ID).exists()  # nothing guessed, nothing moved
