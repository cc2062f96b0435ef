"""The operator's own pure domain logic: SriovNetwork rendering and references, node policies,
their overlap rules, the DRA policy plan and its verdicts, generated objects and conditions.

Same rules as :mod:`sriov_dra.core`: standard library and core only, no I/O. The plugin and the
guard never import this package (an import-linter contract).
"""
