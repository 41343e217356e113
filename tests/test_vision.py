"""The vision tool: images checked by content, downscaled, sent to a model that has vision."""

from __future__ import annotations

import base64
import io

import pytest

from lmagent.tools.registry import Toolset
from lmagent.tools.vision import MAX_SIDE, sniff_image, vision_tool
from tests.conftest import make_config, tool_context
from tests.scripted_llm import ScriptedLLM, text

Image = pytest.importorskip("PIL.Image")


def png_bytes(size=(8, 8), colour=(255, 0, 0)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format="PNG")
    return buffer.getvalue()


def run_vision(workspace, server, args) -> dict:
    config = make_config(workspace, server)
    ctx = tool_context(config)
    return Toolset([vision_tool("vision-model")]).execute(ctx, "vision", args)


def sent_image(server: ScriptedLLM) -> tuple[str, bytes]:
    content = server.requests[-1]["messages"][0]["content"]
    url = next(part["image_url"]["url"] for part in content if part["type"] == "image_url")
    header, _, payload = url.partition(",")
    return header, base64.b64decode(payload)


def test_image_goes_to_the_vision_model_as_a_data_url(workspace):
    (workspace / "shot.png").write_bytes(png_bytes())
    with ScriptedLLM([text("A red square.")]) as server:
        result = run_vision(workspace, server, {"path": "shot.png", "prompt": "What colour?"})
        assert result == {
            "success": True,
            "path": "shot.png",
            "model": "vision-model",
            "analysis": "A red square.",
        }
        header, data = sent_image(server)
        assert header == "data:image/png;base64"
        assert data == (workspace / "shot.png").read_bytes()
        assert server.requests[-1]["model"] == "vision-model"


def test_a_bare_server_address_reaches_the_chat_endpoint_without_an_empty_key(workspace):
    # LLM_URL may be the server's address alone, as the client takes it; no key, no header
    (workspace / "shot.png").write_bytes(png_bytes())
    with ScriptedLLM([text("A red square.")]) as server:
        config = make_config(workspace, server, llm_url=server.base_url, llm_api_key="")
        ctx = tool_context(config)
        result = Toolset([vision_tool("vision-model")]).execute(ctx, "vision", {"path": "shot.png"})
        assert result["analysis"] == "A red square."
        assert "authorization" not in server.request_headers[-1]


def test_large_image_is_downscaled(workspace):
    (workspace / "big.png").write_bytes(png_bytes((4000, 1000)))
    with ScriptedLLM([text("wide")]) as server:
        assert run_vision(workspace, server, {"path": "big.png"})["success"] is True
        header, data = sent_image(server)
        assert header == "data:image/jpeg;base64"
        assert max(Image.open(io.BytesIO(data)).size) == MAX_SIDE


def test_type_is_checked_by_content_not_extension(workspace):
    (workspace / "fake.png").write_text("<svg onload=alert(1)>")
    (workspace / "real.txt").write_bytes(png_bytes())
    with ScriptedLLM([text("ok")]) as server:
        refused = run_vision(workspace, server, {"path": "fake.png"})
        assert refused["success"] is False and "not an image" in refused["error"]
        assert run_vision(workspace, server, {"path": "real.txt"})["success"] is True


def test_missing_or_outside_files_are_refused(workspace):
    with ScriptedLLM() as server:
        assert "not found" in run_vision(workspace, server, {"path": "nope.png"})["error"]
        outside = run_vision(workspace, server, {"path": "/etc/hostname"})
        assert outside["success"] is False and "outside the workspace" in outside["error"]
        assert server.requests == []


def test_sniffing_recognises_the_four_formats():
    assert sniff_image(b"\xff\xd8\xff\xe0rest") == "image/jpeg"
    assert sniff_image(png_bytes()) == "image/png"
    assert sniff_image(b"GIF89a....") == "image/gif"
    assert sniff_image(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert sniff_image(b"%PDF-1.7") is None
