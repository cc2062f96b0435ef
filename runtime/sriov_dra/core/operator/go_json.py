"""Go's ``json.Indent``, reproduced byte for byte: how the upstream operator lays out a NAD's config.

The one re-indenter whose output must equal upstream's exactly (byte equality avoids update loops
between two renderers): one element per line, ``"key": value``, empty ``{}``/``[]`` compact,
literals copied as written. Never re-encodes a literal or accepts text that is not strict JSON.
"""

from __future__ import annotations

import re
from typing import Final

from sriov_dra_rules import strict_json

STRING_LITERAL: Final = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
"""One JSON string literal, escapes included (matched, never decoded, so it is copied as written)."""


def go_json_indent(text: str, indent: str = "    ") -> str:
    """Re-indent JSON text the way Go's ``json.Indent(dst, src, "", indent)`` does.

    Shapes: one element per line, ``"key": value``, empty ``{}``/``[]`` kept compact, string and
    number literals copied byte for byte (no re-escaping, no number normalisation).
    Raises: InvalidSpec when ``text`` is not one strict JSON value (NaN/Infinity, a repeated key).
    """
    strict_json.decode(text)
    out: list[str] = []
    depth = 0
    need_indent = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
            continue
        if need_indent and c not in "]}":
            need_indent = False
            depth += 1
            out.append("\n" + indent * depth)
        if c == '"':
            match = STRING_LITERAL.match(text, i)
            assert match is not None  # validated above
            out.append(match.group())
            i = match.end()
            continue
        if c in "{[":
            out.append(c)
            need_indent = True
        elif c == ",":
            out.append(",\n" + indent * depth)
        elif c == ":":
            out.append(": ")
        elif c in "}]":
            if need_indent:
                need_indent = False
            else:
                depth -= 1
                out.append("\n" + indent * depth)
            out.append(c)
        else:
            out.append(c)
        i += 1
    return "".join(out)
