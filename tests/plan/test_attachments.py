"""Attachments at plan time: headers read without decoding, token rules per provider, limits,
references keyed by content (not path), and problems that fail one row."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from PIL import Image

from batchor.errors import AttachmentChangedError, AttachmentMissingError, AttachmentUnsupportedError
from batchor.plan.attachments import AttachmentContext, describe_row, input_folder, keyed_view, load
from batchor.plan.image_tokens import attachment_tokens
from batchor.plan.media_info import MediaError, describe, pdf_pages
from batchor.providers.anthropic.facts import image_tokens as anthropic_tokens
from batchor.providers.gemini.facts import image_tokens as gemini_tokens
from batchor.providers.openai.facts import image_tokens as openai_tokens
from tests.media_files import image_bytes, pdf_bytes, write


@pytest.mark.parametrize(
    "fmt, kind", [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"), ("WEBP", "image/webp")]
)
def test_image_size_from_the_header(fmt, kind):
    info = describe(image_bytes(1234, 567, fmt))
    assert (info.media_type, info.width, info.height) == (kind, 1234, 567)


@pytest.mark.parametrize("options", [{"lossless": True}, {"mode": "RGBA"}])
def test_webp_lossless_and_extended_headers(options):
    out = io.BytesIO()
    Image.new(options.pop("mode", "RGB"), (321, 123)).save(out, format="WEBP", **options)
    info = describe(out.getvalue())
    assert (info.width, info.height) == (321, 123)


def test_jpeg_size_is_read_from_the_header_bytes_only():
    data = image_bytes(640, 480, "JPEG")
    header = data[: data.index(b"\xff\xc0") + 12]  # up to the start-of-frame: no pixel data
    assert (describe(header).width, describe(header).height) == (640, 480)


def test_pdf_page_count_and_damaged_files():
    assert describe(pdf_bytes(3)).pages == 3
    assert pdf_pages(pdf_bytes(2)) == (2, False)
    with pytest.raises(MediaError, match="unknown file signature"):
        describe(b"hello, not an image")
    with pytest.raises(MediaError, match="damaged"):
        describe(b"%PDF-1.7 garbage")


@pytest.mark.parametrize(
    "width, height, tokens",
    [(512, 512, 85 + 170), (1024, 1024, 85 + 170 * 4), (2048, 4096, 85 + 170 * 6), (100, 100, 255)],
)
def test_openai_tile_rule(width, height, tokens):
    assert openai_tokens(width, height, 0) == tokens  # documented examples: 1024x1024 -> 765, 2048x4096 -> 1105


def test_anthropic_and_gemini_rules():
    assert anthropic_tokens(1000, 1000, 0) == 1334  # width x height / 750
    assert anthropic_tokens(4000, 4000, 0) == anthropic_tokens(1072, 1072, 0)  # fits ~1.15 MP first
    assert gemini_tokens(300, 300, 0) == 258
    assert gemini_tokens(960, 540, 0) == 258 * 6  # tile 360 px: 3 x 2 tiles
    assert gemini_tokens(0, 0, 4) == 4 * 258  # PDFs: 258 per page


def test_token_rules_follow_the_provider(tmp_path):
    ref = describe_row(
        [str(write(tmp_path / "a.png", image_bytes(1024, 1024)))], "r1", AttachmentContext(tmp_path, "openai")
    )[0]
    assert attachment_tokens("openai", ref) == 765
    assert attachment_tokens("anthropic", ref) == 1399
    assert attachment_tokens("gemini", ref) == 258 * 4


def test_relative_paths_start_at_the_input_folder(tmp_path):
    assert input_folder(tmp_path, "data/rows.csv") == tmp_path / "data"
    assert input_folder(tmp_path, "data/*.csv") == tmp_path / "data"
    assert input_folder(tmp_path, "**/rows.csv") == tmp_path


def test_the_key_holds_the_content_hash_not_the_path(tmp_path):
    ctx = AttachmentContext(tmp_path, "anthropic")
    first = describe_row(
        ["a.png"], "r1", AttachmentContext(write(tmp_path / "a.png", image_bytes(64, 64)).parent, "anthropic")
    )
    moved = write(tmp_path / "elsewhere" / "b.png", image_bytes(64, 64))
    second = describe_row([str(moved)], "r1", ctx)
    assert first[0]["path"] != second[0]["path"]
    assert keyed_view(first) == keyed_view(second)
    changed = describe_row([str(write(moved, image_bytes(64, 64, colour=(1, 2, 3))))], "r1", ctx)
    assert keyed_view(changed) != keyed_view(second)


def test_inline_data_uri_base64_and_bytes_values(tmp_path):
    data = image_bytes(40, 30)
    b64 = base64.b64encode(data).decode()
    ctx = AttachmentContext(tmp_path, "openai")
    refs = describe_row([f"data:image/png;base64,{b64}", b64, data], "r1", ctx)
    assert [r["width"] for r in refs] == [40, 40, 40]
    assert len({r["sha256"] for r in refs}) == 1
    assert [a.data for a in load(refs)] == [data] * 3


def test_urls_are_sent_only_where_the_provider_fetches_them(tmp_path):
    url = "https://example.org/scan.pdf"
    assert describe_row([url], "r1", AttachmentContext(tmp_path, "anthropic"))[0] == {
        "media_type": "application/pdf",
        "url": url,
    }
    refused = describe_row([url], "r9", AttachmentContext(tmp_path, "openai"))[0]
    assert refused["error"] == "attachment_unsupported"
    assert "row r9" in refused["detail"] and "never downloads" in refused["detail"]
    plain = describe_row(["http://example.org/a.png"], "r2", AttachmentContext(tmp_path, "anthropic"))[0]
    assert plain["error"] == "attachment_unsupported"
    with pytest.raises(AttachmentUnsupportedError, match="row r9"):
        load([refused])


def test_problems_name_the_row_and_the_file(tmp_path):
    write(tmp_path / "notes.txt", b"plain text")
    gif = write(tmp_path / "anim.gif", image_bytes(20, 20, "GIF"))
    ctx = AttachmentContext(tmp_path, "gemini")
    missing, text, gif_ref = describe_row(["nope.png", "notes.txt", str(gif)], "row-7", ctx)
    assert missing["error"] == "attachment_missing" and "row row-7" in missing["detail"]
    assert "nope.png" in missing["detail"]
    assert text["error"] == "attachment_unsupported" and "notes.txt" in text["detail"]
    assert gif_ref["error"] == "attachment_unsupported" and "gemini does not accept image/gif" in gif_ref["detail"]
    with pytest.raises(AttachmentMissingError, match="nope.png"):
        load([missing])


def test_provider_limits_checked_per_file_and_per_request(tmp_path):
    big = write(tmp_path / "big.pdf", pdf_bytes(101))
    refs = describe_row([str(big)], "r3", AttachmentContext(tmp_path, "anthropic"))
    assert refs[0]["error"] == "attachment_too_large" and "101 pages" in refs[0]["detail"]
    assert "error" not in describe_row([str(big)], "r3", AttachmentContext(tmp_path, "gemini"))[0]
    small = str(write(tmp_path / "s.png", image_bytes(8, 8)))
    many = describe_row([small] * 101, "r4", AttachmentContext(tmp_path, "anthropic"))
    assert many[-1]["error"] == "attachment_too_large" and "101 attachments" in many[-1]["detail"]
    wide = str(write(tmp_path / "w.png", image_bytes(2400, 100)))
    assert "error" not in describe_row([wide] + [small] * 19, "r5", AttachmentContext(tmp_path, "anthropic"))[-1]
    crowded = describe_row([wide] + [small] * 20, "r5", AttachmentContext(tmp_path, "anthropic"))
    assert crowded[-1]["error"] == "attachment_too_large" and "2000 px" in crowded[-1]["detail"]


def test_a_file_changed_since_the_plan_is_not_sent(tmp_path):
    path = write(tmp_path / "a.png", image_bytes(10, 10))
    refs = describe_row([str(path)], "r1", AttachmentContext(tmp_path, "openai"))
    write(path, image_bytes(10, 10, colour=(0, 0, 0)))
    with pytest.raises(AttachmentChangedError, match="plan"):
        load(refs)


def test_missing_folder_value_types(tmp_path: Path):
    ref = describe_row([12], "r1", AttachmentContext(tmp_path, "openai"))[0]
    assert ref["error"] == "attachment_invalid"
