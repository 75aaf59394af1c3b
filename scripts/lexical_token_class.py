#!/usr/bin/env python3
"""Print the regular-expression class of the characters lexical search keeps, for
sql/0006_words_and_order.sql.

A word is a run of characters of the Unicode categories SQLite FTS5's ``unicode61`` tokenizer keeps by
default (``categories='L* N* Co'``: letters, numbers, private use); everything else separates words.
PostgreSQL's own ``[:alnum:]`` depends on the database's locale and provider (ICU splits at vowel
signs, libc and the builtin provider keep different digits), so the class is spelled out, code point
ranges from Python's ``unicodedata``, written as one PostgreSQL escape string (``\\uXXXX``) continued over
lines.

    python3 scripts/lexical_token_class.py > /tmp/class.sql
"""

import unicodedata


def token_ranges() -> list[tuple[int, int]]:
    ranges, start = [], None
    for cp in range(0x110000):
        keep = not 0xD800 <= cp <= 0xDFFF and (
            unicodedata.category(chr(cp))[0] in "LN" or unicodedata.category(chr(cp)) == "Co"
        )
        if keep and start is None:
            start = cp
        elif not keep and start is not None:
            ranges.append((start, cp - 1))
            start = None
    if start is not None:
        ranges.append((start, 0x10FFFF))
    return ranges


def escape(cp: int) -> str:
    if 0x30 <= cp <= 0x39 or 0x41 <= cp <= 0x5A or 0x61 <= cp <= 0x7A:
        return chr(cp)
    return f"\\u{cp:04X}" if cp <= 0xFFFF else f"\\U{cp:08X}"


def main() -> None:
    parts = [escape(a) if a == b else f"{escape(a)}-{escape(b)}" for a, b in token_ranges()]
    lines, line = [], ""
    for part in parts:
        if len(line) + len(part) > 96:
            lines.append(line)
            line = ""
        line += part
    lines.append(line)
    print(f"-- {len(parts)} ranges, Unicode {unicodedata.unidata_version}")
    # an escape string continued over lines: only the first piece carries the E
    print("\n".join(("E'" if i == 0 else " '") + line + "'" for i, line in enumerate(lines)))


if __name__ == "__main__":
    main()
