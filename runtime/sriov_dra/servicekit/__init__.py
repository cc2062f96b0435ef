"""The plumbing every service shares: one log schema, one health/metrics server, one thread starter.

So one log filter on a claim UID follows an operation across the plugin, the guard and the
operator, and every probe means the same thing. No service logic; standard library and
``prometheus_client`` only.
"""
