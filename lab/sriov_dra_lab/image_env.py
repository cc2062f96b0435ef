"""The Python environment the product image gives its services, for the lab's host processes and benches.

The image (``collection/image/Containerfile``) sets ``PYTHON*`` variables in its final stage's ``ENV``
instructions (``PYTHONOPTIMIZE=2``: no docstrings, the kubernetes client's model docstrings being
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
    """The ``PYTHON*`` variables the final stage of ``containerfile`` gives its processes.

    Every ``ENV`` instruction after the last ``FROM`` is read in order, a later value of a key
    replacing an earlier one, as the image builder applies them (an ``ENV`` of an earlier stage
    does not reach the final image). Line continuations are joined first; ``KEY=value`` form only.
    Shapes: ``{"PYTHONOPTIMIZE": "2", ...}`` without :data:`NOT_CARRIED`. Raises: ``ValueError``
    naming the file and the instruction when the final stage has no ``ENV`` instruction, or when
    one of its instructions uses the legacy ``ENV KEY value`` form (ambiguous to read).
    """
    text = containerfile.read_text().replace("\\\n", " ")
    stages = re.split(r"^FROM\s.*$", text, flags=re.M)
    found = re.findall(r"^ENV\s+(.+)$", stages[-1], re.M)
    if not found:
        raise ValueError(
            f"{containerfile}: the final stage has no ENV instruction; the image's Python environment is unknown"
        )
    pairs: dict[str, str] = {}
    for instruction in found:
        words = shlex.split(instruction, comments=False)
        if any("=" not in w for w in words):
            raise ValueError(
                f"{containerfile}: an ENV of the final stage is not in KEY=value form: {instruction!r}"
            )
        for word in words:
            key, value = word.split("=", 1)
            pairs[key] = value
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
