"""The operator's ``--supported-nic-ids`` file is read strictly: a repeated key stops start-up."""

from __future__ import annotations

from pathlib import Path

import pytest

from sriov_dra.core.operator import node_policy
from sriov_dra.operator import __main__ as entrypoint
from sriov_dra_rules import errors

CONFIGMAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: supported-nic-ids
data:
  Intel_i40e_XXV710: "8086 158b 154c"
  Mellanox_MT27800: "15b3 1017 1018"
  Intel_i40e_XXV710: "8086 0000 0000"
"""


def test_repeated_nic_entry_is_refused_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "nics.yaml"
    path.write_text(CONFIGMAP)
    with pytest.raises(errors.InvalidSpec) as caught:
        entrypoint.load_nic_ids(str(path))
    assert [e.path for e in caught.value.errors] == ["$.data.Intel_i40e_XXV710"]
    assert "first at line 6 column 3, again at line 8 column 3" in caught.value.errors[0].message


def test_repeated_nic_entry_exits_2_naming_the_file_and_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nics.json"
    path.write_text('{"Intel": "8086 158b 154c", "Intel": "8086 1592 1889"}')
    assert entrypoint.main(["--namespace", "x", "--supported-nic-ids", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path} is not strict YAML" in err and "$.Intel: repeated key 'Intel'" in err


def test_unique_nic_entries_load_as_before(tmp_path: Path) -> None:
    path = tmp_path / "nics.yaml"
    path.write_text(CONFIGMAP.rsplit("\n", 2)[0] + "\n")
    assert entrypoint.load_nic_ids(str(path)) == (
        node_policy.NicId("15b3", "1017", "1018"),
        node_policy.NicId("8086", "158b", "154c"),
    )
