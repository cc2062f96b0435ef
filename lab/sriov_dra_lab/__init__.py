"""The local lab: a real control plane, simulated nodes and a kubelet simulator."""
