"""whereabouts' reservations in the API: IPPools and OverlappingRangeIPReservations, as plain dicts.

The calls node recovery makes to release a lost node's Pods' addresses (docs/operations.md): one
LIST of each kind across all namespaces (whereabouts keeps them in the namespace of its
kubeconfig's context, ``kube-system`` by default, which the frozen config does not name), a JSON
Patch of a pool's allocations conditional on its resourceVersion (as whereabouts' own writes are),
and the DELETE of one reservation under a UID precondition. A cluster without the whereabouts CRDs
lists nothing. Never retries, caches, or writes without a precondition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from sriov_dra.kube import errors, objects

GROUP: Final = "whereabouts.cni.cncf.io"
IPPOOL: Final = objects.Resource(GROUP, "v1alpha1", "ippools", "IPPool")
OVERLAPPING_RESERVATION: Final = objects.Resource(
    GROUP, "v1alpha1", "overlappingrangeipreservations", "OverlappingRangeIPReservation"
)
FIELD_MANAGER: Final = "sriov-dra-recover-node"


class WhereaboutsClient:
    """whereabouts object requests through one :class:`~sriov_dra.kube.objects.Objects`; one HTTP request each."""

    def __init__(self, client: objects.Objects) -> None:
        self._objects = client

    def _list(self, resource: objects.Resource) -> list[dict[str, Any]]:
        try:
            return self._objects.list(resource).items
        except errors.NotFound:  # the CRD is not installed: nothing is reserved there
            return []

    def pools(self) -> list[dict[str, Any]]:
        """Every IPPool in every namespace (``[]`` without the CRD). Raises: ``errors.ApiError`` classes."""
        return self._list(IPPOOL)

    def pool(self, namespace: str, name: str) -> dict[str, Any]:
        """Live GET of one IPPool. Raises: ``errors.NotFound`` and the other ``errors.ApiError`` classes."""
        return self._objects.get(IPPOOL, name, namespace)

    def reservations(self) -> list[dict[str, Any]]:
        """Every OverlappingRangeIPReservation in every namespace (``[]`` without the CRD)."""
        return self._list(OVERLAPPING_RESERVATION)

    def patch_pool(self, namespace: str, name: str, ops: Sequence[Mapping[str, Any]]) -> None:
        """Apply ``ops`` (a ``test`` of the resourceVersion first) to IPPool ``namespace/name``.

        Raises: ``errors.Invalid`` when the pool changed since it was read (re-read and recompute);
        the other ``errors.ApiError`` classes.
        """
        self._objects.json_patch(IPPOOL, name, namespace, ops)

    def delete_reservation(self, namespace: str, name: str, *, uid: str) -> bool:
        """Delete one OverlappingRangeIPReservation if its UID is still ``uid``; ``False`` when already gone.

        Raises: ``errors.Conflict`` when the name now holds another object; other ``errors.ApiError`` classes.
        """
        return self._objects.delete(OVERLAPPING_RESERVATION, name, namespace, uid=uid)
