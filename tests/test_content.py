"""toolnexus.content: constructors, validation, size limits, dict form, placeholders, provider blocks."""

from __future__ import annotations

import base64
import io
import os
import pathlib

import pytest

import toolnexus
from toolnexus import content
from toolnexus.content import (
    MEDIA_TYPES,
    ContentPart,
    ContentPartError,
    UnsupportedPartError,
    audio,
    decoded_len,
    describe_part,
    encode_part,
    estimate_tokens,
    file,
    from_dict,
    get_max_part_bytes,
    image,
    is_part_dict,
    normalize_parts,
    part,
    placeholder_text,
    set_max_part_bytes,
    summarize,
    text,
    to_dict,
    validate,
)
from toolnexus.errors import ToolnexusError

PNG_BYTES = b"\x89PNG\r\n\x1a\n fake png"
PNG = base64.b64encode(PNG_BYTES).decode()


@pytest.fixture(autouse=True)
def _no_process_limit():
    set_max_part_bytes(None)
    yield
    set_max_part_bytes(None)


def write(tmp_path: pathlib.Path, name: str, data: bytes) -> pathlib.Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# -- public surface ----------------------------------------------------------------------------------


def test_public_names_import_from_toolnexus_and_from_the_module():
    for name in ("MEDIA_TYPES", "ContentPartError", "UnsupportedPartError", "ContentPart", "text", "image", "file",
                 "audio", "part", "set_max_part_bytes", "get_max_part_bytes", "encode_part", "summarize",
                 "estimate_tokens"):
        assert name in content.__all__ and name in toolnexus.__all__
        assert getattr(toolnexus, name) is getattr(content, name)
    for name in ("validate", "to_dict", "from_dict", "is_part_dict", "normalize_parts", "describe_part",
                 "placeholder_text", "decoded_len"):
        assert name in content.__all__ and name not in toolnexus.__all__
    from toolnexus.client import ContentPartError as client_error

    assert toolnexus.ContentPartError is client_error
    assert issubclass(ContentPartError, ValueError) and issubclass(UnsupportedPartError, ValueError)
    assert issubclass(ContentPartError, ToolnexusError)
    assert issubclass(UnsupportedPartError, ToolnexusError)


def test_media_table_is_the_pinned_one():
    assert MEDIA_TYPES == {
        "png": ("image/png", "image"), "jpg": ("image/jpeg", "image"), "jpeg": ("image/jpeg", "image"),
        "gif": ("image/gif", "image"), "webp": ("image/webp", "image"), "pdf": ("application/pdf", "file"),
        "mp3": ("audio/mpeg", "audio"), "wav": ("audio/wav", "audio")}


def test_content_part_fields_in_order():
    import dataclasses

    assert [f.name for f in dataclasses.fields(ContentPart)] == ["type", "text", "mimeType", "data", "url", "name"]
    assert ContentPart("text", "hi") == ContentPart(type="text", text="hi")


# -- constructors --------------------------------------------------------------------------------------


def test_image_from_path_reads_bytes_names_by_basename_and_stores_no_path(tmp_path):
    path = write(tmp_path, "shot.PNG", PNG_BYTES)
    p = image(str(path))
    assert p == ContentPart("image", mimeType="image/png", data=PNG, name="shot.PNG")
    assert str(tmp_path) not in repr(p)
    assert image(path) == p  # os.PathLike


def test_explicit_mime_type_wins_over_the_table(tmp_path):
    path = write(tmp_path, "weird.png", PNG_BYTES)
    assert image(path, mime_type="image/webp").mimeType == "image/webp"
    assert file(write(tmp_path, "notes.txt", b"hi"), mime_type="text/plain").mimeType == "text/plain"


def test_file_like_source_is_read_now_and_left_open(tmp_path):
    path = write(tmp_path, "clip.wav", b"RIFF....WAVE")
    with open(path, "rb") as handle:
        p = audio(handle)
        assert not handle.closed
    assert p == ContentPart("audio", mimeType="audio/wav", data=base64.b64encode(b"RIFF....WAVE").decode(),
                            name="clip.wav")
    anonymous = io.BytesIO(b"%PDF-1.7")
    assert file(anonymous, mime_type="application/pdf", name="a.pdf").name == "a.pdf"


@pytest.mark.parametrize("source,kwargs,message", [
    (io.StringIO("text"), {"mime_type": "image/png"},
     "a file-like content part source must be opened in binary mode — its read() returned str, not bytes"),
    (io.BytesIO(b"abc"), {}, "mime_type is required for a file-like source with no name"),
    (b"abc", {}, "mime_type is required when building a part from bytes"),
    (b"", {"mime_type": "image/png"}, "a content part needs a path, bytes, or a URL"),
    ("", {}, "a content part needs a path, bytes, or a URL"),
    (42, {}, "a content part needs a path, bytes, or a URL"),
    ("data:image/png,abc", {}, "only base64 data: URLs are supported"),
    ("data:;base64," + PNG, {}, "data: URL carries no mime type"),
    ("https://cdn.example/asset", {}, "mime_type is required for a URL whose extension is not in the media table"),
    ("https://cdn.example/a.tiff", {}, "mime_type is required for a URL whose extension is not in the media table"),
    ("/nowhere/picture.bmp", {}, 'unknown file extension ".bmp" — pass an explicit mime_type'),
    ("/nowhere/picture", {}, "file has no extension — pass an explicit mime_type"),
])
def test_constructor_errors_are_the_pinned_ones(source, kwargs, message):
    with pytest.raises(ContentPartError) as e:
        image(source, **kwargs)
    assert str(e.value) == message


def test_bytes_data_url_and_url_sources():
    assert image(PNG_BYTES, mime_type="image/png") == ContentPart("image", mimeType="image/png", data=PNG)
    assert image(bytearray(PNG_BYTES), mime_type="image/png").data == PNG
    assert image(f"data:image/png;base64,{PNG}") == ContentPart("image", mimeType="image/png", data=PNG)
    assert image("https://cdn.example/cat.jpg") == ContentPart("image", mimeType="image/jpeg",
                                                               url="https://cdn.example/cat.jpg")
    assert audio("https://cdn.example/talk", mime_type="audio/mpeg").url == "https://cdn.example/talk"


def test_os_errors_of_a_path_propagate_after_the_mime_check(tmp_path):
    with pytest.raises(FileNotFoundError):
        image(str(tmp_path / "missing.png"))


def test_text_and_part_constructors_validate():
    assert text("hello") == ContentPart("text", text="hello")
    with pytest.raises(ContentPartError, match="^a text part needs text$"):
        text(None)  # type: ignore[arg-type]
    assert part(type="file", mimeType="application/pdf", url="https://x/a.pdf") == ContentPart(
        "file", mimeType="application/pdf", url="https://x/a.pdf")
    with pytest.raises(ContentPartError):
        part(type="image", mimeType="image/png")


# -- validation ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad,message", [
    ({"type": "text"}, "a text part needs text"),
    ({"type": "video", "mimeType": "video/mp4", "data": PNG}, 'unknown content part type "video"'),
    ({"type": "image", "data": PNG}, "a image part needs a mimeType"),
    ({"type": "audio", "mimeType": "audio/wav", "data": PNG, "url": "https://x/a.wav"},
     "a audio part carries both data and url — exactly one is allowed"),
    ({"type": "file", "mimeType": "application/pdf"},
     "a file part carries neither data nor url — exactly one is required"),
])
def test_validation_errors_are_the_pinned_ones(bad, message):
    with pytest.raises(ContentPartError) as e:
        validate(bad)
    assert str(e.value) == message
    with pytest.raises(ContentPartError):
        from_dict(bad)


# -- sizes ------------------------------------------------------------------------------------------------


def test_decoded_len_and_token_estimates():
    assert decoded_len("") == 0 and decoded_len("QQ==") == 1 and decoded_len("QUI=") == 2 and decoded_len("QUJD") == 3
    assert decoded_len(None) == 0
    assert estimate_tokens(text("abcdefgh")) == 2 and estimate_tokens(text("")) == 1
    small = image(PNG_BYTES, mime_type="image/png")
    assert estimate_tokens(small) == 85
    big = {"type": "file", "mimeType": "application/pdf", "data": base64.b64encode(b"x" * 750 * 200).decode()}
    assert estimate_tokens(big) == 200
    assert estimate_tokens(image("https://x/y.png")) == 85  # a URL part carries no bytes


def test_summary_description_and_placeholder_are_pinned():
    p = audio(b"12345", mime_type="audio/wav")
    assert summarize(p) == {"type": "audio", "mimeType": "audio/wav", "bytes": 5}
    assert describe_part(p) == "audio (audio/wav, 5 bytes)"
    assert placeholder_text(p) == "[unsupported audio part (audio/wav, 5 bytes)]"
    assert placeholder_text(to_dict(p)) == "[unsupported audio part (audio/wav, 5 bytes)]"


def test_call_limit_then_process_wide_limit(tmp_path):
    path = write(tmp_path, "a.png", PNG_BYTES)
    n = len(PNG_BYTES)
    with pytest.raises(ContentPartError) as e:
        image(path, max_part_bytes=4)
    assert str(e.value) == f"content part is {n} decoded bytes, over the maxPartBytes limit of 4"
    assert get_max_part_bytes() is None
    set_max_part_bytes(5)
    assert get_max_part_bytes() == 5
    with pytest.raises(ContentPartError, match="over the maxPartBytes limit of 5"):
        image(PNG_BYTES, mime_type="image/png")
    with pytest.raises(ContentPartError, match="over the maxPartBytes limit of 5"):
        image(f"data:image/png;base64,{PNG}")
    assert image(path, max_part_bytes=n).data == PNG  # the call's limit wins over the process-wide one
    assert image("https://x/big.png").url  # URL parts count 0
    with pytest.raises(ContentPartError):
        set_max_part_bytes(-1)


# -- dict form ---------------------------------------------------------------------------------------------


def test_dict_form_round_trips_and_drops_empty_fields():
    p = ContentPart("image", mimeType="image/png", data=PNG, name="")
    assert to_dict(p) == {"type": "image", "mimeType": "image/png", "data": PNG}
    named = ContentPart("file", mimeType="application/pdf", url="https://x/a.pdf", name="a.pdf")
    assert to_dict(named) == {"type": "file", "mimeType": "application/pdf", "url": "https://x/a.pdf", "name": "a.pdf"}
    assert from_dict(to_dict(named)) == named
    assert to_dict(text("hi")) == {"type": "text", "text": "hi"}


def test_is_part_dict():
    assert is_part_dict({"type": "text", "text": ""})
    assert is_part_dict({"type": "image", "mimeType": "image/png"})
    assert not is_part_dict({"type": "text", "text": 3})
    assert not is_part_dict({"type": "image", "source": {}})
    assert not is_part_dict({"type": "image_url", "image_url": {"url": "x"}})
    assert not is_part_dict("text")


def test_normalize_parts_keeps_order_and_validates():
    out = normalize_parts(["a", text("b"), {"type": "image", "mimeType": "image/png", "data": PNG, "extra": 1}])
    assert out == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"},
                   {"type": "image", "mimeType": "image/png", "data": PNG}]
    with pytest.raises(ContentPartError) as e:
        normalize_parts(["ok", 3.5])
    assert str(e.value) == "not a content part: float"
    assert "item 1" in " ".join(e.value.__notes__)


# -- provider blocks -------------------------------------------------------------------------------------------


def test_provider_blocks_for_both_wires():
    img_data = image(PNG_BYTES, mime_type="image/png")
    img_url = image("https://x/cat.webp")
    pdf = file(b"%PDF", mime_type="application/pdf", name="report.pdf")
    pdf_b64 = base64.b64encode(b"%PDF").decode()
    mp3 = audio(b"ID3", mime_type="audio/mpeg")
    wav = audio(b"RIFF", mime_type="audio/x-wav")
    assert encode_part(text("t"), "openai") == encode_part(text("t"), "anthropic") == {"type": "text", "text": "t"}
    assert encode_part(img_data, "openai") == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{PNG}"},
    }
    assert encode_part(img_url, "openai") == {"type": "image_url", "image_url": {"url": "https://x/cat.webp"}}
    assert encode_part(img_data, "anthropic") == {"type": "image", "source": {"type": "base64",
                                                                            "media_type": "image/png", "data": PNG}}
    assert encode_part(img_url, "anthropic") == {"type": "image", "source": {"type": "url", "url": "https://x/cat.webp"}}
    assert encode_part(pdf, "openai") == {
        "type": "file",
        "file": {"filename": "report.pdf", "file_data": f"data:application/pdf;base64,{pdf_b64}"},
    }
    assert encode_part(ContentPart("file", mimeType="text/csv", data="YQ=="), "openai")["file"]["filename"] == "file"
    assert encode_part(pdf, "anthropic") == {"type": "document", "source": {"type": "base64",
                                                                          "media_type": "application/pdf",
                                                                          "data": pdf_b64}}
    assert encode_part(mp3, "openai") == {"type": "input_audio", "input_audio": {"data": mp3.data, "format": "mp3"}}
    assert encode_part(wav, "openai")["input_audio"]["format"] == "wav"


@pytest.mark.parametrize(
    "p,style,message",
    [
        (
            ContentPart("audio", mimeType="audio/wav", data="UklG"),
            "anthropic",
            'no "anthropic" block shape for a audio part (audio/wav)',
        ),
        (
            ContentPart("audio", mimeType="audio/ogg", data="UklG"),
            "openai",
            'no "openai" block shape for a audio part (audio/ogg)',
        ),
        (
            ContentPart("audio", mimeType="audio/wav", url="https://x/a.wav"),
            "openai",
            'no "openai" block shape for a audio part (audio/wav)',
        ),
        (
            ContentPart("file", mimeType="application/pdf", url="https://x/a.pdf"),
            "openai",
            'no "openai" block shape for a file part (application/pdf)',
        ),
        (ContentPart("text", text="x"), "gemini", 'no "gemini" block shape for a text part'),
    ],
)
def test_parts_outside_the_allowlist_raise_unsupported(p, style, message):
    with pytest.raises(UnsupportedPartError) as e:
        encode_part(p, style)
    assert str(e.value) == message
    assert (e.value.part_type, e.value.mime_type, e.value.style) == (p.type, p.mimeType, style)


# -- beyond 0.21 --------------------------------------------------------------------------------------------------


def test_constructors_enforce_the_table_part_type_and_valid_base64_and_provider_mimes(tmp_path):
    """Constructors no longer trust their inputs: image("doc.pdf") is refused instead of becoming an image of
    application/pdf, base64 payloads are validated, and mimes the providers reject (a bmp image, a text/plain
    document on Anthropic) are refused by the block allowlist."""
    with pytest.raises(ContentPartError) as e:
        image(str(write(tmp_path, "doc.pdf", b"%PDF")))
    assert (
        str(e.value)
        == '".pdf" makes a file part (application/pdf), not an image part — use file(), or pass an explicit mime_type'
    )
    with pytest.raises(ContentPartError, match="not an audio part"):
        audio("https://x/cat.png")
    with pytest.raises(ContentPartError, match='an image part needs a image/\\* mimeType, got "application/pdf"'):
        image(b"%PDF", mime_type="application/pdf")
    with pytest.raises(ContentPartError, match="not valid padded base64"):
        image("data:image/png;base64,not*base64")
    with pytest.raises(ContentPartError, match="not valid padded base64"):
        part(type="image", mimeType="image/png", data="QUJD=")
    with pytest.raises(UnsupportedPartError):
        encode_part(part(type="image", mimeType="image/bmp", data=PNG), "openai")
    with pytest.raises(UnsupportedPartError):
        encode_part(part(type="image", mimeType="image/bmp", data=PNG), "anthropic")
    with pytest.raises(UnsupportedPartError):
        encode_part(part(type="file", mimeType="text/plain", data="aGk="), "anthropic")


def test_url_extension_comes_from_the_path_and_sizes_are_checked_before_reading(tmp_path, monkeypatch):
    """A URL's extension is read from its path (a.png?sig=1 is a PNG), and a file is stat-ed before it is read
    and never read past limit + 1 bytes."""
    assert image("https://cdn.example/a.png?sig=1&x=.gif").mimeType == "image/png"
    assert file("https://cdn.example/r.pdf#page=2").mimeType == "application/pdf"

    big = write(tmp_path, "big.png", b"x" * 10_000)
    opened = []
    real_open = open

    def spy_open(path, *a, **kw):
        opened.append(os.fspath(path))
        return real_open(path, *a, **kw)

    monkeypatch.setattr("builtins.open", spy_open)
    with pytest.raises(ContentPartError) as e:
        image(big, max_part_bytes=100)
    assert str(e.value) == "content part is 10000 decoded bytes, over the maxPartBytes limit of 100"
    assert opened == []  # refused on the stat, before any read
    monkeypatch.undo()

    class Stream(io.RawIOBase):
        name = "clip.mp3"

        def __init__(self):
            self.asked = []

        def readable(self):
            return True

        def read(self, n=-1):
            self.asked.append(n)
            return b"y" * (n if n >= 0 else 1_000_000)

    stream = Stream()
    with pytest.raises(ContentPartError, match="over the maxPartBytes limit of 100"):
        audio(stream, max_part_bytes=100)
    assert stream.asked == [101]
