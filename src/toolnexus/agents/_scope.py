"""`TurnScope`: one admitted turn as the helpers that run it see it.

The turn body, the settle steps, the `task` tool and the escalator each work on one turn of one
handle in one runtime; they receive this scope — the runtime's state and verbs (`run`), the
handle, and the turn's own state — instead of three loose arguments. The scope holds no state
of its own: it is built once when the turn is admitted (`turn.begin_turn`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._handle import Handle
from ._turnstate import TurnState

if TYPE_CHECKING:  # pragma: no cover
    from ._core import RuntimeCore


@dataclass(frozen=True)
class TurnScope:
    """The runtime (`run`), the handle whose turn it is, and the turn's state."""

    run: "RuntimeCore"
    handle: Handle
    turn: TurnState
