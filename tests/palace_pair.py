"""A MemPalace palace driven as a user drives one: the real ``mempalace`` CLI in subprocesses and MemPalace's
own MCP server over JSON-RPC on stdio, on either backend, with answers made comparable.

Used by the parity tests: a Chroma palace and a postgres palace are built from the same files at the
same paths, the same commands and tool calls are run on both, and :func:`comparable` removes what
legitimately differs between two runs (the palace's own path, timestamps, durations, generated ids)
so that the rest can be compared as it is.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

MEMPALACE = str(Path(sys.executable).with_name("mempalace"))


class McpServer:
    """MemPalace's MCP server (``python -m mempalace.mcp_server``) spoken to over JSON-RPC on stdio."""

    def __init__(self, args: list, env: dict):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mempalace.mcp_server", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
            bufsize=1,
        )
        self.next_id = 0
        reply = self.request(
            "initialize",
            {
                "protocolVersion": "2024-11-05",
                "capabilities": {},
                "clientInfo": {"name": "mempalace-pg-tests", "version": "1"},
            },
        )
        assert "result" in reply, reply
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}) + "\n"
        )
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"MCP server exited: {self.proc.stderr.read()[-3000:]}")
            message = json.loads(line)
            if message.get("id") == self.next_id:
                return message

    def call(self, name: str, **arguments) -> Any:
        """A tool's answer: its JSON (or text), or ``{"isError": ...}`` for an error result."""
        reply = self.request("tools/call", {"name": name, "arguments": arguments})
        if "error" in reply:
            return {"jsonrpc_error": reply["error"].get("message")}
        result = reply["result"]
        text = "".join(c.get("text", "") for c in result.get("content", []))
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        return {"isError": value} if result.get("isError") else value

    def tool(self, name: str, **arguments) -> Any:
        """A tool's JSON answer; fails the test on an error or an answer that is not JSON."""
        value = self.call(name, **arguments)
        assert not (isinstance(value, dict) and value.keys() & {"isError", "jsonrpc_error"}), value
        assert not isinstance(value, str), f"{name} answered text, not JSON: {value[:300]}"
        return value

    def tools(self) -> list:
        return self.request("tools/list", {})["result"]["tools"]

    def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Palace:
    """One palace directory with its own MemPalace config and home, on ``backend``."""

    def __init__(self, root: Path, backend: str, embedding_url: str):
        self.backend = backend
        self.root = root / backend
        self.path = self.root / "palace"
        self.home = self.root / "home"
        self.config = self.root / "config"
        for d in (self.home, self.config):
            d.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ)
        self.env.update(
            HOME=str(self.home),
            MEMPALACE_CONFIG_DIR=str(self.config),
            NO_COLOR="1",
            COLUMNS="120",
            MEMPALACE_EMBEDDING_MODEL="openai-compat",
            MEMPALACE_EMBEDDING_API_URL=embedding_url,
            MEMPALACE_EMBEDDING_API_MODEL="hash",
            PYTHONIOENCODING="utf-8",
        )
        self.env.pop("MEMPALACE_BACKEND", None)
        self.env.pop("MEMPALACE_BACKEND_EXPLICIT", None)
        self.env.pop("MEMPALACE_PALACE_PATH", None)

    def backend_args(self) -> list:
        return ["--backend", "postgres"] if self.backend == "postgres" else []

    def cli(self, *args, stdin: Optional[str] = None, timeout: int = 600, env: Optional[dict] = None) -> dict:
        """``mempalace --palace P ARGS``: its exit code and output (stdout then stderr); ``env`` in place
        of the palace's own environment."""
        proc = subprocess.run(
            [MEMPALACE, "--palace", str(self.path), *args],
            env=self.env if env is None else env,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=stdin if stdin is not None else "",
            errors="backslashreplace",
        )
        return {"rc": proc.returncode, "out": proc.stdout + proc.stderr}

    def init_and_mine(self, corpus: Path) -> None:
        """``mempalace init`` (rooms from the folders) and ``mempalace mine`` of ``corpus`` into this
        palace on its backend, as a user runs them; each must succeed."""
        for args in (
            ("init", *self.backend_args(), "--yes", "--no-llm", str(corpus)),
            (*self.backend_args(), "mine", str(corpus)),
        ):
            done = self.cli(*args)
            assert done["rc"] == 0, done["out"]

    def mcp(self, *extra, env: Optional[dict] = None) -> McpServer:
        """MemPalace's MCP server on this palace; ``env`` in place of the palace's own."""
        return McpServer(["--palace", str(self.path), *extra], env or self.env)


# -- making two runs comparable ---------------------------------------------------------------------

_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?")
# generated per palace or per run by MemPalace: replica ids, logical clocks, event/artifact/task ids,
# the random part of triple ids, the stamp in diary entry ids
_GENERATED = [
    (re.compile(r"\d{13}-\d{6}-rep_[0-9a-f]{32}"), "<hlc>"),
    (re.compile(r"\brep_[0-9a-f]{32}\b"), "<replica>"),
    (re.compile(r"\b(evt|art)_\d{8}T\d{6}_[0-9a-f]{12}\b"), r"\1_<id>"),
    (re.compile(r"\b(task_[a-z0-9_]+?)_[0-9a-f]{8}\b"), r"\1_<id>"),
    (re.compile(r"\b(t_[^\s\"']+?)_[0-9a-f]{12}\b"), r"\1_<hash>"),
    (re.compile(r"_\d{8}_\d{12}_"), "_<stamp>_"),
]
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_DURATION = re.compile(r"\b\d+(\.\d+)?\s?(ms|s|sec|seconds)\b")
_FLOAT = re.compile(r"(?<![\w.])-?\d+\.\d{5,}")


#: comparable() rounds floats to this many digits; differences() takes two that rounding left this many
#: steps apart (and a little float error) as the same.
FLOAT_DIGITS = 4
FLOAT_STEPS_APART = 1.01


def comparable(value: Any, palace: Palace, *, digits: int = FLOAT_DIGITS) -> Any:
    """``value`` with what differs between any two runs replaced: this palace's paths, timestamps,
    durations, UUIDs and generated ids, the backend's name where MemPalace reports it; floats rounded to
    ``digits`` (cosine distances from two index implementations agree to about 1e-6).

    U+FFFD is removed: MemPalace's Chroma backend stores a NUL as U+FFFD, its pgvector backend (and
    this one) strip it, so "a\\x00b" reads back as "a\ufffdb" on one and "ab" on the other. That is
    the one rewritten value the comparison allows (docs/compatibility.md lists it)."""
    if isinstance(value, dict):
        return {
            comparable(k, palace, digits=digits): (
                "<backend>"
                if k == "backend" and v == palace.backend
                else comparable(v, palace, digits=digits)
            )
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [comparable(v, palace, digits=digits) for v in value]
    if isinstance(value, float):
        return round(value, digits)
    if not isinstance(value, str):
        return value
    text = value
    for path, name in (
        (palace.path, "<palace>"),
        (palace.config, "<config>"),
        (palace.home, "<home>"),
        (palace.root, "<root>"),
    ):
        text = text.replace(str(path), name)
    text = text.replace("\ufffd", "")
    text = _TIME.sub("<time>", text)
    text = _UUID.sub("<uuid>", text)
    for pattern, replacement in _GENERATED:
        text = pattern.sub(replacement, text)
    text = _DURATION.sub("<duration>", text)
    text = _FLOAT.sub(lambda m: f"{float(m.group(0)):.{digits}f}", text)
    return text


def differences(a: Any, b: Any, where: str = "") -> list[str]:
    """Where two comparable values differ, as readable lines (at most a few per value)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                out.append(f"{where}.{key}: only in {'postgres' if key in b else 'chroma'}")
            else:
                out += differences(a[key], b[key], f"{where}.{key}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += differences(x, y, f"{where}[{i}]")
        return out
    if isinstance(a, float) and isinstance(b, float) and abs(a - b) <= FLOAT_STEPS_APART * 10**-FLOAT_DIGITS:
        # one step of comparable()'s rounding apart: two values a hair apart can round either side of
        # a boundary, and Chroma does not keep a float metadata value exactly (a timestamp such as
        # 1796681292.5070693 comes back as 1796681292.507069), where PostgreSQL's jsonb does
        return []
    if a != b:
        if isinstance(a, str) and isinstance(b, str):
            import difflib

            lines = [
                line
                for line in difflib.unified_diff(
                    a.splitlines(), b.splitlines(), "chroma", "postgres", lineterm="", n=0
                )
                if not line.startswith(("---", "+++"))
            ]
            return [f"{where}: " + " | ".join(lines[:8])]
        chroma, postgres = json.dumps(a, default=str)[:300], json.dumps(b, default=str)[:300]
        return [f"{where}: chroma {chroma} != postgres {postgres}"]
    return []


__all__ = ["Palace", "McpServer", "comparable", "differences", "MEMPALACE"]
