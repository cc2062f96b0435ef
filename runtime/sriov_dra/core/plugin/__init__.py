"""The plugin's own pure domain logic: the checkpoint model and codec, the claim plan, selections
and their updates, shadow objects, ResourceSlices and CDI specs.

Imported by the driver and by the host, kube and cli modules that serve it. Same rules as
:mod:`sriov_dra.core`: standard library and core only, no I/O. The operator and the guard never
import this package (an import-linter contract).
"""
