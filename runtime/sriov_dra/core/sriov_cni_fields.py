"""The values sriov-cni v2.10 reads in its VF settings, checked before a config is written or frozen.

sriov-cni either refuses ``vlan``, ``vlanQoS``, ``vlanProto``, ``spoofchk``, ``trust``,
``link_state``, ``min_tx_rate`` and ``max_tx_rate`` at every CNI ADD, or reads them otherwise than
an author may mean; :func:`problems_of` is the one rule for both places a config is made (the
plugin's template check, which the guard re-runs on every shadow, and the operator's SriovNetwork
renderer; docs/design.md#render). Each problem names the field by the caller's path, the value,
what sriov-cni accepts and the fix. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sriov_dra_rules import errors, strict_json

ON_OFF: Final = ("on", "off")
"""The only spellings of ``spoofchk`` and ``trust`` that mean what they say (``""``: unset)."""
LINK_STATES: Final = ("auto", "enable", "disable")
VLAN_PROTOCOLS: Final = ("802.1q", "802.1ad")
"""``vlanProto`` values, compared case-insensitively as sriov-cni lowercases them."""
VLAN_MAX: Final = 4094
QOS_MAX: Final = 7
RATE_MAX: Final = 2**32 - 1
"""The kernel's ``IFLA_VF_RATE`` fields are unsigned 32-bit Mbps."""
KEYS: Final = (
    "vlan",
    "vlanQoS",
    "vlanProto",
    "spoofchk",
    "trust",
    "link_state",
    "min_tx_rate",
    "max_tx_rate",
)
"""sriov-cni's names of the values checked here."""

_WHAT: Final = {"spoofchk": "spoof checking", "trust": "trust mode"}


def _shown(value: object) -> str:
    try:
        return strict_json.shown_value(value)  # type: ignore[arg-type]  # any decoded value
    except TypeError:
        return repr(value)


def _integer(
    value: object, path: str, low: int, high: int, meaning: str, problems: list[errors.FieldError]
) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append(errors.FieldError(path, f"must be an integer, got {_shown(value)}"))
        return None
    if not low <= value <= high:
        problems.append(
            errors.FieldError(
                path, f"{value} is outside {low}-{high} ({meaning}); sriov-cni would refuse every ADD"
            )
        )
        return None
    return value


def _on_off(key: str, value: object, path: str, problems: list[errors.FieldError]) -> None:
    what = _WHAT[key]
    if isinstance(value, bool):
        word = "on" if value else "off"
        problems.append(
            errors.FieldError(
                path,
                f"is the boolean {str(value).lower()} (YAML reads an unquoted on/off as one), but sriov-cni "
                f'reads a string; quote it: "{word}"',
            )
        )
    elif not isinstance(value, str):
        problems.append(errors.FieldError(path, f'must be "on" or "off", got {_shown(value)}'))
    elif value and value not in ON_OFF:
        problems.append(
            errors.FieldError(
                path,
                f"{_shown(value)} would switch {what} off: sriov-cni turns it on only for exactly "
                f'"on" and off for any other value; write "on" or "off"',
            )
        )


def problems_of(values: Mapping[str, object], paths: Mapping[str, str]) -> list[errors.FieldError]:
    """Every reason sriov-cni v2.10 would refuse or misread the VF settings in ``values``.

    Shapes: ``values`` maps sriov-cni's key names (:data:`KEYS`) to the values as decoded; an
    absent key or ``None`` is unset (as Go's pointer fields read it). ``paths`` names each key's
    field for the messages (``spec.config.vlanQoS``, or ``spec.vlanQoS`` of a SriovNetwork); a
    key without a path is named by itself. Returns ``[]`` when sriov-cni would apply them as
    written. Never raises.

    Rules: ``LoadConf`` refuses VLAN outside 0-4094, QoS outside 0-7 or without a VLAN, non-zero
    QoS on VLAN 0, ``vlanProto`` other than 802.1q/802.1ad (any case) or without a VLAN, 802.1ad
    on VLAN 0, ``link_state`` other than auto/enable/disable; ``ApplyVFConfig`` turns spoof
    checking and trust on only for exactly ``"on"`` (any other non-empty value switches them
    off); the kernel takes rates as unsigned 32-bit Mbps and refuses a minimum above a non-zero
    maximum.
    """
    problems: list[errors.FieldError] = []

    def where(key: str) -> str:
        return paths.get(key, key)

    vlan = _integer(values.get("vlan"), where("vlan"), 0, VLAN_MAX, "a VLAN ID; 0 means untagged", problems)
    vlan_set = values.get("vlan") is not None
    qos = _integer(values.get("vlanQoS"), where("vlanQoS"), 0, QOS_MAX, "an 802.1p priority", problems)
    if values.get("vlanQoS") is not None and not vlan_set:
        problems.append(
            errors.FieldError(
                where("vlanQoS"),
                "is set without vlan; sriov-cni applies a VLAN QoS only with a VLAN and refuses every ADD "
                "otherwise; set vlan or remove vlanQoS",
            )
        )
    elif qos and vlan == 0:
        problems.append(
            errors.FieldError(
                where("vlanQoS"),
                f"{qos} needs a non-zero vlan: sriov-cni refuses a non-zero QoS on VLAN 0 at every ADD; "
                f"set {where('vlan')} to 1-{VLAN_MAX} or vlanQoS to 0",
            )
        )
    proto = values.get("vlanProto")
    if proto is not None:
        if not isinstance(proto, str) or proto.lower() not in VLAN_PROTOCOLS:
            problems.append(
                errors.FieldError(
                    where("vlanProto"),
                    f"{_shown(proto)} is not a VLAN protocol sriov-cni accepts (802.1q or 802.1ad, any "
                    "case); every ADD would fail; write one of them or remove it",
                )
            )
        elif not vlan_set:
            problems.append(
                errors.FieldError(
                    where("vlanProto"),
                    "is set without vlan; sriov-cni applies a VLAN protocol only with a VLAN and refuses "
                    "every ADD otherwise; set vlan or remove vlanProto",
                )
            )
        elif proto.lower() == "802.1ad" and vlan == 0:
            problems.append(
                errors.FieldError(
                    where("vlanProto"),
                    f"802.1ad needs a non-zero vlan: sriov-cni refuses it on VLAN 0 at every ADD; set "
                    f"{where('vlan')} to 1-{VLAN_MAX} or use 802.1q",
                )
            )
    for key in ("spoofchk", "trust"):
        if values.get(key) is not None:
            _on_off(key, values[key], where(key), problems)
    link = values.get("link_state")
    if link is not None and (not isinstance(link, str) or (link and link not in LINK_STATES)):
        problems.append(
            errors.FieldError(
                where("link_state"),
                f"{_shown(link)} is not a link state sriov-cni accepts ({', '.join(LINK_STATES)}); every "
                "ADD would fail with invalid link_state; write one of them or remove it",
            )
        )
    low = _integer(values.get("min_tx_rate"), where("min_tx_rate"), 0, RATE_MAX, "Mbps", problems)
    high = _integer(values.get("max_tx_rate"), where("max_tx_rate"), 0, RATE_MAX, "Mbps", problems)
    if low is not None and high and low > high:
        problems.append(
            errors.FieldError(
                where("min_tx_rate"),
                f"{low} is above {where('max_tx_rate')} {high}; the VF rate would be refused at every ADD; "
                "set the minimum at most the maximum (0 means no limit)",
            )
        )
    return problems
