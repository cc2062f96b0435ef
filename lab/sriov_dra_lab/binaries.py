"""Where the pinned third-party binaries live once ``tools/build-binaries.sh`` has built them.

Owns the mapping from a binary name to its path in the build cache
(``${SRIOV_DRA_CACHE:-~/.cache/sriov-dra}/<component>/<version>/bin``), reading the versions from
``tools/versions.env`` in the source tree. ``SRIOV_DRA_BINDIR`` overrides everything with one
directory (for a cluster whose binaries come from elsewhere). Never builds anything itself.
"""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from sriov_dra_lab import paths

REPO_ROOT = paths.REPO
VERSIONS_FILE = REPO_ROOT / "tools" / "versions.env"

#: Which component builds which binary (mirrors tools/build-binaries.sh).
COMPONENTS: dict[str, tuple[str, str]] = {
    "kube-apiserver": ("kubernetes", "KUBERNETES_VERSION"),
    "kube-controller-manager": ("kubernetes", "KUBERNETES_VERSION"),
    "kube-scheduler": ("kubernetes", "KUBERNETES_VERSION"),
    "kubectl": ("kubernetes", "KUBERNETES_VERSION"),
    "etcd": ("etcd", "ETCD_VERSION"),
    "multus": ("multus", "MULTUS_VERSION"),
    "multus-shim": ("multus", "MULTUS_VERSION"),
    "multus-daemon": ("multus", "MULTUS_VERSION"),
    "host-local": ("cni-plugins", "CNI_PLUGINS_VERSION"),
    "static": ("cni-plugins", "CNI_PLUGINS_VERSION"),
    "tuning": ("cni-plugins", "CNI_PLUGINS_VERSION"),
    "bridge": ("cni-plugins", "CNI_PLUGINS_VERSION"),
    "loopback": ("cni-plugins", "CNI_PLUGINS_VERSION"),
    "macvlan": ("cni-plugins", "CNI_PLUGINS_VERSION"),
    "host-device": ("cni-plugins", "CNI_PLUGINS_VERSION"),
    "ptp": ("cni-plugins", "CNI_PLUGINS_VERSION"),
    "whereabouts": ("whereabouts", "WHEREABOUTS_VERSION"),
    "kubelet": ("kubelet", "KUBERNETES_VERSION"),
    "containerd": ("containerd", "CONTAINERD_VERSION"),
    "containerd-shim-runc-v2": ("containerd", "CONTAINERD_VERSION"),
    "ctr": ("containerd", "CONTAINERD_VERSION"),
    "crictl": ("crictl", "CRICTL_VERSION"),
    "pause": ("pause", "PAUSE_VERSION"),
    "sriov": ("sriov-cni", "SRIOV_CNI_VERSION"),
    "dra-driver-sriov": ("dra-driver-sriov", "DRA_DRIVER_SRIOV_VERSION"),
}


class BinaryMissing(FileNotFoundError):
    """A pinned binary has not been built; the message says which command builds it."""


@dataclass(frozen=True)
class Versions:
    """The pinned versions read from ``tools/versions.env`` (``NAME=value`` lines)."""

    values: dict[str, str]

    @classmethod
    def load(cls, path: Path = VERSIONS_FILE) -> Versions:
        """Parse ``path``; blank lines and ``#`` comments are ignored.

        Raises: ``FileNotFoundError`` if the file is absent; ``ValueError`` naming the line
        number of a line that is not ``NAME=value``.
        """
        values: dict[str, str] = {}
        for lineno, raw in enumerate(path.read_text().splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, sep, value = line.partition("=")
            if not sep or not name.isidentifier() or not value:
                raise ValueError(f"{path}:{lineno}: expected NAME=value, got {raw!r}")
            values[name] = value
        return cls(values)


def cache_root() -> Path:
    """The build cache root: ``$SRIOV_DRA_CACHE`` or ``~/.cache/sriov-dra``."""
    return Path(os.environ.get("SRIOV_DRA_CACHE", Path.home() / ".cache" / "sriov-dra"))


def bin_dir(component: str, versions: Versions | None = None) -> Path:
    """The bin directory of one component (``kubernetes``, ``etcd``, ``multus``, ...)."""
    vers = versions or Versions.load()
    var = next(v for (c, v) in COMPONENTS.values() if c == component)
    return cache_root() / component / vers.values[var] / "bin"


def find(name: str, versions: Versions | None = None) -> Path:
    """Return the path of the pinned binary ``name``.

    Raises: ``KeyError`` for a name this project does not build; :class:`BinaryMissing` when it
    has not been built yet (the message names ``make setup``).
    """
    override = os.environ.get("SRIOV_DRA_BINDIR")
    if override:
        path = Path(override) / name
    else:
        component, var = COMPONENTS[name]
        vers = versions or Versions.load()
        path = cache_root() / component / vers.values[var] / "bin" / name
    if not os.access(path, os.X_OK):
        raise BinaryMissing(
            f"{name} not found at {path}; build the pinned binaries with `make setup` "
            f"(or `bash tools/build-binaries.sh`)"
        )
    return path


def install(source: Path, dest: Path) -> None:
    """Install binary ``source`` (from :func:`find`) as ``dest``: a hard link (a copy across file systems).

    Never a symlink into the build cache: a node's CNI bin dir holds real files, as on a real node,
    because thick Multus's daemon looks its delegates up inside its container, which mounts only the
    node's CNI bin dir (it runs them chrooted into the node's root).
    Raises: ``OSError`` (``dest`` exists, ``source`` is missing).
    """
    try:
        os.link(source, dest)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        shutil.copy2(source, dest)
