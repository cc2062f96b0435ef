"""The Python environment the product image gives its services, for the lab's host processes and benches.

The image (``collection/image/Containerfile``) sets ``PYTHON*`` variables in its last ``ENV``
instruction (``PYTHONOPTIMIZE=2``: no docstrings, the kubernetes client's model docstrings being
about 14 MiB of every service's RSS) and compiles its bytecode at that level in the build stage.
A process the lab or a benchmark starts from the venv runs the way the image runs it with
:func:`python_env` added to its environment, after :func:`compile_like_the_image`.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Final

from sriov_dra_lab import paths

CONTAINERFILE: Final = paths.REPO / "collection" / "image" / "Containerfile"
NOT_CARRIED: Final = frozenset({"PYTHONDONTWRITEBYTECODE"})
"""Image variables left out: the venv's bytecode must still be written where it is missing."""


def python_env(containerfile: Path = CONTAINERFILE) -> dict[str, str]:
    """The ``PYTHON*`` variables of the last ``ENV`` instruction of ``containerfile`` (``KEY=value`` form).

    Shapes: ``{"PYTHONOPTIMIZE": "2", ...}`` without :data:`NOT_CARRIED`; line continuations are
    joined first. Raises: ``ValueError`` naming the file when it has no ``ENV`` instruction, or
    when that instruction uses the legacy ``ENV KEY value`` form (ambiguous to read).
    """
    text = containerfile.read_text().replace("\\\n", " ")
    found = re.findall(r"^ENV\s+(.+)$", text, re.M)
    if not found:
        raise ValueError(f"{containerfile}: no ENV instruction; the image's Python environment is unknown")
    words = shlex.split(found[-1], comments=False)
    if any("=" not in w for w in words):
        raise ValueError(f"{containerfile}: the last ENV is not in KEY=value form: {found[-1]!r}")
    pairs = dict(w.split("=", 1) for w in words)
    return {k: v for k, v in pairs.items() if k.startswith("PYTHON") and k not in NOT_CARRIED}


def compile_like_the_image(env: dict[str, str], prefix: Path | None = None) -> None:
    """Compile ``prefix``'s (default: this interpreter's ``sys.prefix``) ``lib`` at ``env``'s level.

    A no-op without ``PYTHONOPTIMIZE``. Raises: ``subprocess.CalledProcessError``.
    """
    level = env.get("PYTHONOPTIMIZE")
    if not level:
        return
    lib = (prefix or Path(sys.prefix)) / "lib"
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", "-o", level, str(lib)], check=True)
