"""What a durable run needs from the runtime whose state it commits, and nothing more.

The runtime's core and its durable run are made for each other: the core is built with the run's
conversation view as its store, so the run exists first and is attached to the core once, right
after (`DurableRun.attach`). The run then asks the host only for these few things; it never sees
the rest of the core.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from .._defs import AgentDef
    from .._handle import Handle


class DurableHost(Protocol):
    """The runtime side of a durable run (the agent runtime's core implements it)."""

    @property
    def root(self) -> "Handle":
        """The tree's root: a new run's first commit writes it; its first child is the entry agent."""

    @property
    def registry(self) -> "dict[str, AgentDef]":
        """The agent defs the run is made of (their fingerprint is part of the run's state)."""

    @property
    def on_pending(self) -> Optional[Callable[..., Any]]:
        """The host's hook for requests the store holds, or None (then nothing is told)."""

    def tell_pending(self, pending: Any) -> None:
        """Call `on_pending` with one request the store now holds."""

    def busy(self) -> bool:
        """Some turn or resume is live (the lease is kept, not given up)."""

    def run_status(self) -> str:
        """The run's status as a store lists it."""
