"""LAB ONLY: a registry to push to, so the install guide's commands run against the lab as written.

docs/install.md pushes the product image to a registry the user names (``tools/push-image.sh``) and
installs by that reference. On the lab that registry is Debian's ``docker-registry`` (the distribution
registry) in the foreground, on an address this machine chooses: the host loopback for a test of the
push alone, the real nodes' host bridge (:class:`~sriov_dra_lab.real_node.NodeBridge`) for an install,
so each node's containerd can pull from it. It serves plain HTTP (a node is told so per registry:
:meth:`PushRegistry.hosts_toml`) and, with ``users``, asks for credentials (htpasswd, bcrypt) on every
request, pushes and pulls alike. Storage and config live in ``workdir``; the log in ``workdir/registry.log``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from sriov_dra_lab import processes

BINARY: Final = "docker-registry"
"""Debian's package of the distribution registry (``docker-registry serve <config>``)."""


class RegistryMissing(RuntimeError):
    """``docker-registry`` (or ``htpasswd`` for credentials) is not installed; the message names the package."""


def missing_tools(*, credentials: bool = False) -> list[str]:
    """The Debian packages a :class:`PushRegistry` needs that are not installed (empty when all are)."""
    need = {BINARY: "docker-registry", "skopeo": "skopeo"}
    if credentials:
        need["htpasswd"] = "apache2-utils"
    return [f"{package} ({tool})" for tool, package in need.items() if shutil.which(tool) is None]


@dataclass
class PushRegistry:
    """One registry process (module docstring). Shapes: ``users`` ``{name: password}``; ``port`` 0 picks one."""

    workdir: Path
    address: str = "127.0.0.1"
    port: int = 0
    users: Mapping[str, str] = field(default_factory=dict)
    process: processes.Process | None = field(default=None, init=False)

    @property
    def host(self) -> str:
        """``address:port``, the registry part of the image names pushed here."""
        return f"{self.address}:{self.port}"

    def start(self, timeout_s: float = 20.0) -> PushRegistry:
        """Write the config, start the registry and wait until ``/v2/`` answers.

        Raises: :class:`RegistryMissing`; ``processes.ProcessFailed`` when it exits or does not answer.
        """
        missing = missing_tools(credentials=bool(self.users))
        if missing:
            raise RegistryMissing("install the Debian packages " + ", ".join(missing))
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.port == 0:
            self.port = processes.free_port(self.address)
        config: dict[str, object] = {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(self.workdir / "storage")}},
            "http": {"addr": self.host, "secret": "sriov-dra-lab"},
        }
        if self.users:
            htpasswd = self.workdir / "htpasswd"
            htpasswd.write_text("")
            for user, password in self.users.items():
                subprocess.run(
                    ["htpasswd", "-B", "-b", str(htpasswd), user, password],
                    check=True,
                    capture_output=True,
                    timeout=30,
                )
            config["auth"] = {"htpasswd": {"realm": "sriov-dra-lab", "path": str(htpasswd)}}
        path = self.workdir / "config.yml"
        path.write_text(json.dumps(config, indent=2) + "\n")  # JSON is YAML
        self.process = processes.Process(
            name="registry", argv=[BINARY, "serve", str(path)], log_path=self.workdir / "registry.log"
        )
        self.process.start()
        processes.wait_until(
            f"the registry on {self.host} to answer", self._answers, timeout_s=timeout_s, process=self.process
        )
        return self

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.host}/v2/", timeout=2):
                return True
        except urllib.error.HTTPError as exc:
            return exc.code == 401  # up, and asking for credentials
        except OSError:
            return False

    def hosts_toml(self) -> str:
        """containerd's ``hosts.toml`` for this registry: plain HTTP, pull and resolve."""
        return f'server = "http://{self.host}"\n\n[host."http://{self.host}"]\n  capabilities = ["pull", "resolve"]\n'

    def stop(self) -> None:
        """Stop the registry (idempotent); its storage stays in ``workdir``."""
        if self.process is not None:
            self.process.stop()
            self.process = None
