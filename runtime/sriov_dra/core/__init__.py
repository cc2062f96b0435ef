"""Pure logic shared by every part: identities, rendering, selections, codecs, resolution.

Owns the cross-part contracts (docs/layout.md, "Who owns which contract"). No I/O, no clock, and
only the standard library and its own modules (a test enforces this).
"""
