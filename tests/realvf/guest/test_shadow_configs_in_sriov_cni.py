"""Every shadow config the renderer produces is one that sriov-cni's config loader accepts, on a real VF.

Templates are drawn as the renderer's property tests draw them (tests/fakes/render_templates.py:
ones the renderer must accept, and ones whose sriov entry carries sriov-cni's VF settings and keys
naming its other NetConf fields, in any case, on both sides of its limits) and rendered for a real
VF of the guest. The config sriov-cni gets from the runtime (libcni hands it the sriov entry with
the list's ``name`` and ``cniVersion``) goes to the pinned ``sriov`` binary as an ADD into a netns
that does not exist: sriov-cni decodes and checks the whole config (``SetLogging``, ``LoadConf``:
the VF's PF, its allocation record, its netdev, the VLAN and link-state limits) before it opens
the netns, so it answers ``failed to open netns`` for a config it accepts, having changed nothing
but taking its per-VF lock, and ``... failed to load netconf`` for one it refuses. A config the
renderer accepts must be accepted; a template the renderer refuses is sent too, and counted when
sriov-cni would have taken it (the renderer is stricter on purpose, docs/design.md#render).

The sample is fixed (derandomized, :data:`EXAMPLES` templates: each ADD is an exec under TCG).
"""

from __future__ import annotations

import collections
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.fakes import render_templates
from tests.realvf.guest import realvfs, sriovcni

from sriov_dra.core import render
from sriov_dra_rules import errors, strict_json
from sriov_dra_rules.strict_json import JsonValue

EXAMPLES = 60
NO_NETNS = "/run/netns/realvf-loader-check-no-such-netns"
ACCEPTED = "failed to open netns"
REFUSED = ("SRIOV-CNI failed to load netconf: ", "SetLogging(): failed to load netconf: ")
VERDICTS: collections.Counter[str] = collections.Counter()
"""(renderer verdict, sriov-cni verdict) counts over the sample, for the summary test."""


def as_sriov_cni_gets_it(config_text: str) -> dict[str, JsonValue]:
    """The rendered config as libcni hands it to the sriov plugin (its entry, the list's name and version)."""
    doc = strict_json.decode(config_text)
    assert isinstance(doc, dict)
    entry = render_templates.sriov_entry(doc)
    return {**entry, "name": doc["name"], "cniVersion": doc["cniVersion"]}


def sriov_cni_verdict(config: dict[str, JsonValue]) -> tuple[bool, str]:
    """(accepted, sriov-cni's message) for ``config``, sent as an ADD into :data:`NO_NETNS`."""
    env = {
        "CNI_COMMAND": "ADD",
        "CNI_CONTAINERID": "loader-check",
        "CNI_NETNS": NO_NETNS,
        "CNI_IFNAME": "net1",
        "CNI_PATH": str(sriovcni.CNI_PATH),
    }
    status, out = sriovcni.real_plugin(env, strict_json.encode(config).encode())
    try:
        msg = str(json.loads(out)["msg"])
    except (ValueError, KeyError, TypeError):
        pytest.fail(f"sriov-cni printed no CNI error (exit {status}): {out!r}")
    if status != 0 and msg.startswith(ACCEPTED):
        return True, msg
    if status != 0 and msg.startswith(REFUSED):
        return False, msg
    pytest.fail(f"sriov-cni answered neither an accepted nor a refused config (exit {status}): {msg}")


@pytest.fixture(scope="module")
def vf_bdf(real_pfs: list[realvfs.RealPf]) -> str:
    """A VF with its netdev in the host and no allocation record (the third VF of the first PF)."""
    sriovcni.require_binaries("sriov")
    bdf = realvfs.raw_vfs(real_pfs[0])[2].bdf
    assert sriovcni.allocation(bdf) is None
    return bdf


@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(case=st.one_of(render_templates.templates(), render_templates.loader_templates()))
def test_every_config_the_renderer_accepts_is_accepted_by_sriov_cnis_config_loader(
    vf_bdf: str, case: tuple[dict[str, JsonValue], dict[str, object]]
) -> None:
    _, source = case
    try:
        rendered = render.render_shadow_config(source, vf_bdf)
    except errors.InvalidSpec as refused:
        config = as_sriov_cni_gets_it(_unrendered(source, vf_bdf))
        accepted, _ = sriov_cni_verdict(config)
        VERDICTS[
            f"renderer refused ({refused.reason.value}), sriov-cni {'accepted' if accepted else 'refused'}"
        ] += 1
        return
    config = as_sriov_cni_gets_it(rendered.config_text)
    accepted, msg = sriov_cni_verdict(config)
    VERDICTS[f"renderer accepted, sriov-cni {'accepted' if accepted else 'refused'}"] += 1
    assert accepted, f"sriov-cni refuses a config the renderer produced: {msg}\n{strict_json.encode(config)}"


def _unrendered(source: dict[str, object], bdf: str) -> str:
    """The template with ``deviceID`` set as the renderer would set it, without its checks."""
    spec = source["spec"]
    assert isinstance(spec, dict)
    doc = strict_json.decode(str(spec["config"]))
    assert isinstance(doc, dict)
    entry = render_templates.sriov_entry(doc)
    entry["deviceID"] = bdf
    metadata = source["metadata"]
    assert isinstance(metadata, dict)
    doc["name"] = doc.get("name") or metadata["name"]
    return strict_json.encode(doc)


def test_the_sample_held_configs_both_accepted_and_refused(vf_bdf: str) -> None:
    print(f"shadow configs against sriov-cni's loader: {dict(VERDICTS)}")
    assert sum(VERDICTS.values()) >= EXAMPLES // 2, "runs after the property test of this module (file order)"
    assert VERDICTS["renderer accepted, sriov-cni accepted"] > 0, dict(VERDICTS)
    assert sum(n for k, n in VERDICTS.items() if k.startswith("renderer refused")) > 0, dict(VERDICTS)
    assert sriovcni.allocation(vf_bdf) is None, "no ADD of the sample allocated the VF"
