"""`webfetch` against a real loopback HTTP server."""

from __future__ import annotations

import socket

import pytest

from support.http_server import LoopbackServer, Reply
from toolnexus.builtin import create_builtin_tools
from toolnexus.builtin._netguard import parse_allow
from toolnexus.builtin._settings import BuiltinSettings
from toolnexus.builtin._web import make_webfetch

PAGE = """<!doctype html>
<html><head><title>Guide</title>
<style>body { color: red }</style>
<script>var secret = "do not show";</script>
</head><body>
<h1>Tom &amp; Jerry</h1>
<p>Some <b>bold</b> text and a <a href="/docs">link</a>.</p>
<ul><li>one</li><li>two</li></ul>
<pre><code>x = 1
  y = 2</code></pre>
</body></html>"""


@pytest.fixture
def server():
    with LoopbackServer() as srv:
        srv.route("/page", Reply(body=PAGE, content_type="text/html; charset=utf-8"))
        yield srv


@pytest.fixture
def webfetch():
    # the loopback test server is a non-public address: opted in, as a host would (test_hardening_web)
    return create_builtin_tools({"webfetch_allow": ["127.0.0.1"]})[6]


async def test_markdown_is_real_markdown(server, webfetch):
    result = await webfetch.execute({"url": f"{server.url}/page"})
    assert not result.is_error and result.metadata == {"status": 200, "format": "markdown"}
    markdown = result.output
    assert "# Tom & Jerry" in markdown
    assert "**bold**" in markdown
    assert "[link](/docs)" in markdown
    assert "- one\n- two" in markdown
    assert "```\nx = 1\n  y = 2\n```" in markdown
    assert "secret" not in markdown and "color: red" not in markdown and "<" not in markdown


async def test_text_is_readable_text_with_entities_decoded(server, webfetch):
    result = await webfetch.execute({"url": f"{server.url}/page", "format": "text"})
    assert result.output == "Guide\n\nTom & Jerry\n\nSome bold text and a link.\n\none\n\ntwo\n\nx = 1\n  y = 2"
    assert result.metadata == {"status": 200, "format": "text"}


async def test_html_is_the_raw_body(server, webfetch):
    result = await webfetch.execute({"url": f"{server.url}/page", "format": "html"})
    assert result.output == PAGE and result.metadata == {"status": 200, "format": "html"}


async def test_unknown_format_means_markdown(server, webfetch):
    result = await webfetch.execute({"url": f"{server.url}/page", "format": "pdf"})
    assert result.metadata["format"] == "markdown" and "# Tom & Jerry" in result.output


async def test_non_html_bodies_are_returned_as_they_are(server, webfetch):
    server.route("/plain", Reply(body="a < b & c\n\n\n\nend", content_type="text/plain"))
    server.route("/json", Reply(body='{"k": "<v>"}', content_type="application/json"))
    for fmt in ("markdown", "text"):
        assert (await webfetch.execute({"url": f"{server.url}/plain", "format": fmt})).output == "a < b & c\n\n\n\nend"
    assert (await webfetch.execute({"url": f"{server.url}/json"})).output == '{"k": "<v>"}'


async def test_charset_from_content_type_is_honoured(server, webfetch):
    server.route("/latin", Reply(body="café".encode("latin-1"), content_type="text/plain; charset=ISO-8859-1"))
    assert (await webfetch.execute({"url": f"{server.url}/latin"})).output == "café"


async def test_charset_from_html_meta_is_honoured(server, webfetch):
    body = b'<html><head><meta charset="windows-1252"></head><body><p>\x93quoted\x94</p></body></html>'
    server.route("/meta", Reply(body=body, content_type="text/html"))
    assert (await webfetch.execute({"url": f"{server.url}/meta", "format": "text"})).output == "\u201cquoted\u201d"


async def test_missing_charset_falls_back_to_utf8_with_replacement(server, webfetch):
    server.route("/raw", Reply(body=b"ok \xff end", content_type="text/plain"))
    assert (await webfetch.execute({"url": f"{server.url}/raw"})).output == "ok \ufffd end"


async def test_http_error_status(server, webfetch):
    server.route("/missing", Reply(status=404, body="not here"))
    result = await webfetch.execute({"url": f"{server.url}/missing"})
    assert result.is_error and result.output == "HTTP 404" and result.metadata == {"status": 404}


async def test_redirects_are_followed(server, webfetch):
    server.route("/old", Reply(status=302, body="", headers={"Location": "/page"}))
    result = await webfetch.execute({"url": f"{server.url}/old", "format": "html"})
    assert result.output == PAGE and result.metadata["status"] == 200


async def test_body_is_capped_with_a_notice(server):
    server.route("/big", Reply(body="x" * 5000, content_type="text/plain"))  # fits the socket buffers
    fetch = make_webfetch(BuiltinSettings(fetch_max_bytes=1000, fetch_allow=parse_allow(["127.0.0.1"])))
    result = await fetch.execute({"url": f"{server.url}/big"})
    assert result.output == "x" * 1000 + "\n\n[webfetch: body truncated at 1000 bytes]"
    assert result.metadata == {"status": 200, "format": "markdown", "truncated": True}


async def test_timeout_is_a_clear_error(server, webfetch):
    server.route("/slow", Reply(hang=True))
    url = f"{server.url}/slow"
    result = await webfetch.execute({"url": url, "timeout": 0.3})
    assert result.is_error and result.output == f"webfetch: timed out after 0.3s fetching {url}"


async def test_connection_refused_is_an_error_result(webfetch):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = await webfetch.execute({"url": f"http://127.0.0.1:{port}/"})
    assert result.is_error and result.output.startswith("webfetch: ") and len(result.output) > len("webfetch: ")


@pytest.mark.parametrize(
    ("url", "scheme"),
    [
        ("file:///etc/passwd", '"file:"'),
        ("ftp://example.com/x", '"ftp:"'),
        ("javascript:alert(1)", '"javascript:"'),
        ("example.com/page", "none"),
    ],
)
async def test_non_http_schemes_are_refused(webfetch, url, scheme):
    result = await webfetch.execute({"url": url})
    assert result.is_error
    assert result.output == f"webfetch: only http and https URLs can be fetched (scheme {scheme} in {url})"


async def test_url_is_required(webfetch):
    assert (await webfetch.execute({})).output == "webfetch: url is required"
