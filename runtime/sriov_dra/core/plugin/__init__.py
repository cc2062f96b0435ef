"""The plugin's own pure domain logic (imported by the driver, and by host/kube/kubeletapi/cli
modules that serve it): the checkpoint model and codec, the claim plan, selections and their
updates, shadow objects, ResourceSlices and CDI specs. (Device health stays in :mod:`sriov_dra.core`:
``host.netlink``, which the guard imports too, reads PF carrier into it.)

Same rules as :mod:`sriov_dra.core`: standard library and core only, no I/O. The operator and the
guard never import this package (an import-linter contract).
"""
