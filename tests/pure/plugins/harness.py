"""One args/exit harness for the collection's modules.

:func:`run_module` runs a module's ``main()`` with the given arguments, the way Ansible would,
and returns the ``exit_json`` result or raises :class:`ModuleFailed` with the ``fail_json``
result. Check and diff mode are the ``_ansible_check_mode``/``_ansible_diff`` internal args.
"""

from __future__ import annotations

import types
from typing import Any
from unittest import mock

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class ModuleExited(Exception):
    """Raised instead of ``exit_json``; ``result`` holds its keyword arguments."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result)
        self.result = result


class ModuleFailed(Exception):
    """Raised instead of ``fail_json``; ``result`` holds its keyword arguments, ``msg`` the message."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result.get("msg"))
        self.result = result
        self.msg = result.get("msg")


def _exit(self: basic.AnsibleModule, **kwargs: Any) -> None:
    kwargs.setdefault("changed", False)
    raise ModuleExited(kwargs)


def _fail(self: basic.AnsibleModule, msg: str, **kwargs: Any) -> None:
    raise ModuleFailed({"failed": True, "msg": msg, **kwargs})


def run_module(
    module: types.ModuleType, params: dict[str, Any], *, check_mode: bool = False, diff: bool = False
) -> dict[str, Any]:
    """Run ``module.main()`` with ``params``; return the exit result or raise :class:`ModuleFailed`."""
    args = dict(params, _ansible_check_mode=check_mode, _ansible_diff=diff)
    with (
        patch_module_args(args),
        mock.patch.object(basic.AnsibleModule, "exit_json", _exit),
        mock.patch.object(basic.AnsibleModule, "fail_json", _fail),
    ):
        try:
            module.main()
        except ModuleExited as done:
            return done.result
    raise AssertionError(f"{module.__name__}.main() returned without exit_json or fail_json")
