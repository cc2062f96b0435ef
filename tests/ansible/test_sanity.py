"""``ansible-test sanity`` on the built collection, from an ``ansible_collections/sriovnet/dra`` path.

Runs every sanity test but ``pslint`` (it needs PowerShell, which no package registry reachable
here provides; the collection has no PowerShell anyway). ``shellcheck`` runs only on shell
scripts, of which the collection has none. ansible-test creates one virtualenv per sanity test
and bootstraps pip in it with a script from a host these machines cannot reach; a private ``HOME``
(kept under the setup cache so the virtualenvs are reused) holds the stand-in
``tests/ansible/get_pip_standin.py`` where ansible-test looks for that script, and a pip config
with the same index settings as the project venv. Ignores: ``tests/ansible/sanity/ignore-2.19.txt``,
one reason per line.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from tests.ansible import collection_build
from tests.ansible.conftest import REPO, run

PIP_BOOTSTRAP_VERSION = "24_2"
SKIPPED = {"pslint": "needs PowerShell (pwsh), which is not installable from the registries reachable here"}


def _test_home() -> Path:
    cache = Path(os.environ.get("SRIOV_DRA_CACHE", Path.home() / ".cache" / "sriov-dra"))
    home = cache / "ansible-test-home"
    (home / ".ansible" / "test" / "cache").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(
        REPO / "tests" / "ansible" / "get_pip_standin.py",
        home / ".ansible" / "test" / "cache" / f"get_pip_{PIP_BOOTSTRAP_VERSION}.py",
    )
    conf = home / ".config" / "pip" / "pip.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    settings = sorted(
        (k[4:].lower().replace("_", "-"), v) for k, v in os.environ.items() if k.startswith("PIP_")
    )
    conf.write_text("[global]\n" + "".join(f"{k} = {v}\n" for k, v in settings))
    return home


def test_ansible_test_sanity_passes(tmp_path: Path, ansible_env: dict[str, str]) -> None:
    tarball = collection_build.build(tmp_path / "dist", ansible_env)
    root = collection_build.extract(tarball, tmp_path / "tree")
    (root / "tests" / "sanity").mkdir(parents=True)
    shutil.copyfile(
        REPO / "tests" / "ansible" / "sanity" / "ignore-2.19.txt",
        root / "tests" / "sanity" / "ignore-2.19.txt",
    )
    env = {**ansible_env, "HOME": str(_test_home())}
    argv = ["ansible-test", "sanity", "--local", "--python", "3.11", "--color", "no"]
    for name in SKIPPED:
        argv += ["--skip-test", name]
    proc = run(argv, env, cwd=root, timeout_s=580, check=False)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        pytest.fail(f"ansible-test sanity failed:\n{out[-6000:]}", pytrace=False)
    for name in ("validate-modules", "pylint", "yamllint", "import", "ansible-doc", "pep8"):
        assert f'Running sanity test "{name}"' in out
