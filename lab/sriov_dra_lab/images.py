"""LAB ONLY: the container images a real lab node runs, written locally as OCI image layout archives.

The lab has no registry access, so its images are assembled from files already on the machine:

- the **pause image** (the sandbox image containerd pins): ``/pause``, the static binary built from
  ``tools/pause.c`` (``tools/build-binaries.sh pause``);
- the **busybox image** (the workload image of the tests): Debian's ``busybox-static`` binary as
  ``/bin/busybox`` with one link per applet (``/bin/sh``, ``/bin/sleep``, ``/bin/ip``, ...).

Each is one uncompressed tar layer, an image config and a manifest, in an OCI image layout
(``oci-layout``, ``index.json``, ``blobs/sha256/...``) packed as a tar, with the image name in the
index's ``io.containerd.image.name`` annotation: exactly what ``ctr images import`` reads.
Source: OCI image-spec v1.1 (image layout, manifest, config, descriptor media types).

The archives are deterministic (fixed mtimes, sorted entries), so a given binary always gives the
same digests.

The **built images** are the ones the product and Multus ship, built by ``tools/build-image.sh``
(``make setup``) and listed in ``<cache>/image/images.json`` (:func:`built_images`): the sriov-dra
image from ``collection/image/Containerfile`` and Multus thin and thick, assembled locally and named
under ``sriov-dra.local/`` (upstream's exact ``name:tag`` would name a different digest anywhere else).
:func:`import_built` loads one into a node's containerd under its name and under
``<repository>@<digest>``, so a Pod that references it by digest (as the roles render it) resolves
locally.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sriov_dra_lab import binaries

PAUSE_IMAGE: Final = "sriov-dra.local/lab/pause:1"
"""The sandbox image every real lab node pins (containerd ``pinned_images.sandbox``)."""
BUSYBOX_IMAGE: Final = "sriov-dra.local/lab/busybox:1"
"""The workload image of the real-node tests; Pods use ``imagePullPolicy: Never``."""
BUSYBOX: Final = Path("/bin/busybox")
"""Debian's ``busybox-static`` (statically linked, so it runs in an image without a libc)."""

MEDIA_MANIFEST: Final = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG: Final = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER: Final = "application/vnd.oci.image.layer.v1.tar"
_EPOCH: Final = 0


class ImageError(RuntimeError):
    """An image cannot be assembled; the message names the missing file and the package or command that provides it."""


@dataclass(frozen=True)
class FileEntry:
    """One file of a layer: its path in the image (no leading ``/``), contents and mode; or a symlink."""

    path: str
    data: bytes = b""
    mode: int = 0o755
    link: str = ""


@dataclass(frozen=True)
class ImageSpec:
    """What goes into one image: its name, layer files and config (``Entrypoint``/``Cmd``/``Env``)."""

    name: str
    files: tuple[FileEntry, ...]
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[str, ...] = ("PATH=/bin",)


def _layer(files: Sequence[FileEntry]) -> bytes:
    buf = io.BytesIO()
    dirs: set[str] = set()
    for entry in files:
        parts = entry.path.split("/")[:-1]
        dirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in sorted(dirs):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, _EPOCH
            tar.addfile(info)
        for entry in sorted(files, key=lambda e: e.path):
            info = tarfile.TarInfo(entry.path)
            info.mtime = _EPOCH
            if entry.link:
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, entry.link, 0o777
                tar.addfile(info)
            else:
                info.size, info.mode = len(entry.data), entry.mode
                tar.addfile(info, io.BytesIO(entry.data))
    return buf.getvalue()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _descriptor(media: str, data: bytes, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    desc: dict[str, Any] = {"mediaType": media, "digest": _digest(data), "size": len(data)}
    if annotations:
        desc["annotations"] = dict(annotations)
    return desc


def _dump(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def layout_archive(spec: ImageSpec) -> tuple[bytes, str]:
    """The OCI image layout of ``spec`` as tar bytes, and the manifest digest (``sha256:<hex>``).

    Shapes: the index holds one manifest descriptor annotated with ``io.containerd.image.name``
    (= ``spec.name``) and ``org.opencontainers.image.ref.name`` (the tag). linux/amd64.
    """
    layer = _layer(spec.files)
    config: dict[str, Any] = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {"Env": list(spec.env)},
        "rootfs": {"type": "layers", "diff_ids": [_digest(layer)]},
    }
    if spec.entrypoint:
        config["config"]["Entrypoint"] = list(spec.entrypoint)
    if spec.cmd:
        config["config"]["Cmd"] = list(spec.cmd)
    config_bytes = _dump(config)
    manifest = _dump(
        {
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": _descriptor(MEDIA_CONFIG, config_bytes),
            "layers": [_descriptor(MEDIA_LAYER, layer)],
        }
    )
    tag = spec.name.rsplit(":", 1)[1] if ":" in spec.name.rsplit("/", 1)[-1] else "latest"
    index = _dump(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                _descriptor(
                    MEDIA_MANIFEST,
                    manifest,
                    {"io.containerd.image.name": spec.name, "org.opencontainers.image.ref.name": tag},
                )
                | {"platform": {"architecture": "amd64", "os": "linux"}}
            ],
        }
    )
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, _EPOCH
            tar.addfile(info, io.BytesIO(data))

        add("oci-layout", _dump({"imageLayoutVersion": "1.0.0"}))
        add("index.json", index)
        for blob in (layer, config_bytes, manifest):
            add(f"blobs/sha256/{hashlib.sha256(blob).hexdigest()}", blob)
    return out.getvalue(), _digest(manifest)


def pause_spec(pause_binary: Path) -> ImageSpec:
    """The pause image: ``/pause`` from ``pause_binary``. Raises: :class:`ImageError` when it is missing."""
    try:
        data = pause_binary.read_bytes()
    except OSError as exc:
        raise ImageError(
            f"cannot read the pause binary {pause_binary}: {exc}; build it with `bash tools/build-binaries.sh pause`"
        ) from exc
    return ImageSpec(name=PAUSE_IMAGE, files=(FileEntry("pause", data),), entrypoint=("/pause",))


def busybox_applets(busybox: Path = BUSYBOX) -> list[str]:
    """The applet names ``busybox --list`` prints. Raises: :class:`ImageError` when it cannot run."""
    try:
        proc = subprocess.run(
            [str(busybox), "--list"], capture_output=True, text=True, check=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ImageError(f"cannot run {busybox} --list: {exc}; install Debian's busybox-static") from exc
    return sorted({a for a in proc.stdout.split() if a and "/" not in a and a != "busybox"})


def busybox_spec(busybox: Path = BUSYBOX) -> ImageSpec:
    """The busybox image: ``/bin/busybox`` plus a symlink per applet, ``Cmd ["sh"]``.

    Raises: :class:`ImageError` when ``busybox`` is missing or is not statically linked (Debian's
    ``busybox`` package is dynamic; ``busybox-static`` is needed).
    """
    try:
        data = busybox.read_bytes()
    except OSError as exc:
        raise ImageError(f"cannot read {busybox}: {exc}; install Debian's busybox-static") from exc
    if b"/lib64/ld-linux" in data[:4096] or b"ld-linux-x86-64.so" in data[:65536]:
        raise ImageError(
            f"{busybox} is dynamically linked; install Debian's busybox-static instead of busybox"
        )
    files = [FileEntry("bin/busybox", data)]
    files += [FileEntry(f"bin/{a}", link="busybox") for a in busybox_applets(busybox)]
    files.append(FileEntry("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n", mode=0o644))
    files.append(FileEntry("etc/group", b"root:x:0:\n", mode=0o644))
    return ImageSpec(name=BUSYBOX_IMAGE, files=tuple(files), cmd=("sh",))


def write_archive(spec: ImageSpec, directory: Path) -> tuple[Path, str]:
    """Write ``spec``'s layout archive as ``<directory>/<last name part>.oci.tar``; return (path, manifest digest)."""
    data, digest = layout_archive(spec)
    directory.mkdir(parents=True, exist_ok=True)
    base = spec.name.rsplit("/", 1)[-1].replace(":", "-")
    path = directory / f"{base}.oci.tar"
    path.write_bytes(data)
    return path, digest


# --------------------------------------------------------------------------- built images
PRODUCT: Final = "sriov-dra"
"""Key of the product image (``collection/image/Containerfile``) in :func:`built_images`."""
MULTUS_THIN: Final = "multus-thin"
"""Key of Multus thin (``sriov-dra.local/multus-cni:<version>``, ``/thin_entrypoint``)."""
MULTUS_THICK: Final = "multus-thick"
"""Key of Multus thick (``...multus-cni:<version>-thick``, ``/usr/src/multus-cni/bin/multus-daemon``)."""
BUILD_HINT: Final = "build them with `make setup` (or `bash tools/build-image.sh`)"


@dataclass(frozen=True)
class BuiltImage:
    """One image ``tools/build-image.sh`` built: ``name`` ``repository:tag``, ``digest`` of its manifest
    (``sha256:<64 hex>``), ``archive`` the OCI archive (``oci-archive`` transport) holding it."""

    key: str
    name: str
    digest: str
    archive: Path

    @property
    def repository(self) -> str:
        """``name`` without its tag."""
        head, sep, tail = self.name.rpartition(":")
        return head if sep and "/" not in tail else self.name

    @property
    def reference(self) -> str:
        """``repository:tag@sha256:<hex>``, the form the roles require (``*_image`` pinned by digest)."""
        return f"{self.name}@{self.digest}"

    @property
    def digest_name(self) -> str:
        """``repository@sha256:<hex>``: the name containerd's CRI looks a digest reference up by."""
        return f"{self.repository}@{self.digest}"


def built_index() -> Path:
    """``<cache>/image/images.json``, the index ``tools/build-image.sh`` writes last."""
    return binaries.cache_root() / "image" / "images.json"


def built_images(index: Path | None = None) -> dict[str, BuiltImage]:
    """The images ``tools/build-image.sh`` built, by key (:data:`PRODUCT`, :data:`MULTUS_THIN`, ...).

    Shapes: the index is ``{"images": [{"key", "name", "digest", "archive"}, ...]}``.
    Raises: :class:`ImageError` naming the index or archive when it is missing or malformed, and
    how to build it.
    """
    path = index or built_index()
    try:
        doc = json.loads(path.read_text())
        entries = doc["images"]
        found = {
            e["key"]: BuiltImage(key=e["key"], name=e["name"], digest=e["digest"], archive=Path(e["archive"]))
            for e in entries
        }
    except FileNotFoundError as exc:
        raise ImageError(f"no built images: {path} does not exist; {BUILD_HINT}") from exc
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ImageError(f"cannot read the built-image index {path}: {exc!r}; {BUILD_HINT}") from exc
    for image in found.values():
        if not image.digest.startswith("sha256:") or len(image.digest) != 71:
            raise ImageError(f"{path}: image {image.name} has digest {image.digest!r}, not sha256:<64 hex>")
        if not image.archive.is_file():
            raise ImageError(
                f"{path}: the archive of {image.name} ({image.archive}) is missing; {BUILD_HINT}"
            )
    return found


Ctr = Callable[..., subprocess.CompletedProcess[str]]
"""``ctr`` against one containerd in the ``k8s.io`` namespace: ``ctr(*args, timeout_s=...)``
(:meth:`sriov_dra_lab.real_node.RealNode.ctr`)."""


def import_built(ctr: Ctr, image: BuiltImage) -> None:
    """Import ``image``'s archive into a containerd and name it ``image.name`` and ``image.digest_name``.

    The second name is what a pull by digest creates and what the CRI resolves a reference
    ``repository[:tag]@sha256:<hex>`` to (containerd 2.2 ``LocalResolve`` drops the tag of a
    digested reference); ``ctr images import`` makes only the first. Idempotent.
    Raises: :class:`ImageError` with ctr's message when the import or the tag fails, or when the
    imported manifest is not ``image.digest``.
    """
    done = ctr("images", "import", "--local", str(image.archive), timeout_s=300)
    if done.returncode != 0:
        raise ImageError(f"importing {image.archive} ({image.name}) failed: {done.stderr.strip()}")
    listed = ctr("images", "ls", "-q", f"name=={image.name}", timeout_s=60)
    tagged = ctr("images", "tag", "--force", image.name, image.digest_name, timeout_s=60)
    if tagged.returncode != 0:
        raise ImageError(f"naming {image.name} {image.digest_name} failed: {tagged.stderr.strip()}")
    check = ctr("images", "check", f"name=={image.digest_name}", timeout_s=60)
    if image.name not in listed.stdout or image.digest not in check.stdout:
        raise ImageError(
            f"{image.archive} did not import as {image.name} with manifest {image.digest} "
            f"(ctr images check: {check.stdout.strip() or check.stderr.strip()}); rebuild with "
            "`bash tools/build-image.sh --force`"
        )
