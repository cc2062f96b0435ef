"""Every node touch: sysfs under a configurable root, driver binding, netlink, CDI, state files.

Only this package reads or writes the node (and only ``host.netlink`` imports pyroute2).
"""
