"""``listed_shadows.ListedShadows``: each listed shadow answers one read; everything else is live."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sriov_dra.driver.managed import listed_shadows, orphans


class Live:
    """The live API: answers every GET with a fresh object and logs each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        self.calls.append(("get", name))
        return {"metadata": {"namespace": namespace, "name": name, "resourceVersion": "live"}}

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append(("create", body["metadata"]["name"]))
        return dict(body)

    def delete(self, namespace: str, name: str, *, uid: str) -> None:
        self.calls.append(("delete", name))

    def json_patch(self, namespace: str, name: str, ops: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        self.calls.append(("patch", name))
        return {}

    def list_all(self, *, label_selector: str) -> list[dict[str, Any]]:
        self.calls.append(("list", label_selector))
        return [listed("a"), listed("b")]


def listed(name: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "resourceVersion": "listed"}}


def version(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["resourceVersion"])


def test_of_node_issues_one_list_with_the_orphan_scan_selector() -> None:
    live = Live()
    listed_shadows.ListedShadows.of_node(live, "node-uid-1")
    assert live.calls == [("list", orphans.label_selector("node-uid-1"))]


def test_a_listed_shadow_answers_one_read_and_the_next_read_is_live() -> None:
    live = Live()
    view = listed_shadows.ListedShadows(live, [listed("a")])
    assert version(view.get("ns", "a")) == "listed" and live.calls == []
    assert version(view.get("ns", "a")) == "live" and live.calls == [("get", "a")]
    assert (view.served, view.live) == (1, 1)


def test_a_name_the_list_did_not_return_is_read_live() -> None:
    live = Live()
    view = listed_shadows.ListedShadows(live, [listed("a")])
    assert version(view.get("ns", "missing")) == "live" and live.calls == [("get", "missing")]
    assert version(view.get("other-ns", "a")) == "live"  # the namespace is part of the key


def test_after_any_write_to_a_name_its_listed_object_is_never_served() -> None:
    live = Live()
    view = listed_shadows.ListedShadows(live, [listed("a"), listed("b"), listed("c")])
    view.json_patch("ns", "a", [])
    view.delete("ns", "b", uid="u")
    view.create({"metadata": {"namespace": "ns", "name": "c"}})
    assert [version(view.get("ns", n)) for n in ("a", "b", "c")] == ["live", "live", "live"]
    assert live.calls == [
        ("patch", "a"),
        ("delete", "b"),
        ("create", "c"),
        ("get", "a"),
        ("get", "b"),
        ("get", "c"),
    ]


def test_a_list_through_the_view_is_always_live() -> None:
    live = Live()
    view = listed_shadows.ListedShadows(live, [])
    assert len(view.list_all(label_selector="x=y")) == 2 and live.calls == [("list", "x=y")]
