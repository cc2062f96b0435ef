"""Ask a service's health server over HTTP as the probe of one Pod does (``X-Pod-Uid``)."""

from __future__ import annotations

import urllib.error
import urllib.request

from sriov_dra.servicekit import probes


def get(port: int, path: str, pod_uid: str = "") -> tuple[int, str]:
    """``(status, body)`` of ``GET path`` on 127.0.0.1:``port``, as Pod ``pod_uid`` (empty: no header).

    Raises: ``urllib.error.URLError`` when nothing answers on the port.
    """
    headers = {probes.POD_UID_HEADER: pod_uid} if pod_uid else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
