"""``python -m sriov_dra.driver``: run the DRA kubelet plugin (see ``sriov_dra.driver.main``)."""

from __future__ import annotations

import sys

from sriov_dra.driver import main

sys.exit(main.main())
