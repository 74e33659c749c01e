"""RFC 8785 (JSON Canonicalization Scheme): the bytes of a certificate that Steward and the agent
both sign. Members sorted by the UTF-16 code units of their names, no whitespace, strings and
numbers written as ECMAScript's ``JSON.stringify`` writes them.

A small canonicaliser rather than a dependency: certificates hold only strings, integers, null,
booleans, arrays and objects, and no RFC 8785 library is packaged by Debian. Its output is tested
against vectors made with the ``canonicalize`` npm package the server uses
(tests/vectors/jcs.json), and against certificates Steward signs.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any


def _utf16_key(name: str) -> bytes:
    return name.encode("utf-16-be")


def _number(value: float) -> str:
    """ECMAScript Number::toString of a finite double (RFC 8785, section 3.2.2.3)."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError("NaN and Infinity have no JSON form")
    if value == 0:
        return "0"
    # repr gives the shortest digits that round-trip, as ECMAScript does; only the layout differs.
    parts = Decimal(repr(abs(value))).as_tuple()
    all_digits = "".join(str(d) for d in parts.digits)
    n = len(all_digits) + int(parts.exponent)  # where the decimal point goes
    digits = all_digits.lstrip("0")
    n -= len(all_digits) - len(digits)
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        text = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return ("-" if value < 0 else "") + text


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int):
        out.append(str(value) if abs(value) < 2**53 else _number(float(value)))
    elif isinstance(value, float):
        out.append(_number(value))
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        for i, key in enumerate(sorted(value, key=_utf16_key)):
            if not isinstance(key, str):
                raise TypeError("JSON object names are strings")
            if i:
                out.append(",")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    else:
        raise TypeError(f"{type(value).__name__} has no JSON form")


def canonicalize(value: Any) -> str:
    """The RFC 8785 text of a JSON value (as parsed by ``json.loads``)."""
    out: list[str] = []
    _write(value, out)
    return "".join(out)


def canonical_bytes(value: Any) -> bytes:
    return canonicalize(value).encode("utf-8")
