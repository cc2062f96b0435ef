"""Stand-ins the product does not ship: fake sysfs trees and their kernel, the fault killer,
simulated Node heartbeats and the netlink editors that build the lab's VF stand-ins."""
