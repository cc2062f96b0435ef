"""One CNI request as the guard daemon receives it from the shim: environment, CNI_ARGS and config.

Parses the runtime's ``CNI_*`` variables and ``CNI_ARGS`` into ordered items and the Pod identity
they name, as strictly as Multus does (an item without exactly one ``=`` is refused before any
delegate runs). The guard's one edit: on ADD without ``K8S_POD_UID``, the live Pod's UID is
appended as one ``K8S_POD_UID=<uid>`` item (docs/design.md#guard). Never reorders or rewrites the
runtime's items. Source: Multus ``cnitypes.LoadArgs`` and its thick server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sriov_dra.guard import decisions, shim
from sriov_dra_rules import cni_args, names

POD_UID_ARG = cni_args.POD_UID_ARG


@dataclass(frozen=True)
class CniRequest:
    """A decoded request.

    Shapes: ``cni_args`` the ``CNI_ARGS`` items in order as ``(key, value)``; ``env`` the ``CNI_*``
    variables as received; ``stdin`` the guard's config bytes; ``conf`` their decoded form.
    """

    command: str
    container_id: str
    netns: str
    ifname: str
    cni_args: tuple[tuple[str, str], ...]
    env: Mapping[str, str]
    stdin: bytes
    conf: shim.GuardConf

    def arg(self, key: str) -> str | None:
        """The value of ``CNI_ARGS`` item ``key`` (the last one if repeated), or ``None``."""
        found = None
        for k, v in self.cni_args:
            if k == key:
                found = v
        return found

    @property
    def pod_namespace(self) -> str:
        """``K8S_POD_NAMESPACE`` (validated non-empty for ADD)."""
        return self.arg("K8S_POD_NAMESPACE") or ""

    @property
    def pod_name(self) -> str:
        """``K8S_POD_NAME`` (validated non-empty for ADD)."""
        return self.arg("K8S_POD_NAME") or ""

    @property
    def pod_uid(self) -> str | None:
        """``K8S_POD_UID`` from the runtime, or ``None`` when it sent none (or an empty one)."""
        return self.arg(POD_UID_ARG) or None

    @property
    def pod_ref(self) -> str:
        """``Pod ns/name`` for messages."""
        return f"Pod {self.pod_namespace}/{self.pod_name}"


def _invalid(message: str) -> decisions.Rejected:
    return decisions.Rejected.one(decisions.Reason.INVALID_CNI_REQUEST, message)


def parse_cni_args(text: str) -> tuple[tuple[str, str], ...]:
    """Split ``CNI_ARGS`` on ``;`` into ``(key, value)`` items; ``""`` gives ``()``.

    Raises: :class:`decisions.Rejected` (``InvalidCniRequest``) for an item without exactly one
    ``=`` or with an empty key (including the empty item a trailing ``;`` makes), naming it.
    """
    if text == "":
        return ()
    items: list[tuple[str, str]] = []
    for position, item in enumerate(text.split(";"), start=1):
        key, sep, value = item.partition("=")
        if not sep or "=" in value or not key:
            raise _invalid(
                f"CNI_ARGS item {position} {item!r} is not key=value (a trailing ';' or a value "
                "containing '=' also breaks Multus); fix the runtime's CNI_ARGS"
            )
        items.append((key, value))
    return tuple(items)


def parse_request(env: Mapping[str, str], stdin: bytes) -> CniRequest:
    """Decode the shim's request.

    Raises: :class:`decisions.Rejected` (``InvalidCniRequest``) when the guard config is
    malformed, ``CNI_COMMAND`` is missing, or an ADD lacks ``CNI_CONTAINERID``, ``CNI_NETNS``,
    ``K8S_POD_NAMESPACE`` or ``K8S_POD_NAME``, or has malformed ``CNI_ARGS``.
    """
    try:
        conf = shim.parse_conf(stdin)
    except shim.GuardConfError as exc:
        raise _invalid(str(exc)) from exc
    command = env.get("CNI_COMMAND", "")
    if not command:
        raise _invalid("CNI_COMMAND is missing")
    args = parse_cni_args(env.get("CNI_ARGS", "")) if command == "ADD" else ()
    request = CniRequest(
        command=command,
        container_id=env.get("CNI_CONTAINERID", ""),
        netns=env.get("CNI_NETNS", ""),
        ifname=env.get("CNI_IFNAME", "") or names.DEFAULT_PRIMARY_IFNAME,
        cni_args=args,
        env=dict(env),
        stdin=stdin,
        conf=conf,
    )
    if command == "ADD":
        missing = [k for k in ("CNI_CONTAINERID", "CNI_NETNS") if not env.get(k)]
        missing += [k for k in ("K8S_POD_NAMESPACE", "K8S_POD_NAME") if not request.arg(k)]
        if missing:
            raise _invalid(
                f"ADD without {', '.join(missing)}; the runtime must send them (Multus needs them too)"
            )
    return request


def env_for_multus(request: CniRequest, live_pod_uid: str | None) -> dict[str, str]:
    """The environment Multus runs with: the request's, plus ``K8S_POD_UID`` when the runtime sent none.

    On ADD with no (or an empty) ``K8S_POD_UID`` and a known ``live_pod_uid``, one item
    ``K8S_POD_UID=<uid>`` is appended after the runtime's items (an empty one is replaced in
    place); nothing else changes. Other commands get the environment unchanged.
    Shapes: ``CNI_ARGS`` stays ``;``-joined ``key=value`` items.
    """
    env = dict(request.env)
    if request.command != "ADD" or request.pod_uid is not None or not live_pod_uid:
        return env
    items = [(k, live_pod_uid if k == POD_UID_ARG else v) for k, v in request.cni_args]
    if all(k != POD_UID_ARG for k, _ in items):
        items.append((POD_UID_ARG, live_pod_uid))
    env["CNI_ARGS"] = ";".join(f"{k}={v}" for k, v in items)
    return env
