"""The realvf tier's QEMU guest: real kernel SR-IOV VFs of two emulated ``igb`` NICs.

Host side of the tier (tests/realvf/conftest.py drives it once per pytest session):

- :func:`locate` finds what ``make realvf-setup`` (tools/realvf-setup.sh) installed or fetched: QEMU from
  bookworm-backports, busybox-static, squashfs-tools, cpio and the pinned guest kernel unpacked in
  ``<cache>/realvf/<kernel abi>/``; anything missing is :class:`Unavailable` with the fix;
- :func:`build_initramfs` packs busybox, :data:`INIT_SCRIPT` and the kernel modules of the kernel's
  ``load-order.txt``; :func:`build_runtime_image` packs the Python runtime (the venv's base
  prefix), the repository's venv and the shared libraries they and the host's iproute2 ``ip`` need
  into a read-only lz4 squashfs. Both are cached under ``<cache>/realvf/images/`` keyed on their
  inputs; :func:`build_run_image` packs the repository alone (a few MB, every session) with the
  session's run script;
- :func:`choose_accelerator` uses KVM only when ``/dev/kvm`` can boot this kernel (probed once per
  host kernel, QEMU and guest kernel, result cached), TCG otherwise, and says why;
- :func:`run_guest` boots the guest (two ``pxb-pcie`` buses 0x20/NUMA 0 and 0x40/NUMA 1, a root
  port and an ``igb`` each, ``intel-iommu``, ``-smp 1``), retries a boot that never prints
  :data:`READY` once, runs pytest on ``tests/realvf/guest`` inside it and returns the guest's
  junit XML, read from its second serial port.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.realvf import kubelet_payload

from sriov_dra_lab import binaries, processes

REPO = Path(__file__).resolve().parents[2]
GUEST_TESTS = Path(__file__).resolve().parent / "guest"
VERSIONS_ENV = REPO / "tools" / "versions.env"

READY = "REALVF-READY"
"""Printed by the run script once the runtime is mounted, right before pytest starts."""
PROBE_OK = "REALVF-PROBE-OK"
EXIT_RE = re.compile(r"REALVF-PYTEST-EXIT (\d+)")
RESULTS_BEGIN = "REALVF-RESULTS-BEGIN"
RESULTS_END = "REALVF-RESULTS-END"

BOOT_CPU_S = 60.0
"""QEMU CPU seconds a boot may use before :data:`READY`: a quiet boot takes 10–15 s of QEMU CPU
under TCG here; a guest spinning past this is hung. CPU time, not wall time, because on a shared,
loaded machine QEMU gets a fraction of a core and a healthy boot then takes minutes of wall time."""
BOOT_WALL_S = 300.0
"""Wall-time cap for a boot (a guest hung idle uses no CPU)."""
RUN_CPU_S = 700.0
"""QEMU CPU seconds from :data:`READY` to power-off (pytest start, tests, results): 140–170 s on a quiet
machine. Guest tests that wait on the host (its control plane, Multus reading a Pod) keep the guest's
CPU busy while they wait, so a loaded host costs QEMU CPU too: one CI run spent the earlier 400 s budget
with 16 of 35 tests done and still progressing. The wall-time cap below still ends a hung guest."""
RUN_WALL_S = 1200.0
PROBE_TIMEOUT_S = 40.0
RECIPE = "1"
"""Bump when an image recipe below changes in a way its inputs do not show."""

SERIAL_RUNTIME = "realvf-runtime"
SERIAL_RUN = "realvf-run"
RUN_SCRIPT = ".realvf-run.sh"

# PID 1 of the guest (busybox sh). Loads the modules, finds the two disks by serial, mounts them
# and hands over to the session's run script on the per-run image.
INIT_SCRIPT = f"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
echo "realvf-init: kernel $(uname -r), $(cat /proc/cmdline)"
while read -r m; do insmod "$m" || echo "realvf-init: insmod $m failed"; done < /load-order.txt
if grep -q realvf.probe /proc/cmdline; then echo {PROBE_OK}; poweroff -f; fi
rt=""; run=""; n=0
while [ -z "$rt" ] || [ -z "$run" ]; do
  for d in /sys/block/vd*; do
    [ -e "$d/serial" ] || continue
    case "$(cat "$d/serial")" in
      {SERIAL_RUNTIME}) rt=/dev/${{d##*/}} ;;
      {SERIAL_RUN}) run=/dev/${{d##*/}} ;;
    esac
  done
  n=$((n+1)); [ $n -gt 100 ] && {{ echo "realvf-init: disks not found"; poweroff -f; }}
  [ -n "$rt" ] && [ -n "$run" ] || sleep 0.1
done
mkdir -p /mnt/rt /mnt/run
mount -t squashfs -o ro "$rt" /mnt/rt && mount -t squashfs -o ro "$run" /mnt/run \\
  || {{ echo "realvf-init: mounting the images failed"; poweroff -f; }}
exec /bin/sh /mnt/run/{RUN_SCRIPT}
"""


class Unavailable(Exception):
    """A part of the tier is missing; the message names it and the fix."""


@dataclass(frozen=True)
class Parts:
    """Host binaries and the unpacked guest kernel the tier runs with."""

    qemu: Path
    qemu_version: str
    busybox: Path
    mksquashfs: Path
    cpio: Path
    ip: Path
    kernel_abi: str
    kernel_dir: Path

    @property
    def vmlinuz(self) -> Path:
        return self.kernel_dir / "boot" / f"vmlinuz-{self.kernel_abi}"


@dataclass(frozen=True)
class Accelerator:
    """``name`` is ``kvm`` or ``tcg``; ``reason`` says why this one was chosen."""

    name: str
    reason: str


@dataclass
class GuestRun:
    """Outcome of one guest session (see :func:`run_guest`)."""

    junit: bytes
    pytest_exit: int
    boots: int
    boot_s: float
    total_s: float
    qemu_cpu_s: float
    console: Path
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class GuestResult:
    """One guest test function's result; ``outcome`` is passed, failed or skipped."""

    outcome: str
    message: str


def cache_dir() -> Path:
    """``<SRIOV_DRA_CACHE or ~/.cache/sriov-dra>/realvf``."""
    base = os.environ.get("SRIOV_DRA_CACHE") or str(Path.home() / ".cache" / "sriov-dra")
    return Path(base) / "realvf"


def read_versions(path: Path = VERSIONS_ENV) -> dict[str, str]:
    """``KEY=value`` lines of tools/versions.env (comments and blanks ignored)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def locate() -> Parts:
    """Find every host part; raise :class:`Unavailable` naming the first missing one and the fix."""
    fix = "run make realvf-setup (tools/realvf-setup.sh)"
    versions = read_versions()
    abi = versions.get("REALVF_KERNEL_ABI", "")
    if not abi:
        raise Unavailable(f"REALVF_KERNEL_ABI is not set in {VERSIONS_ENV}")
    found: dict[str, Path] = {}
    for name, candidates in (
        ("qemu-system-x86_64", ("qemu-system-x86_64",)),
        ("busybox", ("/bin/busybox", "/usr/bin/busybox")),
        ("mksquashfs", ("mksquashfs",)),
        ("cpio", ("cpio",)),
        ("ip", ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip")),
    ):
        path = next((shutil.which(c) for c in candidates if shutil.which(c)), None)
        if path is None:
            raise Unavailable(f"{name} not found; {fix}")
        found[name] = Path(path)
    kdir = cache_dir() / abi
    stamp = kdir / ".stamp"
    if not stamp.is_file() or not (kdir / "load-order.txt").is_file():
        raise Unavailable(f"guest kernel {abi} is not unpacked in {kdir}; {fix}")
    if versions.get("REALVF_KERNEL_VERSION", "?") not in stamp.read_text():
        raise Unavailable(f"{kdir} holds another build than tools/versions.env pins; {fix}")
    out = subprocess.run(
        [str(found["qemu-system-x86_64"]), "--version"], capture_output=True, text=True, check=False
    )
    version = out.stdout.splitlines()[0].strip() if out.returncode == 0 and out.stdout else ""
    if not version:
        raise Unavailable(f"{found['qemu-system-x86_64']} --version failed: {out.stderr.strip()}; {fix}")
    return Parts(
        qemu=found["qemu-system-x86_64"],
        qemu_version=version,
        busybox=found["busybox"],
        mksquashfs=found["mksquashfs"],
        cpio=found["cpio"],
        ip=found["ip"],
        kernel_abi=abi,
        kernel_dir=kdir,
    )


def _key(*parts: object) -> str:
    digest = hashlib.sha256()
    for part in (RECIPE, *parts):
        digest.update(repr(part).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:20]


def _stat_key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return (str(path), st.st_size, st.st_mtime_ns)


def _images_dir() -> Path:
    path = cache_dir() / "images"
    path.mkdir(parents=True, exist_ok=True)
    return path


IMAGE_KEEP_S = 3 * 24 * 3600.0
"""Cached images unused for this long are deleted when another one is built (each clone's venv
path gives its own ~200 MB runtime image)."""


def _publish(tmp: Path, final: Path) -> Path:
    """Move a finished build into place atomically (a concurrent session may build the same),
    then delete the images nobody used for :data:`IMAGE_KEEP_S`."""
    os.replace(tmp, final)
    cutoff = time.time() - IMAGE_KEEP_S
    for old in final.parent.glob("*-*.*"):
        with contextlib.suppress(OSError):
            if old != final and old.is_file() and old.stat().st_mtime < cutoff:
                old.unlink()
    return final


def _reuse(path: Path) -> tuple[Path, bool]:
    """A cached image, marked as used now (its mtime is the last use, for the pruning above)."""
    with contextlib.suppress(OSError):
        os.utime(path)
    return path, True


def build_initramfs(parts: Parts) -> tuple[Path, bool]:
    """The guest's initramfs (newc cpio, uncompressed) and whether it came from the cache.

    Holds busybox, :data:`INIT_SCRIPT`, the modules of ``load-order.txt`` (dependencies first) and
    the mount points the run script uses. Key: the init script, busybox, the kernel's stamp and
    module list.
    """
    order = (parts.kernel_dir / "load-order.txt").read_text().split()
    key = _key(INIT_SCRIPT, _stat_key(parts.busybox), (parts.kernel_dir / ".stamp").read_text(), order)
    final = _images_dir() / f"initramfs-{parts.kernel_abi}-{key}.cpio"
    if final.is_file():
        return _reuse(final)
    with tempfile.TemporaryDirectory(dir=_images_dir(), prefix=".initramfs.") as tmp:
        root = Path(tmp) / "root"
        for d in ("bin", "dev", "proc", "sys", "tmp", "run", "mnt", "root", "etc", "lib64"):
            (root / d).mkdir(parents=True)
        (root / "usr" / "lib" / "x86_64-linux-gnu").mkdir(parents=True)
        (root / "lib").symlink_to("usr/lib")
        (root / "lib64" / "ld-linux-x86-64.so.2").symlink_to("/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
        (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
        (root / "etc" / "group").write_text("root:x:0:\n")
        shutil.copy2(parts.busybox, root / "bin" / "busybox")
        init = root / "init"
        init.write_text(INIT_SCRIPT)
        init.chmod(0o755)
        modules = root / "modules"
        modules.mkdir()
        listed = []
        for rel in order:
            src = parts.kernel_dir / rel.lstrip("/")
            shutil.copy2(src, modules / src.name)
            listed.append(f"/modules/{src.name}")
        (root / "load-order.txt").write_text("\n".join(listed) + "\n")
        names = subprocess.run(["find", ".", "-print0"], cwd=root, capture_output=True, check=True).stdout
        out = Path(tmp) / "initramfs.cpio"
        with out.open("wb") as fh:
            subprocess.run(
                [str(parts.cpio), "--null", "-o", "-H", "newc", "--quiet", "--owner=0:0"],
                cwd=root,
                input=names,
                stdout=fh,
                check=True,
            )
        return _publish(out, final), False


def _shared_objects(dirs: Iterable[Path]) -> list[Path]:
    out = []
    for d in dirs:
        for dirpath, _dirnames, filenames in os.walk(d):
            out.extend(Path(dirpath) / f for f in filenames if ".so" in f and not f.endswith(".py"))
    return sorted(out)


_LDD_RE = re.compile(r"^\s*(?:\S+ => )?(/\S+) \(0x[0-9a-f]+\)$")


def library_closure(binaries: Sequence[Path], *, inside: Sequence[Path]) -> dict[str, Path]:
    """Shared libraries (``name -> real file``) that ``binaries`` load, outside ``inside``.

    Only the multiarch directories and the ``/lib64`` loader are expected; a library elsewhere
    raises :class:`Unavailable` naming it (the guest would not find it).
    """
    libs: dict[str, Path] = {}
    for chunk_start in range(0, len(binaries), 64):
        chunk = [str(b) for b in binaries[chunk_start : chunk_start + 64]]
        out = subprocess.run(["ldd", *chunk], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            m = _LDD_RE.match(line)
            if m is None:
                continue
            path = Path(m.group(1))
            if any(path.is_relative_to(i) for i in inside):
                continue
            real = path.resolve()
            if any(real.is_relative_to(i) for i in inside):
                continue
            parent = str(path.parent)
            if parent not in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64"):
                raise Unavailable(f"{chunk} needs {path}, outside the directories the guest mounts")
            libs[path.name] = real
    return libs


def _python_dirs() -> tuple[Path, Path]:
    """(base prefix of the running venv's Python, the venv) as real paths."""
    return Path(sys.base_prefix).resolve(), Path(sys.prefix)


BASE_PREFIX_EXCLUDES = (
    "lib/python3*/test",
    "lib/python3*/idlelib",
    "lib/python3*/tkinter",
    "lib/python3*/turtledemo",
    "lib/python3*/ensurepip",
    "lib/python3*/site-packages",
    "lib/python3*/config-*",
    "lib/*.a",
    "include",
    "share",
)


def build_runtime_image(parts: Parts) -> tuple[Path, bool]:
    """Read-only lz4 squashfs of the Python runtime, the venv and their shared libraries.

    Top level: ``<base prefix name>/`` (the venv's Python install), ``<venv name>/`` (the
    repository's venv) and ``sysroot/{lib,bin}`` (the libraries of the loader's multiarch directory they need,
    and the host's ``ip``). The run script bind-mounts them at their real paths.
    Key: the Python version and paths, the venv's top-level entries with their mtimes, ``ip``.
    Returns (path, from_cache).
    """
    base, venv = _python_dirs()
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    listing = sorted((p.name, p.stat().st_mtime_ns) for p in site.iterdir())
    key = _key(sys.version, str(base), str(venv), listing, _stat_key(parts.ip), BASE_PREFIX_EXCLUDES)
    final = _images_dir() / f"runtime-{key}.sqfs"
    if final.is_file():
        return _reuse(final)
    with tempfile.TemporaryDirectory(dir=_images_dir(), prefix=".runtime.") as tmp:
        sysroot = Path(tmp) / "sysroot"
        (sysroot / "lib").mkdir(parents=True)
        (sysroot / "bin").mkdir()
        binaries = [Path(sys.executable).resolve(), parts.ip, *_shared_objects([base / "lib", site])]
        for name, real in library_closure(binaries, inside=[base, venv]).items():
            shutil.copy2(real, sysroot / "lib" / name)
        shutil.copy2(parts.ip, sysroot / "bin" / "ip")
        out = Path(tmp) / "runtime.sqfs"
        excludes = [f"{base.name}/{e}" for e in BASE_PREFIX_EXCLUDES]
        _mksquashfs(parts, [base, venv, sysroot], out, excludes=excludes)
        return _publish(out, final), False


def _mksquashfs(
    parts: Parts,
    sources: Sequence[Path],
    out: Path,
    *,
    excludes: Sequence[str] = (),
    pseudo: Sequence[str] = (),
) -> None:
    argv = [str(parts.mksquashfs), *(str(s) for s in sources), str(out), "-noappend", "-quiet"]
    argv += ["-comp", "lz4", "-no-progress", "-all-root", "-processors", "1"]
    for p in pseudo:
        argv += ["-p", p]
    if excludes:
        argv += ["-wildcards", "-e", *excludes]
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise Unavailable(f"mksquashfs failed ({' '.join(argv[:6])} ...): {result.stderr.strip()[-800:]}")


HOST_FROM_GUEST = "10.0.2.2"
"""The host's loopback as the guest sees it through QEMU user networking."""
GUEST_MGMT_ADDRESS = "10.0.2.15/24"
GUEST_KUBE_DIR = ".realvf-kube"
"""Directory of the run image holding the guest's kubeconfig (``kubeconfig``) when the host runs an
API server for the session; the guest reads it from ``SRIOV_DRA_REALVF_KUBECONFIG``."""


def _mgmt_net_script(repo: Path, api_host: str) -> str:
    """Shell lines configuring the guest's virtio-net NIC, the API server's host name and the env."""
    return f"""mgmt=lo
for n in /sys/class/net/*; do
  [ "$(basename "$(readlink "$n/device/driver" 2>/dev/null)")" = virtio_net ] && mgmt=${{n##*/}}
done
ip link set lo up
ip link set "$mgmt" up && ip addr add {GUEST_MGMT_ADDRESS} dev "$mgmt" \\
  && ip route add default via {HOST_FROM_GUEST} || echo "realvf-run: management NIC setup failed"
echo "{HOST_FROM_GUEST} {api_host}" >> /etc/hosts
export SRIOV_DRA_REALVF_KUBECONFIG={repo}/{GUEST_KUBE_DIR}/kubeconfig
"""


def run_script(
    *,
    base: Path,
    venv: Path,
    repo: Path,
    pytest_args: Sequence[str],
    kernel: str,
    api_host: str | None = None,
    env: Mapping[str, str] | None = None,
) -> str:
    """The session's guest script: mounts at real paths, then pytest on tests/realvf/guest.

    With ``api_host`` (the API server's name in the guest's kubeconfig) it also brings up the
    management NIC (:func:`qemu_argv` ``mgmt_nic``) and maps ``api_host`` to :data:`HOST_FROM_GUEST`.
    ``env`` is exported to pytest.
    """
    args = " ".join(_sh_quote(a) for a in pytest_args)
    net = _mgmt_net_script(repo, api_host) if api_host else ""
    net += "".join(f"export {key}={_sh_quote(value)}\n" for key, value in (env or {}).items())
    return f"""set -u
export PATH=/bin
mkdir -p {base} {repo} /opt/realvf/bin /tmp/overlay/upper /tmp/overlay/work /run/netns /var
ln -s /run /var/run
mount --bind /mnt/rt/sysroot/lib /usr/lib/x86_64-linux-gnu
mount --bind /mnt/rt/sysroot/bin /opt/realvf/bin
mount --bind /mnt/rt/{base.name} {base}
mount -t overlay overlay -o lowerdir=/mnt/run,upperdir=/tmp/overlay/upper,workdir=/tmp/overlay/work {repo}
mount --bind /mnt/rt/{venv.name} {venv}
export HOME=/root USER=root LOGNAME=root LANG=C.UTF-8 PYTHONUNBUFFERED=1 TMPDIR=/tmp
export PATH={venv}/bin:/opt/realvf/bin:/bin
export SRIOV_DRA_REALVF_GUEST=1 PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 SRIOV_DRA_REALVF_KERNEL={kernel}
{net}cd {repo}
echo {READY}
{venv}/bin/python -m pytest {args}
rc=$?
echo "REALVF-PYTEST-EXIT $rc"
{{ echo {RESULTS_BEGIN}; base64 /tmp/realvf-junit.xml; echo {RESULTS_END}; }} > /dev/ttyS1
sync
poweroff -f
"""


def _sh_quote(text: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_./:=,+-]+", text):
        return text
    return "'" + text.replace("'", "'\\''") + "'"


REPO_EXCLUDES = (
    ".venv",
    ".git",
    ".lab",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    "*.tar.gz",
)


GUEST_CNI_DIR = ".realvf-cni"
"""Directory of the run image (under the repository's path in the guest) holding the pinned CNI
plugins the guest's CNI tests run (:data:`GUEST_CNI_PLUGINS`); the guest reads it as ``CNI_PATH``."""
GUEST_CNI_PLUGINS = ("host-local", "loopback", "multus", "sriov", "ptp")
GUEST_BIN_DIR = ".realvf-bin"
"""Directory of the run image holding the pinned upstream dra-driver-sriov and a pci.ids database."""
PCI_IDS = Path("/usr/share/misc/pci.ids")
"""Debian's ``pci.ids`` package (tools/realvf-setup.sh), which upstream dra-driver-sriov needs."""


def guest_binaries_pseudo() -> list[str]:
    """mksquashfs pseudo entries copying the built :data:`GUEST_CNI_PLUGINS`, dra-driver-sriov and
    pci.ids into the run image.

    A binary not built yet is left out: the guest test that needs it reports it missing.
    """
    out = [f"{GUEST_CNI_DIR} d 755 0 0", f"{GUEST_BIN_DIR} d 755 0 0"]
    for name in GUEST_CNI_PLUGINS:
        with contextlib.suppress(binaries.BinaryMissing):
            out.append(f"{GUEST_CNI_DIR}/{name} f 755 0 0 cat {binaries.find(name)}")
    with contextlib.suppress(binaries.BinaryMissing):
        out.append(f"{GUEST_BIN_DIR}/dra-driver-sriov f 755 0 0 cat {binaries.find('dra-driver-sriov')}")
    if PCI_IDS.is_file():
        out.append(f"{GUEST_BIN_DIR}/pci.ids f 644 0 0 cat {PCI_IDS}")
    return out


def pinned_binaries_note() -> str:
    """``sriov-cni <version> (<where it was built from>)`` for the tier's summary, or why it is missing."""
    versions = read_versions()
    version = versions.get("SRIOV_CNI_VERSION", "?")
    try:
        path = binaries.find("sriov")
    except binaries.BinaryMissing:
        return f"sriov-cni {version}: not built (make setup)"
    source = _read(path.parent / ".source").strip() or "the Go module proxy"
    return f"sriov-cni {version} ({source})"


def build_run_image(
    parts: Parts,
    workdir: Path,
    script: str,
    *,
    kubeconfig: Path | None = None,
    extra_pseudo: Sequence[str] = (),
) -> Path:
    """The per-session image: the repository (no venv, .git or caches), the run script, the
    pinned binaries of :func:`guest_binaries_pseudo` and the guest's ``kubeconfig`` if given."""
    script_path = workdir / "run.sh"
    script_path.write_text(script)
    out = workdir / "run.sqfs"
    pseudo = [f"{RUN_SCRIPT} f 755 0 0 cat {script_path}", ".venv d 755 0 0", *guest_binaries_pseudo()]
    if kubeconfig is not None:
        pseudo += [f"{GUEST_KUBE_DIR} d 700 0 0", f"{GUEST_KUBE_DIR}/kubeconfig f 600 0 0 cat {kubeconfig}"]
    pseudo += extra_pseudo
    _mksquashfs(parts, [REPO], out, excludes=REPO_EXCLUDES, pseudo=pseudo)
    return out


def qemu_argv(
    parts: Parts,
    *,
    accel: str,
    initramfs: Path,
    console: Path,
    results: Path | None,
    disks: Sequence[tuple[str, Path]] = (),
    append: str = "",
    mgmt_nic: bool = False,
    forward_ports: Sequence[int] = (),
) -> list[str]:
    """The guest's QEMU command line (two roots, two NUMA nodes, vIOMMU).

    ``mgmt_nic`` adds a virtio-net NIC on QEMU user networking (not one of the igb test NICs): the
    guest reaches the host's loopback as :data:`HOST_FROM_GUEST` through it, and the host's
    ``127.0.0.1:<port>`` reaches the guest's ``<port>`` for each of ``forward_ports``.
    """
    cmdline = f"console=ttyS0 intel_iommu=on tsc=reliable panic=-1 loglevel=4 rdinit=/init {append}".strip()
    argv = [str(parts.qemu), "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot"]
    argv += ["-machine", "q35", "-accel", accel, "-smp", "1", "-m", "1536"]
    argv += ["-object", "memory-backend-ram,id=mem0,size=1024M"]
    argv += ["-object", "memory-backend-ram,id=mem1,size=512M"]
    argv += ["-numa", "node,nodeid=0,cpus=0,memdev=mem0", "-numa", "node,nodeid=1,memdev=mem1"]
    argv += ["-device", "intel-iommu"]
    argv += ["-kernel", str(parts.vmlinuz), "-initrd", str(initramfs), "-append", cmdline]
    argv += ["-chardev", f"file,id=con,path={console}", "-serial", "chardev:con"]
    if results is not None:
        argv += ["-chardev", f"file,id=res,path={results}", "-serial", "chardev:res"]
    for serial, path in disks:
        argv += ["-drive", f"if=none,id={serial},file={path},format=raw,readonly=on"]
        argv += ["-device", f"virtio-blk-pci,drive={serial},serial={serial},bus=pcie.0"]
    for index, (bus_nr, numa) in enumerate(((0x20, 0), (0x40, 1))):
        argv += ["-device", f"pxb-pcie,id=pxb{index},bus_nr={bus_nr:#x},numa_node={numa},bus=pcie.0"]
        argv += ["-device", f"pcie-root-port,id=rp{index},bus=pxb{index},chassis={index + 1}"]
        argv += ["-netdev", f"user,id=igbnet{index},restrict=on"]
        argv += ["-device", f"igb,netdev=igbnet{index},bus=rp{index}"]
    if mgmt_nic:
        forwards = "".join(f",hostfwd=tcp:127.0.0.1:{port}-:{port}" for port in forward_ports)
        argv += ["-netdev", f"user,id=mgmt{forwards}", "-device", "virtio-net-pci,netdev=mgmt,bus=pcie.0"]
    return argv


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def choose_accelerator(parts: Parts, workdir: Path) -> Accelerator:
    """KVM when ``/dev/kvm`` boots this guest kernel to its init, else TCG; the reason either way.

    The probe (one short boot under KVM) runs once per host kernel, QEMU and guest kernel and is
    cached. This machine's ``/dev/kvm`` cannot run stock kernels ("KVM internal error").
    """
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return Accelerator("tcg", "no usable /dev/kvm")
    key = _key(os.uname().release, parts.qemu_version, parts.kernel_abi)
    cached = cache_dir() / f"accel-{key}.txt"
    if cached.is_file():
        name, _, reason = cached.read_text().partition("\n")
        return Accelerator(name.strip(), reason.strip() + " (probe cached)")
    initramfs, _ = build_initramfs(parts)
    console = workdir / "kvm-probe-console.log"
    proc = processes.Process(
        "qemu-kvm-probe",
        qemu_argv(
            parts, accel="kvm", initramfs=initramfs, console=console, results=None, append="realvf.probe=1"
        ),
        workdir / "kvm-probe-qemu.log",
        stop_grace_s=2.0,
    )
    proc.start()
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    verdict: Accelerator | None = None
    try:
        while time.monotonic() < deadline and verdict is None:
            qemu_log = _read(proc.log_path)
            if PROBE_OK in _read(console):
                verdict = Accelerator("kvm", "/dev/kvm booted the guest kernel")
            elif "KVM internal error" in qemu_log or "emulation failure" in qemu_log:
                verdict = Accelerator(
                    "tcg", "/dev/kvm cannot run this kernel (KVM internal error: emulation failure)"
                )
            elif not proc.running():
                line = (qemu_log.strip().splitlines() or ["no output"])[-1]
                verdict = Accelerator("tcg", f"QEMU with KVM exited: {line}")
            else:
                time.sleep(0.2)
    finally:
        proc.stop()
    if verdict is None:
        verdict = Accelerator(
            "tcg", f"the guest did not reach its init under KVM within {PROBE_TIMEOUT_S:.0f}s"
        )
    cached.write_text(f"{verdict.name}\n{verdict.reason}\n")
    return verdict


def run_guest(
    parts: Parts,
    accel: Accelerator,
    workdir: Path,
    *,
    pytest_args: Sequence[str],
    kubeconfig: Path | None = None,
    api_host: str = "",
    kubelet: Any = None,
) -> GuestRun:
    """Boot the guest, run pytest in it, return its junit XML (see module docstring).

    ``kubeconfig`` (naming its API server as ``api_host``, which the guest resolves to
    :data:`HOST_FROM_GUEST`) gives the guest a management NIC and that kubeconfig; ``kubelet``
    (``kubeapi.Kubelet``) adds what a real kubelet in the guest needs (``kubelet_payload``).

    A boot that does not print :data:`READY` within :data:`BOOT_CPU_S` of QEMU CPU time (or
    :data:`BOOT_WALL_S`) is killed and retried once; tests are never retried. Raises:
    ``processes.ProcessFailed`` with the serial log tail when the second boot fails too, or the
    run exceeds :data:`RUN_CPU_S` / :data:`RUN_WALL_S`, or the guest sent no results.
    """
    started = time.monotonic()
    initramfs, _ = build_initramfs(parts)
    runtime, _ = build_runtime_image(parts)
    base, venv = _python_dirs()
    args = [*pytest_args, "--junitxml=/tmp/realvf-junit.xml"]
    script = run_script(
        base=base,
        venv=venv,
        repo=REPO,
        pytest_args=args,
        kernel=parts.kernel_abi,
        api_host=api_host if kubeconfig is not None else None,
        env=kubelet_payload.env(kubelet) if kubelet is not None else None,
    )
    extra = kubelet_payload.pseudo(kubelet, workdir) if kubelet is not None else []
    run_image = build_run_image(parts, workdir, script, kubeconfig=kubeconfig, extra_pseudo=extra)
    notes: list[str] = []
    for boot in (1, 2):
        console = workdir / f"console-{boot}.log"
        results = workdir / f"results-{boot}.txt"
        proc = processes.Process(
            f"qemu-realvf-{boot}",
            qemu_argv(
                parts,
                accel=accel.name,
                initramfs=initramfs,
                console=console,
                results=results,
                disks=[(SERIAL_RUNTIME, runtime), (SERIAL_RUN, run_image)],
                mgmt_nic=kubeconfig is not None,
                forward_ports=[kubelet.port] if kubelet is not None else [],
            ),
            workdir / f"qemu-{boot}.log",
            stop_grace_s=3.0,
        )
        for stale in (console, results):
            stale.unlink(missing_ok=True)
        boot_start = time.monotonic()
        proc.start()
        try:
            waited = _wait_for(lambda c=console: READY in _read(c), proc, BOOT_WALL_S, BOOT_CPU_S)
            if waited is not None:
                notes.append(
                    f"boot {boot} did not reach {READY}: {waited} "
                    f"(QEMU {'running' if proc.running() else 'exited'}); serial log tail:\n"
                    + (processes.tail(console, 30) or "(nothing on the serial console yet)")
                )
                continue
            boot_s = time.monotonic() - boot_start
            boot_cpu = _cpu_s(proc)
            waited = _wait_for(lambda p=proc: not p.running(), proc, RUN_WALL_S, boot_cpu + RUN_CPU_S)
            if waited is not None:
                raise processes.ProcessFailed(
                    f"the guest did not finish after {READY}: {waited}; serial log "
                    f"tail ({console}):\n{processes.tail(console, 60)}"
                )
            cpu = last_cpu.get(id(proc), boot_cpu)
        finally:
            proc.stop()
        text = _read(console)
        exit_match = EXIT_RE.search(text)
        junit = _decode_results(_read(results))
        if exit_match is None or junit is None:
            raise processes.ProcessFailed(
                f"the guest powered off without {'a pytest exit status' if exit_match is None else 'results'}; "
                f"serial log tail ({console}):\n{processes.tail(console, 60)}"
            )
        return GuestRun(
            junit=junit,
            pytest_exit=int(exit_match.group(1)),
            boots=boot,
            boot_s=boot_s,
            total_s=time.monotonic() - started,
            qemu_cpu_s=cpu,
            console=console,
            notes=notes,
        )
    raise processes.ProcessFailed("the guest never booted (retried once):\n" + "\n".join(notes))


last_cpu: dict[int, float] = {}
"""Last CPU time read for a QEMU process (by ``id`` of its Process), kept after it exits."""


def _cpu_s(proc: processes.Process) -> float:
    """User + system CPU seconds of ``proc`` so far (the last value read once it has exited)."""
    try:
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        value = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return last_cpu.get(id(proc), 0.0)
    last_cpu[id(proc)] = value
    return value


def _wait_for(predicate: object, proc: processes.Process, wall_s: float, cpu_s: float) -> str | None:
    """Poll ``predicate``: None once true, else why the wait ended (QEMU exited, a budget spent)."""
    assert callable(predicate)
    start = time.monotonic()
    while True:
        if predicate():
            return None
        if not proc.running():
            return None if predicate() else "QEMU exited"
        used = _cpu_s(proc)
        if used > cpu_s:
            return f"QEMU used {used:.0f}s of CPU (budget {cpu_s:.0f}s)"
        if time.monotonic() - start > wall_s:
            return f"{wall_s:.0f}s of wall time passed (QEMU used {used:.0f}s of CPU)"
        time.sleep(0.25)


def _decode_results(text: str) -> bytes | None:
    begin, end = text.find(RESULTS_BEGIN), text.find(RESULTS_END)
    if begin < 0 or end < begin:
        return None
    payload = re.sub(r"\s+", "", text[begin + len(RESULTS_BEGIN) : end])
    with contextlib.suppress(ValueError):
        return base64.b64decode(payload, validate=True)
    return None


def guest_test_ids(folder: Path = GUEST_TESTS) -> list[str]:
    """``<file>::<function>`` of every ``test_*`` function in the guest folder's ``test_*.py``.

    Read from the source text (the guest modules need real VFs to import their fixtures' state),
    module-level functions only, sorted.
    """
    import ast

    ids = []
    for path in sorted(folder.glob("test_*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
                ids.append(f"{path.name}::{node.name}")
    return ids


def parse_junit(xml_bytes: bytes) -> dict[str, GuestResult]:
    """Per guest test function (``<file>::<function>``), the worst outcome of its cases.

    A parametrized function passes only if every case passed; messages of failed cases are joined.
    """
    root = ET.fromstring(xml_bytes)
    cases: dict[str, list[GuestResult]] = {}
    for case in root.iter("testcase"):
        classname = case.get("classname", "")
        module = classname.split(".")[-1]
        name = case.get("name", "").split("[", 1)[0]
        key = f"{module}.py::{name}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
                message = f"{child.tag}: {child.get('message', '')}\n{child.text or ''}".strip()
            elif child.tag == "skipped" and outcome != "failed":
                outcome = "skipped"
                message = child.get("message", "")
        cases.setdefault(key, []).append(GuestResult(outcome, f"{case.get('name')}: {message}"))
    merged: dict[str, GuestResult] = {}
    for key, results in cases.items():
        failed = [r.message for r in results if r.outcome == "failed"]
        skipped = [r.message for r in results if r.outcome == "skipped"]
        if failed:
            merged[key] = GuestResult("failed", "\n\n".join(failed))
        elif skipped:
            merged[key] = GuestResult("skipped", "\n".join(skipped))
        else:
            merged[key] = GuestResult("passed", "")
    return merged
