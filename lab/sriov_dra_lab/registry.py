"""LAB ONLY: a read-only OCI registry mirror on the lab bridge, so the examples keep their image references.

The examples name ``quay.io/schseba/toolbox:latest`` with the default pull policy (``Always`` for
``:latest``), so a real kubelet pulls it on every Pod start; the lab has no registry access. As an
air-gapped cluster does, each real node's containerd is told (``hosts.toml`` under its registry
``config_path``) to resolve and pull that registry through a mirror: this server, listening on the
lab bridge's own address (never on a routed one), serving images assembled locally by
:mod:`sriov_dra_lab.images`.

The **toolbox stand-in** is the lab's busybox image under the example's name plus ``/bin/bash``, a
two-line ``#!/bin/sh`` script that runs busybox's shell (the examples run ``/bin/bash -c 'sleep
infinity'``; busybox has no ``bash`` applet). It is a stand-in for the example's image, not it.

Endpoints (OCI distribution-spec v1.1, pull only): ``GET /v2/``; ``GET``/``HEAD``
``/v2/<name>/manifests/<tag or digest>`` and ``/v2/<name>/blobs/<digest>``; anything else 404 with
the spec's error body. Start with :meth:`Mirror.start`, stop with :meth:`Mirror.stop`.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from http import server
from typing import Final

from sriov_dra_lab import images

TOOLBOX_IMAGE: Final = "quay.io/schseba/toolbox:latest"
"""The image the three examples name; served as the toolbox stand-in."""
BASH_SHIM: Final = b'#!/bin/sh\nexec /bin/sh "$@"\n'


def toolbox_spec() -> images.ImageSpec:
    """The toolbox stand-in (module docstring). Raises: ``images.ImageError`` without busybox-static."""
    base = images.busybox_spec()
    files = (*(f for f in base.files if f.path != "bin/bash"), images.FileEntry("bin/bash", BASH_SHIM))
    return images.ImageSpec(name=TOOLBOX_IMAGE, files=files, cmd=("sh",))


def split_reference(name: str) -> tuple[str, str, str]:
    """``registry/repo/path:tag`` → (registry, repository, tag); the tag defaults to ``latest``.

    Raises: ``ValueError`` when the name has no registry part (``quay.io/...``): a mirror serves
    one registry's names.
    """
    host, sep, rest = name.partition("/")
    if not sep or ("." not in host and ":" not in host):
        raise ValueError(f"image {name!r} names no registry (expected e.g. quay.io/org/image:tag)")
    repo, colon, tag = rest.rpartition(":")
    if not colon or "/" in tag:
        repo, tag = rest, "latest"
    return host, repo, tag


@dataclass
class _Image:
    manifest_digest: str
    blobs: dict[str, bytes]


def _unpack(spec: images.ImageSpec) -> _Image:
    data, digest = images.layout_archive(spec)
    blobs: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            if member.name.startswith("blobs/sha256/"):
                f = tar.extractfile(member)
                if f is not None:
                    blobs["sha256:" + member.name.rsplit("/", 1)[1]] = f.read()
    return _Image(digest, blobs)


@dataclass
class Mirror:
    """The mirror (module docstring). Shapes: ``address`` an IPv4 address of the lab bridge; ``port`` 0 picks one."""

    address: str
    specs: Sequence[images.ImageSpec]
    port: int = 0
    registries: set[str] = field(default_factory=set, init=False)
    """The registries whose names it serves (each node's containerd mirrors exactly these)."""
    _images: dict[tuple[str, str], _Image] = field(default_factory=dict, init=False)
    _server: server.ThreadingHTTPServer | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        """``http://<address>:<port>`` (after :meth:`start`)."""
        return f"http://{self.address}:{self.port}"

    def start(self) -> Mirror:
        """Assemble the images and serve them in a daemon thread. Raises: ``OSError`` when the port is taken."""
        for spec in self.specs:
            host, repo, tag = split_reference(spec.name)
            self.registries.add(host)
            self._images[(repo, tag)] = _unpack(spec)
        mirror = self

        class Handler(server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # quiet: the lab prints progress only
                return

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def do_GET(self) -> None:
                self._answer(body=True)

            def _answer(self, *, body: bool) -> None:
                status, media, data = mirror.lookup(self.path.split("?", 1)[0])
                self.send_response(status)
                self.send_header("Content-Type", media)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Docker-Distribution-API-Version", "registry/2.0")
                if status == 200 and data:
                    self.send_header("Docker-Content-Digest", "sha256:" + hashlib.sha256(data).hexdigest())
                self.end_headers()
                if body:
                    self.wfile.write(data)

        self._server = server.ThreadingHTTPServer((self.address, self.port), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="lab-registry", daemon=True).start()
        return self

    def lookup(self, path: str) -> tuple[int, str, bytes]:
        """(status, media type, body) for a request path (no query)."""
        if path in ("/v2", "/v2/"):
            return 200, "application/json", b"{}"
        for kind in ("/manifests/", "/blobs/"):
            if path.startswith("/v2/") and kind in path:
                repo, _, ref = path[4:].rpartition(kind)
                found = self._find(repo, ref, manifest=kind == "/manifests/")
                if found is not None:
                    return found
        code = "MANIFEST_UNKNOWN" if "/manifests/" in path else "BLOB_UNKNOWN"
        error = {"errors": [{"code": code, "message": f"{path} is not served by the lab mirror"}]}
        return 404, "application/json", json.dumps(error).encode()

    def _find(self, repo: str, ref: str, *, manifest: bool) -> tuple[int, str, bytes] | None:
        for (name, tag), image in self._images.items():
            if name != repo:
                continue
            if manifest and ref in (tag, image.manifest_digest):
                return 200, images.MEDIA_MANIFEST, image.blobs[image.manifest_digest]
            if not manifest and ref in image.blobs:
                return 200, "application/octet-stream", image.blobs[ref]
        return None

    def hosts_toml(self, registry: str) -> str:
        """containerd's ``hosts.toml`` for ``registry``: resolve and pull through this mirror only."""
        return f'server = "https://{registry}"\n\n[host."{self.url}"]\n  capabilities = ["pull", "resolve"]\n'

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
