"""The answer rules' one home: the claim held for a block, the refusal wording, the expiry parser.

`durable.rules.claimed` is what `resume`, `expire_request` and a worker's apply use to hold an
answer's claim while the run is restored; `client.tool_calls.answer_refusal` is the wording every
resume path refuses an answer with; `durable.rules.expiry_of` is the one `expiresAt` parser.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Optional

import pytest

from toolnexus.client._tool_calls import answer_refusal, expires_at
from toolnexus.durable import DEFAULT_LEASE_TTL
from toolnexus.durable._model import Holder
from toolnexus.durable._rules import claimed, expires_at_epoch, expiry_of
from toolnexus.types import Answer, Request

HOLDER = Holder("h1", "here", 1)


class Ledger:
    """A store's claim verbs, recorded."""

    def __init__(self, *, refuse: bool = False, fail_unclaim: bool = False) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.refuse = refuse
        self.fail_unclaim = fail_unclaim

    async def claim(self, request_id: str, holder: Holder, answer: dict[str, Any], *, ttl: float,
                    run_id: Optional[str] = None) -> None:
        self.calls.append(("claim", request_id, holder.id, answer["ok"], ttl, run_id))
        if self.refuse:
            raise RuntimeError("already applied")

    async def unclaim(self, request_id: str, holder: Holder) -> None:
        self.calls.append(("unclaim", request_id, holder.id))
        if self.fail_unclaim:
            raise OSError("store down")


async def test_a_claim_held_through_a_block_that_succeeds_is_kept() -> None:
    store = Ledger()
    async with claimed(store, "r1", HOLDER, {"id": "r1", "ok": True}, run_id="run-1"):  # type: ignore[arg-type]
        pass
    assert store.calls == [("claim", "r1", "h1", True, DEFAULT_LEASE_TTL, "run-1")]


async def test_a_block_that_fails_gives_the_claim_back_and_raises_its_error() -> None:
    store = Ledger()
    with pytest.raises(ValueError, match="restore failed"):
        async with claimed(store, "r1", HOLDER, {"id": "r1", "ok": True}, ttl=5.0):  # type: ignore[arg-type]
            raise ValueError("restore failed")
    assert store.calls == [("claim", "r1", "h1", True, 5.0, None), ("unclaim", "r1", "h1")]


async def test_a_claim_the_caller_holds_is_not_taken_again_but_is_given_back() -> None:
    store = Ledger()
    with pytest.raises(ValueError):
        async with claimed(store, "r1", HOLDER):  # type: ignore[arg-type]
            raise ValueError("restore failed")
    assert store.calls == [("unclaim", "r1", "h1")]


async def test_a_refused_claim_runs_nothing_and_gives_nothing_back() -> None:
    store = Ledger(refuse=True)
    ran = False
    with pytest.raises(RuntimeError, match="already applied"):
        async with claimed(store, "r1", HOLDER, {"id": "r1", "ok": True}):  # type: ignore[arg-type]
            ran = True
    assert not ran and store.calls == [("claim", "r1", "h1", True, DEFAULT_LEASE_TTL, None)]


async def test_a_give_back_that_fails_is_warned_about_and_the_blocks_error_stands(caplog: Any) -> None:
    store = Ledger(fail_unclaim=True)
    with pytest.raises(ValueError, match="restore failed"):
        async with claimed(store, "r1", HOLDER):  # type: ignore[arg-type]
            raise ValueError("restore failed")
    assert "giving back the claim on 'r1' failed: store down" in caplog.text


def test_the_refusal_wording() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    request = Request(id="r1", kind="input", prompt="how many?", data={"schema": schema})
    assert answer_refusal(request, Answer(id="r1", ok=True, data={"n": 3})) is None
    assert answer_refusal(request, Answer(id="r1", ok=False)) is None  # a decline has no data to fail
    wrong = answer_refusal(request, Answer(id="r1", ok=True, data={"n": "three"}))
    assert wrong is not None and wrong.startswith("the answer to 'r1' does not match the request's schema: ")
    plain = Request(id="r2", kind="input", prompt="say")
    odd = answer_refusal(plain, Answer(id="r2", ok=True, data={"x": float("nan")}))
    assert odd is not None and odd.startswith("the answer to 'r2' holds data JSON does not have: ")


@pytest.mark.parametrize("raw, expected", [
    ("2030-01-02T03:04:05Z", datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ("2030-01-02t03:04:05z", datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ("2030-01-02T03:04:05", datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)),  # naive = UTC
    ("2030-01-02T05:04:05+02:00", datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ("not a time", None),
    ("  ", None),
    (None, None),
    (17, None),
])
def test_one_expiry_parser_agrees_with_the_two_readers(raw: Any, expected: Optional[datetime]) -> None:
    assert expiry_of(raw) == expected
    assert expires_at(Request(id="r", kind="input", prompt="p", expiresAt=raw)) == expected
    assert expires_at_epoch({"expiresAt": raw}) == (expected.timestamp() if expected is not None else None)
