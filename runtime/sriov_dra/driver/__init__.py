"""The DRA kubelet plugin for SR-IOV VFs (``sriov-dra-plugin``)."""
