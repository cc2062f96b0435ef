"""A stand-in for an ``ansible-playbook`` run whose worker leaves the run's session (test double).

ansible-core's workers call ``setsid``; this script forks one such worker, which prints its pid
(after ``setsid``, so a check of its session never races it) and sleeps, while the run sleeps too.
Run it as ``[sys.executable, "-c", SCRIPT]``.
"""

from __future__ import annotations

from typing import Final

SCRIPT: Final = (
    "import os, sys, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    print(os.getpid(), flush=True)\n"
    "    time.sleep(300)\n"
    "    os._exit(0)\n"
    "time.sleep(300)\n"
)
