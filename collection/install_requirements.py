#!/usr/bin/env python3
"""Install the collections of ``collection/requirements.yml`` without a Galaxy server.

Galaxy is not reachable from the project's machines or CI, but PyPI is, and the ``ansible``
package on PyPI bundles the released collections in their installed form (``MANIFEST.json`` and
``FILES.json`` with per-file SHA-256). For each pinned collection this script

1. downloads the pinned ``ansible`` wheel with ``pip download --no-deps`` into a cache directory
   and checks the wheel's SHA-256 against the pin below;
2. repacks ``ansible_collections/<ns>/<name>/`` from the wheel as a collection artifact
   (``<ns>-<name>-<version>.tar.gz`` with ``MANIFEST.json`` at the top);
3. installs that artifact with ``ansible-galaxy collection install --offline``, which verifies
   every file against ``FILES.json``, into the venv's ``site-packages`` (ansible scans
   ``sys.path`` for ``ansible_collections``, so no ``ANSIBLE_COLLECTIONS_PATH`` is needed).

It is idempotent: an installed collection with the pinned version is left alone. Run it with
the project venv's Python (``make setup`` does). It must never install anything that is not
pinned here with a hash.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# collection -> (version, PyPI "ansible" release bundling exactly that version, wheel SHA-256)
PINS: dict[str, tuple[str, str, str]] = {
    "kubernetes.core": (
        "6.2.0",
        "12.3.0",
        "cd156f82fa87f7a899212b0efa9f7ca3a24d609212de9f78428a572eb01e5414",
    ),
}


def requirements(path: Path) -> dict[str, str]:
    """Collection name -> version from a Galaxy ``requirements.yml`` (``collections:`` list)."""
    import yaml  # the venv has PyYAML (ansible-core needs it)

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return {str(item["name"]): str(item["version"]) for item in data["collections"]}


def installed_version(dest: Path, name: str) -> str | None:
    """Version of ``name`` installed under ``dest/ansible_collections``, or None."""
    namespace, coll = name.split(".")
    manifest = dest / "ansible_collections" / namespace / coll / "MANIFEST.json"
    try:
        return str(json.loads(manifest.read_text(encoding="utf-8"))["collection_info"]["version"])
    except (OSError, KeyError, ValueError):
        return None


def download_wheel(python: str, release: str, sha256: str, cache: Path) -> Path:
    """The pinned ``ansible`` wheel in ``cache`` (downloaded once), hash-checked."""
    wheel = cache / f"ansible-{release}-py3-none-any.whl"
    if not wheel.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                python,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                "-d",
                str(cache),
                f"ansible=={release}",
            ],
            check=True,
        )
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != sha256:
        wheel.unlink()
        raise SystemExit(
            f"[setup] {wheel.name}: SHA-256 {digest} != pinned {sha256}; removed, rerun to retry"
        )
    return wheel


def repack(wheel: Path, name: str, version: str, out: Path) -> Path:
    """Write ``<ns>-<name>-<version>.tar.gz`` from the wheel's bundled copy of ``name``.

    The ``ansible`` wheel drops a few repository-only files (``.github/``, some test data) that
    the collection's ``FILES.json`` still lists, so ``ansible-galaxy`` would refuse the artifact.
    Every file that *is* bundled is checked here against its ``FILES.json`` SHA-256 first; the
    artifact then carries a ``FILES.json`` limited to those files (and its directories), with
    ``MANIFEST.json`` updated to that file's new hash, and ``ansible-galaxy`` checks it again.
    """
    namespace, coll = name.split(".")
    prefix = f"ansible_collections/{namespace}/{coll}/"
    artifact = out / f"{namespace}-{coll}-{version}.tar.gz"
    with zipfile.ZipFile(wheel) as zf:
        bundled = {
            m.filename[len(prefix) :]: m
            for m in zf.infolist()
            if m.filename.startswith(prefix) and not m.is_dir()
        }
        if "MANIFEST.json" not in bundled or "FILES.json" not in bundled:
            raise SystemExit(f"[setup] {wheel.name} does not bundle {name}")
        manifest = json.loads(zf.read(bundled["MANIFEST.json"]))
        files = json.loads(zf.read(bundled["FILES.json"]))
        found = manifest["collection_info"]["version"]
        if found != version:
            raise SystemExit(f"[setup] {wheel.name} bundles {name} {found}, not the pinned {version}")
        kept: list[dict[str, object]] = []
        payload: dict[str, bytes] = {}
        for entry in files["files"]:
            path = str(entry["name"])
            if entry["ftype"] == "dir":
                kept.append(entry)
                continue
            member = bundled.get(path)
            if member is None:
                continue
            data = zf.read(member)
            if hashlib.sha256(data).hexdigest() != entry["chksum_sha256"]:
                raise SystemExit(f"[setup] {wheel.name}: {prefix}{path} does not match its FILES.json hash")
            kept.append(entry)
            payload[path] = data
    files_json = json.dumps({**files, "files": kept}, indent=2).encode()
    manifest["file_manifest_file"]["chksum_sha256"] = hashlib.sha256(files_json).hexdigest()
    payload["FILES.json"] = files_json
    payload["MANIFEST.json"] = json.dumps(manifest, indent=2).encode()
    with tarfile.open(artifact, "w:gz") as tf:
        for entry in kept:
            if entry["ftype"] == "dir" and entry["name"] != ".":
                info = tarfile.TarInfo(str(entry["name"]))
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tf.addfile(info)
        for path, data in payload.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o644
            tf.addfile(info, fileobj=io.BytesIO(data))
    return artifact


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dest",
        type=Path,
        default=Path(sysconfig.get_paths()["purelib"]),
        help="directory that gets ansible_collections/ (default: this Python's site-packages)",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("SRIOV_DRA_CACHE", Path.home() / ".cache" / "sriov-dra")) / "pypi",
    )
    parser.add_argument("--requirements", type=Path, default=HERE / "requirements.yml")
    args = parser.parse_args(argv)
    galaxy = Path(sys.executable).parent / "ansible-galaxy"
    if not galaxy.exists():
        raise SystemExit(
            f"[setup] {galaxy} not found: run this script with the project venv's Python "
            "(`make setup` creates .venv, then `.venv/bin/python collection/install_requirements.py`)"
        )
    for name, version in sorted(requirements(args.requirements).items()):
        pin = PINS.get(name)
        if pin is None or pin[0] != version:
            raise SystemExit(
                f"[setup] {args.requirements} asks for {name} {version}; pin it in {__file__} first"
            )
        if installed_version(args.dest, name) == version:
            print(f"[setup] {name} {version} present")
            continue
        wheel = download_wheel(sys.executable, pin[1], pin[2], args.cache)
        with tempfile.TemporaryDirectory() as tmp:
            artifact = repack(wheel, name, version, Path(tmp))
            # Captured: installing into site-packages makes ansible-galaxy warn that the path "appears
            # to be part of the pip Ansible package"; that is the point here (ansible scans sys.path),
            # so the output is shown only when the install fails.
            done = subprocess.run(
                [
                    str(galaxy),
                    "collection",
                    "install",
                    "--offline",
                    "--force",
                    "-p",
                    str(args.dest),
                    str(artifact),
                ],
                check=False,
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise SystemExit(
                    f"[setup] ansible-galaxy could not install {artifact.name} into {args.dest}:\n"
                    f"{done.stdout}{done.stderr}"
                )
        if installed_version(args.dest, name) != version:
            raise SystemExit(f"[setup] {name} {version} did not install into {args.dest}")
        print(f"[setup] {name} {version} installed into {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
