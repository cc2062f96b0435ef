# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Argument specs shared by several modules; each is documented by the doc fragment of its name.

``HOST_ROOT_SPEC`` pairs with ``plugins/doc_fragments/host_root.py``. Modules deep-copy a spec
before extending it. It must import only the standard library.
"""

from __future__ import annotations

import copy

HOST_ROOT_SPEC = {
    "host_root": {"type": "path", "default": "/"},
}


def argspec(*specs, **own):
    """A fresh argument spec: deep copies of ``specs`` merged, then the module's ``own`` options."""
    merged = {}
    for spec in specs:
        merged.update(copy.deepcopy(spec))
    merged.update(own)
    return merged
