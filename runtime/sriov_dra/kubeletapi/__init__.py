"""gRPC stubs for the kubelet plugin protocols, generated from ``proto/`` and checked in sync."""
