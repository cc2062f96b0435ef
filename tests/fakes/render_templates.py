"""Generated network templates (hypothesis strategies) for the shadow config renderer.

:func:`templates` draws templates the renderer must accept (the pure tier's render properties);
:func:`loader_templates` draws templates whose sriov entry also carries sriov-cni's VF settings
and keys naming its other ``NetConf`` fields, in any case, with values on both sides of what its
config loader accepts. The realvf tier renders a sample of both for a real VF and gives each to
the real sriov-cni (tests/realvf/guest/test_shadow_configs_in_sriov_cni.py).
"""

from __future__ import annotations

from hypothesis import strategies as st
from tests.fakes.render_sources import PCI, nad

from sriov_dra.core import sriov_cni_netconf, template_fields
from sriov_dra_rules import strict_json
from sriov_dra_rules.strict_json import JsonValue, RawNumber

RESERVED = {"type", "name", "plugins", "cniVersion", "cniVersions", "deviceID", "pciBusID", "ipam", "delegates",
            "vlan", "vlanQoS", "min_tx_rate", "max_tx_rate", "vlanProto", "mac", "spoofchk", "trust", "link_state",
            "logLevel", "logFile"}  # fmt: skip
NETCONF_FOLDS = frozenset(sriov_cni_netconf.fold(name) for name in sriov_cni_netconf.NETCONF)
SCALARS = (
    st.none() | st.booleans() | st.integers() | st.text(max_size=10)
    | st.from_regex(r"-?[1-9][0-9]{0,3}\.[0-9]{1,3}(e[+-]?[0-9]{1,2})?", fullmatch=True).map(RawNumber)
)  # fmt: skip
VALUES = st.recursive(
    SCALARS,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=10,
)
EXTRA = st.dictionaries(
    st.text(max_size=10).filter(
        lambda k: k not in RESERVED and sriov_cni_netconf.fold(k) not in NETCONF_FOLDS
    ),
    VALUES,
    max_size=4,
)
"""Keys of no meaning to the renderer or to sriov-cni, with any values."""
CNI_NAMES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,20}", fullmatch=True)
IPAM_TYPES = st.none() | st.sampled_from(["host-local", "static", "dhcp", "whereabouts", ""])


@st.composite
def _ipam(draw: st.DrawFn) -> dict[str, JsonValue]:
    """A valid ``ipam`` object: any other keys, ``type`` (when present) a string as the template check requires."""
    pool_keys = ("node_slice_size", "type", "subnet", "rangeStart", "rangeEnd", "ranges", "gateway")
    pool_keys += ("range", "ipRanges", "range_start", "range_end", "exclude")
    keys = st.text(max_size=12).filter(lambda k: k not in pool_keys and k.upper() != "TYPE")
    out: dict[str, JsonValue] = draw(st.dictionaries(keys, VALUES, max_size=5))
    ipam_type = draw(IPAM_TYPES)
    if ipam_type is not None:
        out["type"] = ipam_type
    if ipam_type == "whereabouts":  # the pool it allocates from (docs/design.md#ipam)
        out["range"] = draw(st.sampled_from(["192.0.2.0/24", "fd00::/64", "192.0.2.10-192.0.2.20/24"]))
    elif ipam_type == "host-local" and draw(st.booleans()):
        out["subnet"] = "10.56.217.0/24"
    return out


IPAM = _ipam()

VF_SETTINGS_ACCEPTED: dict[str, st.SearchStrategy[JsonValue]] = {
    "vlan": st.integers(1, 4094),
    "vlanQoS": st.integers(0, 7),
    "vlanProto": st.sampled_from(["802.1q", "802.1Q", "802.1ad", "802.1AD"]),
    "spoofchk": st.sampled_from(["on", "off", ""]),
    "trust": st.sampled_from(["on", "off", ""]),
    "link_state": st.sampled_from(["auto", "enable", "disable", ""]),
    "min_tx_rate": st.integers(0, 100),
    "max_tx_rate": st.just(0) | st.integers(100, 2**32 - 1),
    "mac": st.sampled_from(["", "02:00:00:00:00:01"]),
}
"""Values sriov-cni's loader and the renderer accept (vlan non-zero, so QoS and 802.1ad may go with it)."""

VF_SETTINGS_ANY: dict[str, st.SearchStrategy[JsonValue]] = {
    "vlan": st.integers(-1, 4095) | st.sampled_from(["100", RawNumber("1e2"), None]),
    "vlanQoS": st.integers(-1, 8) | st.just(RawNumber("1.0")),
    "vlanProto": st.sampled_from(["802.1q", "802.1AD", "qinq", "", 5]),
    "spoofchk": st.sampled_from(["on", "off", "", True]),
    "trust": st.sampled_from(["on", "off", ""]),
    "link_state": st.sampled_from(["auto", "enable", "disable", "", "up", "AUTO"]),
    "min_tx_rate": st.integers(-1, 200),
    "max_tx_rate": st.integers(0, 2**32),
    "mac": st.sampled_from(["", "02:00:00:00:00:01", 7]),
}
"""Values on both sides of what sriov-cni's loader accepts."""

NETCONF_KEYS_IN_ANY_CASE = st.sampled_from(
    ["VLAN", "Vlan", "vlanqos", "MTU", "mtu", "Mac", "DNS", "dns", "Capabilities", "capabilities",
     "runtimeConfig", "RuntimeConfig", "Master", "VFID", "OrigVfState", "prevResult", "LINK_STATE",
     "\u017fpoofchk", "logLevel", "IPAM"]
)  # fmt: skip
"""Keys sriov-cni's NetConf reads (``logFile`` left out: sriov-cni would write its log there)."""
NETCONF_VALUES = (
    VALUES
    | st.dictionaries(
        st.sampled_from(["mac", "nameservers", "domain", "type", "Vlan", "x"]), VALUES, max_size=2
    )
    | st.dictionaries(st.text(max_size=4), st.booleans(), max_size=2)
    | st.lists(st.text(max_size=4), max_size=2)
)


@st.composite
def _template(
    draw: st.DrawFn, settings: dict[str, st.SearchStrategy[JsonValue]], netconf_keys: bool
) -> tuple[dict[str, JsonValue], dict[str, object]]:
    root: dict[str, JsonValue] = {"cniVersion": draw(st.sampled_from(template_fields.SUPPORTED_CNI_VERSIONS))}
    name = draw(st.none() | st.just("") | CNI_NAMES)
    if name is not None:
        root["name"] = name
    entry: dict[str, JsonValue] = {"type": "sriov", **draw(EXTRA)}
    chosen = draw(st.lists(st.sampled_from(sorted(settings)), unique=True, max_size=4))
    if settings is VF_SETTINGS_ACCEPTED and {"vlanQoS", "vlanProto"} & set(chosen):
        chosen.append("vlan")  # sriov-cni takes QoS and protocol only with a VLAN
    for key in dict.fromkeys(chosen):
        entry[key] = draw(settings[key])
    if netconf_keys:
        for key in draw(st.lists(NETCONF_KEYS_IN_ANY_CASE, unique=True, max_size=2)):
            entry.setdefault(key, draw(NETCONF_VALUES))
    if draw(st.booleans()):
        entry["ipam"] = draw(IPAM)
    if draw(st.booleans()):
        entry["deviceID"] = draw(st.sampled_from(["", PCI]))
    if draw(st.booleans()):
        entry["pciBusID"] = draw(st.sampled_from(["", PCI.upper()]))
    keys = list(entry)
    order = draw(st.permutations(keys))
    entry = {k: entry[k] for k in order}
    if draw(st.booleans()):
        root.update({k: v for k, v in draw(EXTRA).items() if k not in root})
        metas = draw(st.lists(st.builds(lambda extra: {"type": "tuning", **extra}, EXTRA), max_size=2))
        root["plugins"] = [entry, *metas]
    else:
        root.update({k: v for k, v in entry.items() if k not in root})
    indent = draw(st.sampled_from([None, 2, 4]))
    text = strict_json.encode(root) if indent is None else _indented(root, indent)
    metadata_name = draw(st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True))
    return root, nad(text, name=metadata_name)


def templates() -> st.SearchStrategy[tuple[dict[str, JsonValue], dict[str, object]]]:
    """A template the renderer accepts (as a value) and its source NAD with the template as text."""
    return _template(VF_SETTINGS_ACCEPTED, False)


def loader_templates() -> st.SearchStrategy[tuple[dict[str, JsonValue], dict[str, object]]]:
    """Like :func:`templates`, with VF settings and NetConf keys sriov-cni's loader may refuse."""
    return _template(VF_SETTINGS_ANY, True)


def _indented(value: JsonValue, indent: int, level: int = 0) -> str:
    """Pretty-print like ``json.dumps(indent=...)``, keeping RawNumber literals as written."""
    pad, inner = " " * (indent * level), " " * (indent * (level + 1))
    if isinstance(value, dict) and value:
        items = [
            f"{inner}{strict_json.encode(k)}: {_indented(v, indent, level + 1)}" for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list) and value:
        items = [inner + _indented(v, indent, level + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return strict_json.encode(value)


def sriov_entry(doc: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """The sriov entry of a template or rendered config (the root, or the first plugin of a conflist)."""
    plugins = doc.get("plugins")
    entry = plugins[0] if isinstance(plugins, list) else doc
    assert isinstance(entry, dict)
    return entry
