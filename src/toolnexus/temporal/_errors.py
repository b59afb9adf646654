"""What the Temporal integration can refuse, each saying what went wrong and what to do.

Answers that a run's validator refuses come back as the same errors a durable store gives:
`AnswerAlreadyApplied` for a request that was answered (or declined by its expiry timer), and a
`ResumeError` — here its subclass `AnswerRejected`, with `.reason` — for an unknown request id,
an expired request or an answer that violates the request's schema. Start and lookup use the
store's `RunExists` / `RunNotFound`.
"""

from __future__ import annotations

from typing import Optional

from ..client._errors import ResumeError
from ..errors import ToolnexusError

INSTALL_HINT = "pip install 'toolnexus[temporal]'"


class TemporalRunError(ToolnexusError):
    """Base of the Temporal integration's own errors."""


class TemporalNotInstalled(TemporalRunError, ImportError):
    """`toolnexus.temporal` needs the `temporalio` SDK."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"toolnexus.temporal needs the Temporal SDK ({cause}); install it with {INSTALL_HINT}")


class TemporalUnavailable(TemporalRunError, ConnectionError):
    """The Temporal server could not be reached."""

    def __init__(self, address: str, cause: BaseException) -> None:
        self.address = address
        super().__init__(f"toolnexus.temporal: cannot reach the Temporal server at {address}: {cause} — is it "
                         "running, and is the address host:port of its frontend (default port 7233)?")


class AnswerRejected(TemporalRunError, ResumeError):
    """The run refused an answer before anything ran; nothing changed. `.reason` is one of
    `unknown` (no pending request has this id), `expired`, `schema` or `invalid`."""

    def __init__(self, message: str, *, reason: str, request_id: Optional[str] = None,
                 run_id: Optional[str] = None) -> None:
        self.reason = reason
        self.request_id = request_id
        self.run_id = run_id
        super().__init__(message)


class PayloadTooLarge(TemporalRunError, ValueError):
    """A value bound for workflow history is over Temporal's per-payload limit."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            f"toolnexus.temporal: {what} is {size} bytes, over the {limit}-byte payload limit (Temporal refuses "
            "payloads over 2 MB) — keep large transcripts out of history with a by-reference payload codec "
            "(toolnexus.temporal.ExternalPayloadCodec on every worker and client), or shorten the transcript "
            "(toolnexus.agents.compactor)")


class LLMCallFailed(TemporalRunError):
    """An LLM-call activity failed for good (after its retry policy); the turn ends in error with
    the provider's message."""
