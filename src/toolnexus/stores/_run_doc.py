"""`RunDoc`: one run as a document, the shape the memory and file stores keep (and page through)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..durable._model import RUN_FORMAT


@dataclass
class RunDoc:
    """One run as a document (messages and records as JSON text)."""

    run_id: str
    kind: str
    entry_agent: Optional[str]
    status: str
    created_at: float
    updated_at: float
    version: int = 0
    format: int = RUN_FORMAT
    state: Optional[str] = None
    result: Optional[str] = None
    lease: Optional[dict[str, Any]] = None
    lease_expires: Optional[float] = None
    handles: dict[str, str] = field(default_factory=dict)
    conversations: dict[str, list[str]] = field(default_factory=dict)
    calls: dict[str, str] = field(default_factory=dict)  # "<conv>\x00<call id>" → entry
    counts: dict[str, int] = field(default_factory=dict)  # conv → number of stored messages
    sizes: dict[str, int] = field(default_factory=dict)  # file store: conv → committed bytes
    trace: list[str] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        """The small part (everything but transcripts and trace)."""
        return {"run_id": self.run_id, "kind": self.kind, "entry_agent": self.entry_agent, "status": self.status,
                "created_at": self.created_at, "updated_at": self.updated_at, "version": self.version,
                "format": self.format, "state": self.state, "result": self.result, "lease": self.lease,
                "lease_expires": self.lease_expires, "handles": self.handles, "calls": self.calls,
                "counts": self.counts}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "RunDoc":
        doc = cls(row["run_id"], row["kind"], row.get("entry_agent"), row["status"], row["created_at"],
                  row["updated_at"])
        for key in ("version", "format", "state", "result", "lease", "lease_expires"):
            setattr(doc, key, row.get(key))
        doc.version = int(doc.version or 0)
        doc.format = int(doc.format or RUN_FORMAT)
        doc.handles = dict(row.get("handles") or {})
        doc.calls = dict(row.get("calls") or {})
        doc.counts = dict(row.get("counts") or {})
        return doc
