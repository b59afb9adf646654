"""The one exception root: every error toolnexus raises derives from `ToolnexusError`.

Callers can write `except ToolnexusError` to catch ours and nothing else. Each subclass keeps the
builtin base it had before (a `ResumeError` is still a `ValueError`), so existing `except
ValueError` code keeps working.

The tree (kept in this docstring; each area's errors are defined next to the code that raises
them and listed here):

    ToolnexusError
    ├── ProviderError            client: a non-2xx reply from the LLM endpoint
    ├── ProviderResponseError    client: a 2xx body of the wrong shape (also ValueError)
    ├── RunTimeout               client: the run's deadline ran out (also TimeoutError)
    ├── RunCancelled             client: the run's cancel event was set
    ├── ContentPartError         content/client: an invalid, oversize or unreadable content part (also ValueError)
    ├── UnsupportedPartError     content/client: a part a provider wire has no block for (also ValueError)
    ├── ResumeError              client/agents: a resume that cannot proceed (also ValueError)
    ├── ClassifierError          classifier/judge: bad questions or input, a failed call, a bad answer
    │   ├── BatteryConfigError   judge_batteries: a battery built without a usable option (also ValueError)
    │   └── ContentGuardBlocked  judge_batteries: the content guard hook blocked the latest user text
    ├── ACPError                 acp: the agent failed, timed out or replied with an error (also RuntimeError)
    │   └── ACPPermissionTimeoutError  acp: a turn got no reply within its timeout
    ├── StoreError               durable/stores: base of the durable-store errors (durable/errors.py)
    │   ├── StoreUnavailable     the store cannot be reached or written; what was committed is intact
    │   ├── StoreVersionError    data written by a newer toolnexus
    │   ├── RunNotFound          no run with this id (also KeyError)
    │   ├── RunExists            a run id used twice
    │   ├── RunInProgress        another live process holds the run's lease
    │   ├── RunChanged           another process wrote the run since this runtime did
    │   ├── LeaseLost            the lease was taken over: this runtime stopped writing
    │   ├── AnswerAlreadyApplied the request was answered already (or is being answered now)
    │   ├── RequestWithdrawn     the request was cancelled by an interrupt
    │   ├── StoreConflict        a client conversation changed under its writer
    │   └── RestoreError         a run cannot be restored with the definitions given (also ValueError)
    ├── TemporalRunError         temporal: base of the Temporal integration's errors (temporal/errors.py)
    │   ├── TemporalNotInstalled the temporalio SDK is missing (also ImportError)
    │   ├── TemporalUnavailable  the Temporal server cannot be reached (also ConnectionError)
    │   ├── AnswerRejected       a run's validator refused an answer (also ResumeError, so ValueError)
    │   ├── PayloadTooLarge      a value bound for workflow history is over the payload limit (also ValueError)
    │   └── LLMCallFailed        an LLM-call activity failed for good
    └── ServeError               serve/mcp_serve: base of the serving errors (mcp_serve/errors.py)
        ├── ServeConfigError     a bad serve profile, address or limit value (also ValueError)
        │   ├── UnsafeServeError     shell/file built-ins served without a token: refused
        │   └── UnknownStoreError    an unknown A2A task-store selector
        └── ServeTypeError       a serve profile value of the wrong type (also TypeError)
"""

from __future__ import annotations

__all__ = ["ToolnexusError"]


class ToolnexusError(Exception):
    """Base of every error toolnexus raises."""
