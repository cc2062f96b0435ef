"""The operator (``sriov-dra-operator``): SriovNetwork and node-policy DRA mappings."""
