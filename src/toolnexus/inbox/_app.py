"""`Inbox`: the web inbox as an ASGI app — the waiting requests of a store, answered by people.

Routes (under wherever the app is mounted; `root_path` is honoured):

| route | what |
|---|---|
| `GET /` | the waiting requests, oldest first, paged (`after=`), filtered by `agent`, `kind`, `older_than` (`5m`, `1h`, `1d`), `assignee` (a group) and `mine` (what I may answer); `fragment=rows` returns the rows only |
| `GET /events` | server-sent events: `changed` whenever the store's waiting requests change (the page then fetches its rows again: no reload) |
| `GET /r/<id>` | one request: what is asked and why (tool, arguments, agent path, the transcript so far) and its answer form |
| `POST /r/<id>` | the answer: approve, approve with edited arguments, reject with a message, always |
| `GET, POST /link/<id>/<token>` | a signed answer link: the confirmation page, then (POST) the answer — no login |
| `GET, POST /login`, `POST /logout` | the token login (`TokenAuth`) |
| `GET /static/inbox.js`, `/static/inbox.css` | the page's script and style |

How an answer is applied: by default it is submitted to the store's work queue
(`store.submit_answer`): checked and claimed at once (a second answer, from anywhere, is refused),
and applied by a `toolnexus worker` of the fleet — the page returns at once and says so. A host
that applies answers itself passes `apply=` (an async callable taking the `Answer`), e.g. one that
resumes the run in its own process with `toolnexus.agents.resume`.

Before anything is submitted the inbox checks, in this order: the request still waits; the person
may answer it (`answerers`: the request's group, `toolnexus.approvals.Answerers`); the answer is
acceptable (`toolnexus.approvals.answer_problem`: under a two-person rule every approval comes
from a different identity — the identity of the login, never a name typed in a form).

Safe by default: every page needs a login (`auth`); every form carries a CSRF token and every POST
passes the Host/Origin check of `toolnexus.serve` (DNS rebinding, cross-site posts); a GET never
answers anything; everything a model or tool wrote is escaped; every response carries the security
headers (`_security.SECURITY_HEADERS`); the link and login endpoints are rate limited per client;
the body of a POST is capped; server-sent event streams are bounded in number and end when the
app closes (`aclose()`).
"""  # noqa: E501 - Markdown tables, one row per line

from __future__ import annotations

import asyncio
import os
import re
from datetime import UTC, datetime
from http.cookies import SimpleCookie
from importlib import resources
from typing import Any, Awaitable, Callable, Optional
from urllib.parse import parse_qs, quote, unquote, urlencode

from .._diag import warn
from ..approvals import Answerers, answer_problem, group_of
from ..durable import AnswerAlreadyApplied, PendingRun, RequestWithdrawn, RunDamaged, RunNotFound, RunStore
from ..errors import ToolnexusError, ToolnexusTypeError
from ..serve import BodyTooLarge, ClientGone, HostGuard, read_body
from ..types import Answer, Request
from . import _pages as pages
from ._auth import InboxAuth, TokenAuth
from ._forms import FormError, answer_of
from ._links import LINKS_NAMESPACE, LinkSigner, secret_bytes
from ._security import SECURITY_HEADERS, RateLimit, Signed, csrf_field, csrf_ok, derive, new_csrf_cookie

Apply = Callable[[Answer], Awaitable[Any]]
SESSION_COOKIE = "tn_inbox_session"
CSRF_COOKIE = "tn_inbox_csrf"
MAX_FORM = 64 * 1024
_AGES = {"5m": 300.0, "1h": 3600.0, "1d": 86400.0}
_NOTICES = {"approved": "Approved.", "rejected": "Rejected.", "submitted": "Answered.", "declined": "Declined."}
_STATIC = {"inbox.js": "text/javascript; charset=utf-8", "inbox.css": "text/css; charset=utf-8"}


def _now() -> datetime:
    return datetime.now(UTC)


class _Reply(ToolnexusError):
    """A response decided deep inside a handler (an error page, a redirect)."""

    def __init__(self, status: int, body: str = "", *, location: Optional[str] = None,
                 headers: Optional[list[tuple[bytes, bytes]]] = None, content_type: str = "text/html") -> None:
        super().__init__(status)
        self.status, self.body, self.location, self.headers = status, body, location, headers or []
        self.content_type = content_type


class Inbox:
    """The web inbox over one store (see the module docstring)."""

    def __init__(self, store: RunStore, *, auth: InboxAuth, secret: "bytes | str | None" = None,
                 answerers: Optional[Answerers] = None, links: Optional[LinkSigner] = None,
                 apply: Optional[Apply] = None, allowed_hosts: Optional[list[str]] = None,
                 allowed_origins: Optional[list[str]] = None, poll: float = 1.0, page_size: int = 50,
                 transcript_limit: int = 50, max_streams: int = 100, link_limit: Optional[RateLimit] = None,
                 login_limit: Optional[RateLimit] = None) -> None:
        if not isinstance(auth, InboxAuth):
            raise ToolnexusTypeError("toolnexus.inbox: auth must be TokenAuth(...), HeaderAuth(...) or "
                                     f"CallbackAuth(...), got {type(auth).__name__}")
        self.store = store
        self.auth = auth
        raw = secret_bytes(secret, "the inbox secret") if secret is not None else os.urandom(32)
        self._sessions = Signed(derive(raw, "session"))
        self._csrf_key = derive(raw, "csrf")
        self.answerers = answerers if answerers is not None else Answerers()
        # with a secret of the host's, links minted with it (by a notifier elsewhere) are honoured here
        self.links = links if links is not None else (LinkSigner(secret) if secret is not None else None)
        self.apply = apply
        self.guard = HostGuard(allowed_hosts, allowed_origins)
        self.poll = float(poll)
        self.page_size = int(page_size)
        self.transcript_limit = int(transcript_limit)
        self.max_streams = int(max_streams)
        self.link_limit = link_limit if link_limit is not None else RateLimit(per_minute=10, burst=10)
        self.login_limit = login_limit if login_limit is not None else RateLimit(per_minute=10, burst=5)
        self._streams: set[asyncio.Event] = set()
        self._closing = asyncio.Event()
        self._watcher: Optional[asyncio.Task[None]] = None
        self._fingerprint: Any = None

    def __repr__(self) -> str:
        return f"Inbox({self.store.url!r}, auth={self.auth!r})"

    # -- the ASGI entry ----------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope.get("type") != "http":
            return
        refused = self.guard.refusal(scope)
        if refused is not None:
            await self._send(send, refused[0], refused[1].encode(), "text/plain; charset=utf-8")
            return
        base = str(scope.get("root_path") or "").rstrip("/")
        path = str(scope.get("path") or "/")
        if base and path.startswith(base):
            path = path[len(base):] or "/"
        try:
            await self._route(scope, receive, send, base, path)
        except _Reply as reply:
            headers = list(reply.headers)
            if reply.location is not None:
                headers.append((b"location", reply.location.encode("latin-1", "replace")))
            ctype = "text/html; charset=utf-8" if reply.content_type == "text/html" else reply.content_type
            await self._send(send, reply.status, reply.body.encode(), ctype, headers)
        except BodyTooLarge:
            await self._send(send, 413, b"request body too large", "text/plain; charset=utf-8")
        except ClientGone:
            return

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message.get("type") == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message.get("type") == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def aclose(self) -> None:
        """End the event streams and the watcher (the store is the host's to close)."""
        self._closing.set()
        for event in list(self._streams):
            event.set()
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)

    async def _send(self, send: Any, status: int, body: bytes, content_type: str,
                    headers: Optional[list[tuple[bytes, bytes]]] = None) -> None:
        out = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode()),
               (b"cache-control", b"no-store"), *SECURITY_HEADERS, *(headers or [])]
        await send({"type": "http.response.start", "status": status, "headers": out})
        await send({"type": "http.response.body", "body": body})

    async def _page(self, send: Any, html: str, *, status: int = 200,
                    headers: Optional[list[tuple[bytes, bytes]]] = None) -> None:
        await self._send(send, status, html.encode(), "text/html; charset=utf-8", headers)

    # -- cookies, identity, CSRF -------------------------------------------------------------------

    @staticmethod
    def _cookies(scope: dict[str, Any]) -> dict[str, str]:
        jar: dict[str, str] = {}
        for key, value in scope.get("headers") or []:
            if key == b"cookie":
                parsed: SimpleCookie = SimpleCookie()
                try:
                    parsed.load(value.decode("latin-1"))
                except Exception:
                    continue
                jar.update({k: m.value for k, m in parsed.items()})
        return jar

    @staticmethod
    def _cookie(scope: dict[str, Any], base: str, name: str, value: str, max_age: int) -> tuple[bytes, bytes]:
        secure = "; Secure" if scope.get("scheme") == "https" else ""
        text = f"{name}={value}; Path={base or '/'}; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}"
        return b"set-cookie", text.encode("latin-1")

    def _csrf(self, scope: dict[str, Any], base: str) -> tuple[str, list[tuple[bytes, bytes]]]:
        """The form field for this browser, and the cookie to set when it has none yet."""
        cookie = self._cookies(scope).get(CSRF_COOKIE)
        headers = []
        if not cookie or len(cookie) > 64:
            cookie = new_csrf_cookie()
            headers.append(self._cookie(scope, base, CSRF_COOKIE, cookie, 7 * 86400))
        return csrf_field(self._csrf_key, cookie), headers

    def _check_csrf(self, scope: dict[str, Any], form: dict[str, str]) -> None:
        if not csrf_ok(self._csrf_key, self._cookies(scope).get(CSRF_COOKIE), form.get("csrf")):
            raise _Reply(403, pages.message_page("", "Refused", "This form is out of date or was not sent by this "
                                                 "inbox (its CSRF token does not match). Go back, reload the page "
                                                 "and try again."))

    async def _identity(self, scope: dict[str, Any]) -> Optional[str]:
        session = self._sessions.loads(self._cookies(scope).get(SESSION_COOKIE) or "")
        who = session.get("i") if isinstance(session, dict) and isinstance(session.get("i"), str) else None
        try:
            return await self.auth.identify(scope, who)
        except Exception as exc:
            warn(f"[toolnexus] inbox: the sign-in callback raised {type(exc).__name__}")
            return None

    async def _require(self, scope: dict[str, Any], base: str, path: str) -> str:
        who = await self._identity(scope)
        if who:
            return who
        if self.auth.login_form and scope.get("method") == "GET" and path != "/events":
            query = scope.get("query_string", b"").decode("latin-1")
            nxt = base + path + (f"?{query}" if query else "")
            raise _Reply(303, location=f"{base}/login?{urlencode({'next': nxt})}")
        raise _Reply(401, pages.message_page(base, "Sign-in required", self.auth.how_to_sign_in))

    @staticmethod
    def _client(scope: dict[str, Any]) -> str:
        client = scope.get("client")
        return str(client[0]) if client else "?"

    async def _form(self, scope: dict[str, Any], receive: Any) -> dict[str, str]:
        raw = await read_body(scope, receive, MAX_FORM)
        parsed = parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True)
        return {k: v[0] for k, v in parsed.items()}

    @staticmethod
    def _query(scope: dict[str, Any]) -> dict[str, str]:
        parsed = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=False)
        return {k: v[0] for k, v in parsed.items()}

    # -- routing -----------------------------------------------------------------------------------

    async def _route(self, scope: dict[str, Any], receive: Any, send: Any, base: str, path: str) -> None:
        method = scope.get("method", "GET")
        if path.startswith("/static/"):
            await self._static(send, path[len("/static/"):])
            return
        if path == "/login":
            await (self._login_post(scope, receive, send, base) if method == "POST"
                   else self._login_get(scope, send, base))
            return
        link = re.fullmatch(r"/link/([^/]+)/([A-Za-z0-9_\-.]+)", path)
        if link:
            await self._link(scope, receive, send, base, unquote(link.group(1)), link.group(2), method)
            return
        who = await self._require(scope, base, path)
        if path == "/logout" and method == "POST":
            self._check_csrf(scope, await self._form(scope, receive))
            raise _Reply(303, location=f"{base}/login" if self.auth.login_form else f"{base}/",
                         headers=[self._cookie(scope, base, SESSION_COOKIE, "", 0)])
        if path == "/" and method == "GET":
            await self._list(scope, send, base, who)
            return
        if path == "/events" and method == "GET":
            await self._events(scope, receive, send)
            return
        one = re.fullmatch(r"/r/([^/]+)", path)
        if one:
            rid = unquote(one.group(1))
            if method == "POST":
                await self._answer(scope, receive, send, base, who, rid)
            else:
                await self._request(scope, send, base, who, rid)
            return
        if method not in ("GET", "HEAD"):
            raise _Reply(405, pages.message_page(base, "Not allowed", "This address takes no such request."),
                         headers=[(b"allow", b"GET")])
        raise _Reply(404, pages.message_page(base, "Not found", "There is no such page in this inbox.", who=who))

    async def _static(self, send: Any, name: str) -> None:
        if name not in _STATIC:
            raise _Reply(404, "not found", content_type="text/plain; charset=utf-8")
        body = resources.files(__package__).joinpath("static", name).read_bytes()
        await self._send(send, 200, body, _STATIC[name])

    # -- login -------------------------------------------------------------------------------------

    @staticmethod
    def _safe_next(base: str, value: Optional[str]) -> str:
        value = value or ""
        if not value.startswith((base or "") + "/") or value.startswith("//") or "\\" in value:
            return f"{base}/"
        return value

    async def _login_get(self, scope: dict[str, Any], send: Any, base: str, *, error: Optional[str] = None,
                         status: int = 200) -> None:
        if not isinstance(self.auth, TokenAuth):
            raise _Reply(404, pages.message_page(base, "No login here", self.auth.how_to_sign_in))
        csrf, headers = self._csrf(scope, base)
        nxt = self._safe_next(base, self._query(scope).get("next"))
        await self._page(send, pages.login_page(base, csrf=csrf, asks_name=self.auth.asks_name, next_path=nxt,
                                                error=error), status=status, headers=headers)

    async def _login_post(self, scope: dict[str, Any], receive: Any, send: Any, base: str) -> None:
        if not isinstance(self.auth, TokenAuth):
            raise _Reply(404, pages.message_page(base, "No login here", self.auth.how_to_sign_in))
        allowed, wait = self.login_limit.allow(self._client(scope))
        if not allowed:
            raise _Reply(429, pages.message_page(base, "Too many tries", "Wait a minute before trying again."),
                         headers=[(b"retry-after", str(int(wait) + 1).encode())])
        form = await self._form(scope, receive)
        self._check_csrf(scope, form)
        who = self.auth.login(form.get("name"), form.get("token"))
        if who is None:
            await self._login_get(scope, send, base, error="That token is not right.", status=401)
            return
        cookie = self._sessions.dumps({"i": who, "e": _now().timestamp() + self.auth.session_ttl})
        raise _Reply(303, location=self._safe_next(base, form.get("next")),
                     headers=[self._cookie(scope, base, SESSION_COOKIE, cookie, int(self.auth.session_ttl))])

    # -- the list and its live updates -------------------------------------------------------------

    async def _pending_page(self, q: dict[str, str], who: str) -> tuple[list[PendingRun], Optional[str]]:
        older = _AGES.get(q.get("older_than", ""))
        want_group = q.get("assignee") or None
        mine = bool(q.get("mine"))
        after = q.get("after") or None
        found: list[PendingRun] = []
        cursor = after
        for _ in range(20):  # a filter the store cannot apply (group, mine) reads a few pages to fill one
            page = await self.store.pending(limit=self.page_size, after=cursor, agent=q.get("agent") or None,
                                            kind=q.get("kind") or None, older_than=older)
            for p in page:
                if want_group and group_of(p.request) != want_group:
                    continue
                if mine and not self.answerers.may_answer(p.request, who):
                    continue
                found.append(p)
            cursor = page.next
            if cursor is None or len(found) >= self.page_size:
                break
        return found[: self.page_size], cursor

    async def _list(self, scope: dict[str, Any], send: Any, base: str, who: str) -> None:
        q = self._query(scope)
        try:
            items, cursor = await self._pending_page(q, who)
        except ValueError as exc:  # a cursor or filter the store refuses
            raise _Reply(400, pages.message_page(base, "Bad filter", str(exc), who=who)) from None
        now = _now()
        if q.get("fragment") == "rows":
            await self._send(send, 200, pages.rows_html(base, items, now).encode(), "text/html; charset=utf-8")
            return
        csrf, headers = self._csrf(scope, base)
        filters = {k: q.get(k, "") for k in ("agent", "kind", "older_than", "assignee", "mine", "after")}
        kinds = sorted({"approval", "input", "question", "auth", *(p.request.kind for p in items)})
        await self._page(send, pages.list_page(base, who=who, csrf=csrf, items=items, now=now, filters=filters,
                                               next_cursor=cursor, kinds=kinds), headers=headers)

    async def _fingerprint_now(self) -> Any:
        page = await self.store.pending(limit=500)
        return tuple((p.request.id, p.status) for p in page), page.next

    async def _watch(self) -> None:
        """One poller for every stream: wakes them when the waiting requests change."""
        while self._streams and not self._closing.is_set():
            try:
                found = await self._fingerprint_now()
            except Exception as exc:  # the store is down: the streams stay open, quiet
                warn(f"[toolnexus] inbox: reading {self.store.url} failed: {type(exc).__name__}: {exc}")
                found = self._fingerprint
            if found != self._fingerprint:
                first = self._fingerprint is None
                self._fingerprint = found
                if not first:
                    for event in list(self._streams):
                        event.set()
            try:
                await asyncio.wait_for(self._closing.wait(), self.poll)
            except TimeoutError:
                pass
        self._watcher = None

    async def _events(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if len(self._streams) >= self.max_streams:
            raise _Reply(503, "too many open event streams", content_type="text/plain; charset=utf-8",
                         headers=[(b"retry-after", b"5")])
        changed = asyncio.Event()
        self._streams.add(changed)
        if self._watcher is None or self._watcher.done():
            self._fingerprint = None
            self._watcher = asyncio.ensure_future(self._watch())
        gone = asyncio.ensure_future(self._hangup(receive))
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream; charset=utf-8"),
                                    (b"cache-control", b"no-store"), (b"x-accel-buffering", b"no"),
                                    *SECURITY_HEADERS]})
            await send({"type": "http.response.body", "body": b"retry: 2000\n: connected\n\n", "more_body": True})
            while not self._closing.is_set() and not gone.done():
                waiter = asyncio.ensure_future(changed.wait())
                await asyncio.wait({waiter, gone}, timeout=15.0, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                if gone.done() or self._closing.is_set():
                    break
                if changed.is_set():
                    changed.clear()
                    data = f'{{"waiting": {len(self._fingerprint[0]) if self._fingerprint else 0}}}'
                    await send({"type": "http.response.body", "body": f"event: changed\ndata: {data}\n\n".encode(),
                                "more_body": True})
                else:
                    await send({"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client is gone
        finally:
            self._streams.discard(changed)
            gone.cancel()
            await asyncio.gather(gone, return_exceptions=True)

    @staticmethod
    async def _hangup(receive: Any) -> None:
        while (await receive()).get("type") != "http.disconnect":
            pass

    # -- one request -------------------------------------------------------------------------------

    async def _row(self, base: str, who: Optional[str], rid: str) -> Any:
        row = await self.store.find_request(rid)
        if row is None or not row.request:
            raise _Reply(404, pages.message_page(base, "No such request", f"No request {rid} is in this store.",
                                                 who=who))
        try:
            request = Request.from_dict(row.request)
        except (TypeError, ValueError):
            raise _Reply(500, pages.message_page(base, "Damaged request", f"The stored request {rid} cannot be read "
                                                 "(toolnexus doctor names it).", who=who)) from None
        return row, request

    async def _transcript(self, row: Any, request: Request) -> str:
        if not row.run_id:
            return ""
        try:
            run = await self.store.load(row.run_id)
        except (RunNotFound, RunDamaged):
            return '<p class="sub">The run\'s transcript cannot be read.</p>'
        from ..approvals import approval_of

        a = approval_of(request)
        wanted = ["/".join(str(x) for x in a.get("agent_path") or [])] if a is not None else []
        wanted += [row.handle_id or ""]
        conv = next((c for c in wanted if c and c in run.conversations), None)
        if conv is None and run.conversations:
            conv = next(iter(run.conversations))
        messages = run.conversations.get(conv or "", [])
        return pages.transcript_html(conv, messages[-self.transcript_limit:], len(messages))

    async def _request(self, scope: dict[str, Any], send: Any, base: str, who: str, rid: str, *,
                       error: Optional[str] = None, form: Optional[dict[str, str]] = None, status: int = 200) -> None:
        row, request = await self._row(base, who, rid)
        pending = row.to_pending_run() if row.status in ("open", "queued", "claimed") else None
        csrf, headers = self._csrf(scope, base)
        answered = None
        if isinstance(row.answer, dict):
            answered = row.answer.get("at") if isinstance(row.answer.get("at"), str) else None
            if answered is None and row.answered_at:
                answered = datetime.fromtimestamp(row.answered_at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        notice = _NOTICES.get(self._query(scope).get("done", ""))
        if notice and row.status in ("queued", "claimed"):
            notice += " A worker applies the answer now; the run goes on from there."
        html = pages.request_page(base, who=who, csrf=csrf, pending=pending, request=request, run_id=row.run_id or "",
                                  status=row.status, answer=row.answer, answered_at=answered,
                                  transcript=await self._transcript(row, request),
                                  may_answer=self.answerers.refusal(request, who), notice=notice, error=error,
                                  form=form)
        await self._page(send, html, status=status, headers=headers)

    async def _submit(self, answer: Answer) -> None:
        if self.apply is not None:
            await self.apply(answer)
        else:
            await self.store.submit_answer(answer)

    async def _decide(self, request: Request, row: Any, answer: Answer, who: str) -> Optional[str]:
        """Check and apply `answer`; None when done, else why it was not (nothing applied)."""
        from ..client import ResumeError

        if row.status != "open":
            return "this request was answered meanwhile"
        refused = self.answerers.refusal(request, who)
        if refused is not None:
            return refused
        problem = answer_problem(request, answer)
        if problem is not None:
            return problem
        try:
            await self._submit(answer)
        except (AnswerAlreadyApplied, RequestWithdrawn):
            return "this request was answered meanwhile (or withdrawn)"
        except (ResumeError, ValueError) as exc:
            return str(exc).removeprefix("toolnexus: ")
        return None

    async def _answer(self, scope: dict[str, Any], receive: Any, send: Any, base: str, who: str, rid: str) -> None:
        form = await self._form(scope, receive)
        self._check_csrf(scope, form)
        row, request = await self._row(base, who, rid)
        try:
            answer = answer_of(request, form, by=who, via="inbox")
        except FormError as exc:
            await self._request(scope, send, base, who, rid, error=str(exc), form=form, status=400)
            return
        why = await self._decide(request, row, answer, who)
        if why is not None:
            await self._request(scope, send, base, who, rid, error=f"Nothing was done: {why}.", form=form,
                                status=409 if "meanwhile" in why else 400)
            return
        done = ("approved" if answer.ok else "rejected") if request.kind == "approval" else (
            "submitted" if answer.ok else "declined")
        raise _Reply(303, location=f"{base}/r/{quote(rid, safe='')}?done={done}")

    # -- signed links ------------------------------------------------------------------------------

    async def _link(self, scope: dict[str, Any], receive: Any, send: Any, base: str, rid: str, token: str,
                    method: str) -> None:
        allowed, wait = self.link_limit.allow(self._client(scope))
        if not allowed:
            raise _Reply(
                429,
                pages.message_page(base, "Too many requests", "Wait a minute before opening another answer link."),
                headers=[(b"retry-after", str(int(wait) + 1).encode())],
            )
        if self.links is None:
            raise _Reply(404, pages.message_page(base, "Links are off", "This inbox does not take answer links."))
        claim = self.links.verify(token, rid)
        if claim is None:
            why = ("This link has expired. Open the inbox to answer." if self.links.expired(token)
                   else "This link is not valid for this request.")
            raise _Reply(403 if "not valid" in why else 410, pages.message_page(base, "Link refused", why))
        used = await self.store.get_record(LINKS_NAMESPACE, claim.nonce)
        if used is not None:
            raise _Reply(410, pages.message_page(base, "Link already used", "This link was used already; it works "
                                                 "once. Open the inbox to see what was decided."))
        row, request = await self._row(base, None, rid)
        action = f"{base}/link/{quote(rid, safe='')}/{token}"
        if method != "POST":  # a GET never answers: a link previewer sees this page and nothing happens
            csrf, headers = self._csrf(scope, base)
            if row.status != "open":
                raise _Reply(409, pages.message_page(base, "Already answered", "This request was answered already; "
                                                     "this link does nothing now."))
            expires = datetime.fromtimestamp(claim.expires, UTC).strftime("%Y-%m-%d %H:%M UTC")
            await self._page(send, pages.link_page(base, action=action, csrf=csrf, decision=claim.decision,
                                                   identity=claim.identity, request=request, expires=expires),
                             headers=headers)
            return
        form = await self._form(scope, receive)
        self._check_csrf(scope, form)
        ok = claim.decision == "approve"
        answer = Answer(id=rid, ok=ok, reason=None if ok else "declined",
                        message=(form.get("message") or "").strip() or None, by=claim.identity, via="link")
        if not await self.store.swap_record(LINKS_NAMESPACE, claim.nonce, None,
                                            {"request_id": rid, "by": claim.identity, "decision": claim.decision,
                                             "at": _now().timestamp()}):
            raise _Reply(410, pages.message_page(base, "Link already used", "This link was used already; it works "
                                                 "once."))
        refused = await self._decide(request, row, answer, claim.identity)
        if refused is not None:
            raise _Reply(409, pages.message_page(base, "Nothing was done", f"Nothing was done: {refused}."))
        verb = "Approved" if ok else "Rejected"
        await self._page(send, pages.message_page(base, verb, f"{verb} as {claim.identity}: {request.prompt} — the "
                                                  "run continues (a worker applies the answer now)."))

