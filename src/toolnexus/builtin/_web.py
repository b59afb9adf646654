"""The `webfetch` built-in: HTTP GET one URL and hand back its body as markdown, text or html.

- Only `http` and `https` URLs are fetched; `file://` and every other scheme are refused with an
  error naming the scheme (this deliberately drops the earlier "file:// works": reading local
  files is what `read` is for, and confinement applies there).
- Only public addresses, checked after DNS resolution and again on every redirect (at most
  `fetch_max_redirects`, 10), and connected to by the address that was checked; loopback,
  private, link-local and other non-public addresses are refused unless `builtins["webfetch_allow"]`
  lists the host or its network (`_netguard.py` has the rules and why).
- `httpx.AsyncClient`, redirects followed by hand (so each hop is checked), no cookies and no
  credentials ever sent, the `timeout` (seconds, default 30) bounds the whole fetch. A status
  >= 400 is the error `HTTP <code>` with `metadata={"status": code}`.
- The body is read up to `fetch_max_bytes` (2 MiB); a longer body is cut and the output ends
  with a notice (`metadata["truncated"]`). The charset comes from `Content-Type`, else an HTML
  `<meta charset>`, else UTF-8; undecodable bytes are replaced.
- `html` returns the decoded body as is. For an HTML body, `markdown` is real Markdown from the
  `markdownify` package (headings, links, lists, code blocks; scripts and styles dropped) and
  `text` is the readable text (tags dropped, block elements on their own lines, entities
  decoded). A non-HTML body (plain text, JSON...) is returned as is in every format. Conversion
  runs in a worker thread.
Not here: cookies, auth, caching, JavaScript.
"""

from __future__ import annotations

import asyncio
import codecs
import re
from collections.abc import Mapping
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any, Optional
from urllib.parse import urljoin, urlsplit

if TYPE_CHECKING:  # httpx loads on the first fetch: building the toolkit stays cheap
    import httpx

from ..types import Tool, ToolContext, ToolResult
from ._netguard import vet_host
from ._settings import BuiltinSettings
from ._tooling import ToolError, build_tool, object_schema, positive_number, prop, required_str

WEBFETCH_DESCRIPTION = "HTTP GET a URL and return its body as text, markdown, or html."
WEBFETCH_SCHEMA = object_schema(
    {
        "url": prop("string", "URL to fetch"),
        "format": {
            "type": "string",
            "enum": ["text", "markdown", "html"],
            "description": "Response format (default markdown)",
        },
        "timeout": prop("number", "Timeout in seconds (default 30)"),
    },
    ["url"],
)

DEFAULT_TIMEOUT = 30.0
FORMATS = ("text", "markdown", "html")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_BLANK_RUNS = re.compile(r"\n{3,}")
_TRAILING_SPACE = re.compile(r"[ \t]+\n")


# ------------------------------------------------------------------------------- conversions


def html_to_markdown(html: str) -> str:
    """Markdown for an HTML document (ATX headings, `-` bullets)."""
    from markdownify import markdownify

    markdown = markdownify(html, heading_style="ATX", bullets="-")
    return _BLANK_RUNS.sub("\n\n", markdown).strip()


_SKIP_TAGS = frozenset({"script", "style", "noscript", "template", "svg"})
_BLOCK_TAGS = frozenset(
    {
        "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption",
        "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li",
        "main", "nav", "ol", "p", "pre", "section", "table", "td", "th", "tr", "ul", "title",
    }
)  # fmt: skip


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping: list[str] = []
        self.pre = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in _SKIP_TAGS:
            self.skipping.append(tag)
        elif tag == "pre":
            self.pre += 1
        if tag in _BLOCK_TAGS:
            self._break()

    def handle_startendtag(self, tag: str, attrs: Any) -> None:
        self.handle_starttag(tag, attrs)  # <br/> is one line break, not two

    def handle_endtag(self, tag: str) -> None:
        if self.skipping and self.skipping[-1] == tag:
            self.skipping.pop()
        elif tag == "pre" and self.pre:
            self.pre -= 1
        if tag in _BLOCK_TAGS:
            self._break()

    def _break(self) -> None:
        if self.parts and not self.pre:
            self.parts[-1] = self.parts[-1].rstrip(" ")
        self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.skipping:
            return
        if self.pre:
            self.parts.append(data)
            return
        text = re.sub(r"\s+", " ", data)
        if not self.parts or self.parts[-1].endswith("\n"):
            text = text.lstrip(" ")
        if text:
            self.parts.append(text)


def html_to_text(html: str) -> str:
    """The readable text of an HTML document: no tags, one block per line, entities decoded."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    text = _TRAILING_SPACE.sub("\n", "".join(parser.parts))
    return _BLANK_RUNS.sub("\n\n", text).strip()


# ----------------------------------------------------------------------------------- fetching


def _check_url(url: str) -> None:
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        shown = f'"{scheme}:"' if scheme else "none"
        raise ToolError(f"only http and https URLs can be fetched (scheme {shown} in {url})")


def _charset(response: httpx.Response, body: bytes) -> str:
    candidates = [response.charset_encoding]
    if "html" in response.headers.get("content-type", "").lower():
        found = _META_CHARSET.search(body[:4096])
        if found:
            candidates.append(found.group(1).decode("ascii"))
    for name in candidates:
        if name:
            try:
                return codecs.lookup(name).name
            except LookupError:
                continue
    return "utf-8"


def _is_html(response: httpx.Response, text: str) -> bool:
    content_type = response.headers.get("content-type", "").lower()
    if content_type:
        return "html" in content_type
    return text.lstrip()[:15].lower().startswith(("<!doctype html", "<html"))


async def _pinned_request(client: httpx.AsyncClient, url: str, settings: BuiltinSettings) -> httpx.Request:
    """A GET for `url` that connects to the vetted address of its host (see `_netguard`)."""
    import httpx

    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ToolError(f"invalid URL {url}: {exc}") from None
    _check_url(str(parsed))
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    address = await vet_host(parsed.host, port, settings.fetch_allow)
    extensions = {"sni_hostname": parsed.host} if parsed.scheme == "https" else {}
    host_header = parsed.netloc.decode("ascii")
    return client.build_request("GET", parsed.copy_with(host=address), headers={"Host": host_header},
                                extensions=extensions)


async def _fetch(url: str, timeout: float, settings: BuiltinSettings) -> tuple[httpx.Response, bytes, bool]:
    import httpx

    cap = settings.fetch_max_bytes
    async with httpx.AsyncClient(follow_redirects=False, timeout=timeout) as client:
        for _ in range(settings.fetch_max_redirects + 1):
            response = await client.send(await _pinned_request(client, url, settings), stream=True)
            try:
                if response.is_redirect and response.headers.get("location"):
                    url = urljoin(url, response.headers["location"])
                    continue
                if response.status_code >= 400:
                    return response, b"", False
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > cap:
                        return response, bytes(body[:cap]), True
                return response, bytes(body), False
            finally:
                await response.aclose()
    raise ToolError(f"too many redirects (more than {settings.fetch_max_redirects})")


def make_webfetch(settings: BuiltinSettings) -> Tool:
    async def run(args: Mapping[str, Any], ctx: Optional[ToolContext]) -> ToolResult:
        import httpx

        url = required_str(args, "url")
        _check_url(url)
        fmt = args.get("format") if args.get("format") in FORMATS else "markdown"
        timeout = positive_number(args, "timeout", DEFAULT_TIMEOUT)
        cap = settings.fetch_max_bytes
        try:
            async with asyncio.timeout(timeout):
                response, body, truncated = await _fetch(url, timeout, settings)
        except (TimeoutError, httpx.TimeoutException):
            raise ToolError(f"timed out after {timeout:g}s fetching {url}") from None
        if response.status_code >= 400:
            return ToolResult(f"HTTP {response.status_code}", True, metadata={"status": response.status_code})
        text = body.decode(_charset(response, body), "replace")
        if fmt != "html" and _is_html(response, text):
            convert = html_to_markdown if fmt == "markdown" else html_to_text
            text = await asyncio.to_thread(convert, text)
        metadata: dict[str, Any] = {"status": response.status_code, "format": fmt}
        if truncated:
            metadata["truncated"] = True
            text += f"\n\n[webfetch: body truncated at {cap} bytes]"
        return ToolResult(text, False, metadata=metadata)

    return build_tool("webfetch", WEBFETCH_DESCRIPTION, WEBFETCH_SCHEMA, run, idempotent=True)
