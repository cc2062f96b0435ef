"""Device health of a VF from what the node shows: the decision table, pure.

**Healthy** when every fact holds (the VF's function is present and bound to the expected driver,
its PF's function is present with a network interface that is up with carrier); **Unhealthy** as
soon as a fact that could be read fails; **Unknown** when nothing failed but a fact could not be
read (:class:`Unreadable`). The reason names the VF, the PF and every such fact. States are the
kubelet's ``v1alpha1`` health states; readings come from ``sriov_dra.host.vf_health_reader``. No file,
no clock.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_DRIVER = "default"
"""The VfConfig ``driver`` value that asks the kernel to pick the driver."""


class Health(enum.StrEnum):
    """One device's health, named as the kubelet's ``HealthStatus`` enum."""

    HEALTHY = "HEALTHY"
    UNHEALTHY = "UNHEALTHY"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class Unreadable:
    """A fact the node did not answer; ``why`` names what was read and the error."""

    why: str


@dataclass(frozen=True)
class DriverExpectation:
    """Which driver a VF must have bound: ``driver`` by name, or any when ``driver`` is None.

    ``bound`` says whether some driver must be bound at all (False only for a free VF that was
    discovered unbound, which then has nothing to lose).
    """

    driver: str | None = None
    bound: bool = False


def expected_driver(discovered: str | None, requested: str | None) -> DriverExpectation:
    """The driver a VF must have: what its claim asked for, else what discovery found.

    ``discovered`` is the driver bound at discovery (None: unbound); ``requested`` the prepared
    claim's VfConfig ``driver`` (None: the VF is free; ``""``: keep the driver, i.e. the
    discovered one; ``"default"``: whatever the kernel probes; else that driver's name).
    Shapes: ``expected_driver("iavf", None) == DriverExpectation("iavf", bound=True)``.
    """
    if requested == DEFAULT_DRIVER:
        return DriverExpectation(None, bound=True)
    if requested:
        return DriverExpectation(requested, bound=True)
    return DriverExpectation(discovered, bound=discovered is not None)


@dataclass(frozen=True)
class PfLink:
    """The PF interface as the kernel's netlink answers: ``IFF_UP``, ``IFLA_CARRIER``, operstate.

    Shapes: ``operstate`` lowercase (``up``, ``down``, ``lowerlayerdown``, ``unknown``, ...).
    """

    admin_up: bool
    carrier: bool
    operstate: str


@dataclass(frozen=True)
class HealthTarget:
    """One device to watch: its DRA identity, its VF and PF addresses, the driver it must have.

    ``pf_name`` is the PF interface name at discovery (used in messages when sysfs has none now).
    """

    pool: str
    device: str
    pci_address: str
    pf_pci_address: str
    pf_name: str
    expect: DriverExpectation


@dataclass(frozen=True)
class VfReading:
    """What the node shows now for one VF and its PF; an :class:`Unreadable` where it did not answer.

    ``driver`` None: unbound. ``pf_netdev`` None: the PF function has no interface in sysfs.
    ``pf_link`` None: no interface of that name in the plugin's network namespace.
    ``driver`` is not looked at when ``vf_present`` is not True, nor ``pf_netdev``/``pf_link``
    when ``pf_present`` is not True.
    """

    vf_present: bool | Unreadable
    driver: str | Unreadable | None
    pf_present: bool | Unreadable
    pf_netdev: str | Unreadable | None
    pf_link: PfLink | Unreadable | None


class Cause(enum.StrEnum):
    """Why a device is Unhealthy, as a short code (a label value: the device taint's value)."""

    VF_GONE = "VfGone"
    VF_WRONG_DRIVER = "VfWrongDriver"
    VF_UNBOUND = "VfUnbound"
    PF_GONE = "PfGone"
    PF_NO_INTERFACE = "PfNoInterface"
    PF_DOWN = "PfDown"
    PF_NO_CARRIER = "PfNoCarrier"


@dataclass(frozen=True)
class Verdict:
    """A device's health and the reason behind it (one line, for logs and the kubelet's message).

    ``cause`` is the first failing fact's code when Unhealthy, else None.
    """

    health: Health
    reason: str
    cause: Cause | None = None


_Failed = list[tuple[Cause, str]]


def _absent(name: str, present: bool | Unreadable, gone: Cause, failed: _Failed, unknown: list[str]) -> bool:
    """True (and the reason noted) when the function ``name`` is gone or could not be read."""
    if isinstance(present, Unreadable):
        unknown.append(f"{name.split(' (')[0]}: {present.why}")
    elif not present:
        failed.append((gone, f"{name} is gone from sysfs"))
    return present is not True


def _driver_facts(target: HealthTarget, reading: VfReading, failed: _Failed, unknown: list[str]) -> str:
    vf = f"VF {target.pci_address}"
    if _absent(vf, reading.vf_present, Cause.VF_GONE, failed, unknown):
        return ""
    driver, expect = reading.driver, target.expect
    if isinstance(driver, Unreadable):
        unknown.append(f"{vf}: {driver.why}")
        return ""
    if expect.driver is not None and driver != expect.driver:
        bound = f"bound to {driver}" if driver else "unbound"
        failed.append((Cause.VF_WRONG_DRIVER, f"{vf} is {bound}, expected {expect.driver}"))
    elif expect.bound and driver is None:
        failed.append((Cause.VF_UNBOUND, f"{vf} has no driver bound"))
    return f"{vf} bound to {driver}" if driver else f"{vf} unbound"


def _pf_facts(target: HealthTarget, reading: VfReading, failed: _Failed, unknown: list[str]) -> str:
    pf = f"PF {target.pf_pci_address}"
    if _absent(f"{pf} ({target.pf_name})", reading.pf_present, Cause.PF_GONE, failed, unknown):
        return ""
    netdev = reading.pf_netdev
    if isinstance(netdev, Unreadable):
        unknown.append(f"{pf}: {netdev.why}")
        return ""
    if netdev is None:
        failed.append(
            (
                Cause.PF_NO_INTERFACE,
                f"{pf} has no network interface (was {target.pf_name}; is its driver bound?)",
            )
        )
        return ""
    link = reading.pf_link
    if isinstance(link, Unreadable):
        unknown.append(f"PF {netdev}: {link.why}")
    elif link is None:
        unknown.append(
            f"PF {netdev} is not in the plugin's network namespace (run the plugin with hostNetwork)"
        )
    elif not link.admin_up:
        failed.append((Cause.PF_DOWN, f"PF {netdev} is down (operstate {link.operstate})"))
    elif not link.carrier:
        failed.append((Cause.PF_NO_CARRIER, f"PF {netdev} has no carrier (operstate {link.operstate})"))
    return f"PF {netdev} up with carrier"


def decide(target: HealthTarget, reading: VfReading) -> Verdict:
    """The health of ``target`` given ``reading``: the decision table of this module's docstring.

    Unhealthy wins over Unknown (one definite failure is enough); the reason joins every failing
    fact (or, when none failed, every unreadable one) with ``"; "``, or names the healthy facts;
    the cause is the first failing fact's (VF facts before PF facts).
    Shapes: ``Verdict(Health.UNHEALTHY, "PF ens1f0 has no carrier (operstate lowerlayerdown)",
    Cause.PF_NO_CARRIER)``.
    """
    failed: _Failed = []
    unknown: list[str] = []
    good = [_driver_facts(target, reading, failed, unknown), _pf_facts(target, reading, failed, unknown)]
    if failed:
        return Verdict(Health.UNHEALTHY, "; ".join(text for _, text in failed), failed[0][0])
    if unknown:
        return Verdict(Health.UNKNOWN, "; ".join(unknown))
    return Verdict(Health.HEALTHY, "; ".join(good))


@dataclass(frozen=True)
class Transition:
    """A device whose health changed: ``before`` None when it was not watched before."""

    device: str
    before: Verdict | None
    after: Verdict


def transitions(before: Mapping[str, Verdict], after: Mapping[str, Verdict]) -> tuple[Transition, ...]:
    """The devices of ``after`` whose health differs from ``before``, sorted by device name.

    A device new in ``after`` counts when it is not Healthy (a healthy start is not news); a
    changed reason with the same health is not a transition (the stream still carries it).
    """
    out = []
    for device in sorted(after):
        old, new = before.get(device), after[device]
        if (old is None and new.health is not Health.HEALTHY) or (
            old is not None and old.health != new.health
        ):
            out.append(Transition(device, old, new))
    return tuple(out)
