"""Stand-in for ansible-test's pip bootstrap script (``get-pip.py``), for machines without its download host.

ansible-test creates a virtualenv per sanity test without pip and runs a cached ``get-pip.py`` in it
with ``pip install`` arguments (``pip==<version> setuptools wheel ...``). Its download host is not
reachable from this project's machines, but PyPI is. This script does the same job from the
standard library: ``ensurepip`` installs the interpreter's bundled pip, then that pip installs the
requested packages (the pinned pip first) from the package index. ``tests/ansible/test_sanity.py``
places it where ansible-test looks for the cached script, inside a private ``HOME``.
"""

import ensurepip
import os
import subprocess
import sys

# get-pip.py's own flags: without them it also installs setuptools and wheel.
OWN_FLAGS = {"--no-setuptools": "setuptools", "--no-wheel": "wheel"}

args = [a for a in sys.argv[1:] if a not in OWN_FLAGS]
extra = [pkg for flag, pkg in OWN_FLAGS.items() if flag not in sys.argv[1:]]
env = dict(
    os.environ
)  # ensurepip points PIP_CONFIG_FILE at /dev/null in this process; pip must see the config
ensurepip.bootstrap(upgrade=True)
sys.exit(
    subprocess.call(
        [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", *args, *extra], env=env
    )
)
