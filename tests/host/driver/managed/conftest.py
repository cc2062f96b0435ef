"""Fixtures of the auto-attach handler tests: a fresh fake node per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.fakes import managed_node as mn


@pytest.fixture
def node(tmp_path: Path) -> Iterator[mn.ManagedNode]:
    yield mn.ManagedNode(tmp_path)
