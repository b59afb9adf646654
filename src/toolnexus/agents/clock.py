"""The runtime's notion of time: its `Clock` protocol, the real clock and a virtual one for tests.

Everything in the agent runtime that waits or measures (wait timeouts, the close grace period,
`max_wall_ms`, heartbeats, and — through each turn's client `timer` — retry backoff and run
deadlines) goes through one injected `Clock`, so a test can drive time by hand with
`VirtualClock.advance(...)` instead of sleeping.

A clock may also offer `utc_now()` (an aware `datetime`): then that is the wall time the runtime
checks a request's `expiresAt` against, in `resume` and in each turn's client, instead of the
machine's. A clock that follows a Temporal workflow's time does (`toolnexus.temporal`), so an
expiry decision replays the same way it was first made. `wall_now(clock)` reads it.

The clocks themselves live in `toolnexus._clock`, shared with the client and A2A polling, so one
clock object fits all three; this module is where the runtime's users import them from. It does
not schedule turns or know about handles; it only tells time and fires timers.
"""

from __future__ import annotations

from .._clock import AsyncioClock, Clock, VirtualClock, wall_now

__all__ = ["Clock", "AsyncioClock", "VirtualClock", "wall_now"]
