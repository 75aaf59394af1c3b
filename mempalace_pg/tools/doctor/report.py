"""A doctor's report: each check's status, finding and fix, and the report as text."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail
    finding: str
    fix: Optional[str] = None
    # a known defect of an extension's version (db/defects.py), as data: key, extension, version,
    # fixed_in, what, consequence, fix, reference (and, for one that breaks isolation, palace_roles)
    defect: Optional[dict] = None

    def as_dict(self) -> dict:
        """The check for --json; ``defect`` only on the checks that name one."""
        out = asdict(self)
        if self.defect is None:
            del out["defect"]
        return out


@dataclass
class Report:
    target: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.status != "fail" for c in self.checks)

    def add(
        self, name: str, status: str, finding: str, fix: Optional[str] = None, defect: Optional[dict] = None
    ) -> Check:
        check = Check(name, status, finding, fix, defect)
        self.checks.append(check)
        return check

    def as_dict(self) -> dict:
        return {"target": self.target, "ok": self.ok, "checks": [c.as_dict() for c in self.checks]}


def render(report: Report) -> str:
    marks = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}
    lines = [f"mempalace-pg doctor: {report.target}"]
    for c in report.checks:
        lines.append(f"  [{marks[c.status]}] {c.name}: {c.finding}")
        if c.fix and c.status != "ok":
            lines.append(f"         fix: {c.fix}")
    failed = sum(c.status == "fail" for c in report.checks)
    warned = sum(c.status == "warn" for c in report.checks)
    lines.append("all good" if not failed and not warned else f"{failed} to fix, {warned} warning(s)")
    return "\n".join(lines)


__all__ = ["Check", "Report", "render"]
