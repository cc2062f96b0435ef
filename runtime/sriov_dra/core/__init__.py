"""Pure logic shared by every part: identities, rendering, selections, codecs, resolution.

This package owns the contracts of ARCHITECTURE.md §4. It must never do I/O, read a clock, or
import anything but the standard library and its own modules (a test enforces this).
"""
