"""sriov-dra: automatic SR-IOV secondary networking for Kubernetes with DRA and Multus.

Layers (docs/layout.md), arrows pointing down only:
``lab``/``cli`` > ``driver``/``guard``/``operator`` > ``kube``/``host``/``kubeletapi`` > ``core``.
"""

__version__ = "0.1.0"
