"""Real text nobody here wrote, for tests and benchmarks: documentation Debian ships as packages.

* ``python3.11-doc``: the Python documentation's reStructuredText sources (``*.rst.txt``);
* ``postgresql-doc-15``: PostgreSQL's manual, as HTML (tags stripped);
* ``linux-doc-6.1``: the kernel's documentation (``*.rst.gz``), for the larger benchmark corpora.

``scripts/test.sh`` installs the first two; a missing package fails the test that needs it with the
command that installs it (tests never skip). Files are read in sorted order and cut into
paragraph-aligned chunks of at most ``chunk`` characters, the size of MemPalace drawers, so the same
call always yields the same documents.
"""

from __future__ import annotations

import gzip
import html
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

SOURCES = {
    "python3.11-doc": (Path("/usr/share/doc/python3.11/html/_sources"), "*.rst.txt"),
    "postgresql-doc-15": (Path("/usr/share/doc/postgresql-doc-15/html"), "*.html"),
    "linux-doc-6.1": (Path("/usr/share/doc/linux-doc-6.1/Documentation"), "*.rst.gz"),
}
DEFAULT_PACKAGES = ("python3.11-doc", "postgresql-doc-15")

_TAG = re.compile(r"<[^>]+>")
_SPACE = re.compile(r"[ \t]+")


@dataclass(frozen=True)
class Document:
    path: str  # the file it came from
    text: str  # one chunk of it


def files(package: str) -> list[Path]:
    """The package's documentation files, sorted; fails the test when the package is missing."""
    root, pattern = SOURCES[package]
    found = sorted(root.rglob(pattern)) if root.is_dir() else []
    if not found:
        pytest.fail(
            f"real text from Debian's {package} is missing ({root}): install it with "
            f"`apt-get install {package}` (scripts/test.sh does)",
            pytrace=False,
        )
    return found


def read(path: Path) -> str:
    if path.suffix == ".gz":
        raw = gzip.decompress(path.read_bytes())
    else:
        raw = path.read_bytes()
    text = raw.decode("utf-8", "replace")
    return html_text(text) if path.suffix == ".html" else text


def html_text(text: str) -> str:
    """An HTML page as plain text: tags dropped, entities decoded, runs of blank lines made one."""
    text = html.unescape(_TAG.sub(" ", text))
    text = "\n".join(_SPACE.sub(" ", line).strip() for line in text.splitlines())
    return re.sub(r"\n{3,}", "\n\n", text)


def chunks(text: str, chunk: int) -> list[str]:
    """Paragraph-aligned pieces of at most ``chunk`` characters (a longer paragraph is cut)."""
    out, current = [], ""
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        if not para:
            continue
        while len(para) > chunk:
            out.append(para[:chunk])
            para = para[chunk:]
        if current and len(current) + len(para) + 2 > chunk:
            out.append(current)
            current = ""
        current = f"{current}\n\n{para}" if current else para
    if current:
        out.append(current)
    return out


def real_documents(
    limit: int, *, packages=DEFAULT_PACKAGES, chunk: int = 1500, per_file: int = 3
) -> list[Document]:
    """``limit`` chunks of real documentation, spread over the packages' files (at most ``per_file``
    chunks from each file, files taken in sorted order, round-robin over the packages)."""
    lists = [files(p) for p in packages]
    out: list[Document] = []
    index = 0
    while len(out) < limit and any(index < len(fs) for fs in lists):
        for fs in lists:
            if index < len(fs) and len(out) < limit:
                path = fs[index]
                for piece in chunks(read(path), chunk)[:per_file]:
                    if len(out) < limit:
                        out.append(Document(str(path), piece))
        index += 1
    return out


__all__ = [
    "Document",
    "real_documents",
    "files",
    "read",
    "html_text",
    "chunks",
    "SOURCES",
    "DEFAULT_PACKAGES",
]
