"""The plumbing every service shares: one log schema, one health/metrics server, one thread starter.

The plugin, the guard and the operator each used to build these themselves, with three log
schemas and three meanings of ``/healthz``. They now use this package, so one log filter on a claim
UID follows an operation across services and every probe means the same thing (issue 14 item 3).
It owns no service logic and imports only the standard library and ``prometheus_client``.
"""
