"""Every API-server call: typed reads and writes with preconditions, error classification.

Only this package imports the ``kubernetes`` client.
"""
