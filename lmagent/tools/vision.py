"""The `vision` tool: show an image from the workspace to a model that really has vision.

Offered only when the server reports a vision model (LM Studio `type: vlm`) or VISION_ENABLED is
true. Images are checked by content, not by extension, and downscaled when too large.
"""

from __future__ import annotations

import base64
import errno
import io
from typing import Annotated as A

import requests

from lmagent.llm.client import auth_headers, chat_url
from lmagent.tools.registry import Tool, ToolContext, ToolError, make_tool

MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_SIDE = 1536  # pixels on the longest side sent to the model
MAX_SEND_BYTES = 4 * 1024 * 1024


def sniff_image(data: bytes) -> str | None:
    """The MIME type of JPEG, PNG, GIF or WebP data, judged by its first bytes; else None."""
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def prepare_image(data: bytes) -> tuple[str, bytes]:
    """(mime, bytes) ready to send: verified, and downscaled when larger than the model takes."""
    mime = sniff_image(data)
    if mime is None:
        raise ToolError("not an image: only JPEG, PNG, GIF and WebP files can be analysed")
    if len(data) > MAX_IMAGE_BYTES:
        raise ToolError(f"image is larger than {MAX_IMAGE_BYTES // 2**20} MB")
    try:
        from PIL import Image
    except ImportError:
        if len(data) > MAX_SEND_BYTES:
            raise ToolError(
                "image too large to send and Pillow is not installed to shrink it"
            ) from None
        return mime, data
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except Exception as exc:
        raise ToolError(f"the image could not be decoded: {exc}") from None
    if max(image.size) <= MAX_SIDE and len(data) <= MAX_SEND_BYTES:
        return mime, data
    image.thumbnail((MAX_SIDE, MAX_SIDE))
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="JPEG", quality=85)
    return "image/jpeg", buffer.getvalue()


def data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def vision_tool(model_id: str) -> Tool:
    """A `vision` tool bound to one vision-capable model."""

    def tool_vision(
        ctx: ToolContext,
        path: A[str, "image file in the workspace (JPEG, PNG, GIF, WebP)"],
        prompt: A[str, "what to look for"] = "Describe this image in detail.",
    ) -> dict:
        """Analyse an image from the workspace with the vision model."""
        try:
            raw, rel = ctx.workspace.read_bytes(path, MAX_IMAGE_BYTES)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise ToolError(f"file not found: {path}") from None
        except OSError as exc:
            if exc.errno == errno.EFBIG:
                raise ToolError(f"image is larger than {MAX_IMAGE_BYTES // 2**20} MB") from None
            raise ToolError(f"cannot read '{path}': {exc.strerror or exc}") from None
        mime, data = prepare_image(raw)
        answer = ask_vision_model(ctx.config, model_id, prompt, data_url(mime, data))
        return {"path": rel, "model": model_id, "analysis": answer}

    return make_tool(tool_vision)


def ask_vision_model(config, model_id: str, prompt: str, image_url: str) -> str:
    body = {
        "model": model_id,
        "stream": False,
        "temperature": 0.2,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": prompt},
                    {"type": "image_url", "image_url": {"url": image_url}},
                ],
            }
        ],
    }
    try:
        response = requests.post(
            chat_url(config.llm_url),
            json=body,
            headers=auth_headers(config.llm_api_key),
            timeout=(10, config.llm_timeout),
        )
    except requests.RequestException as exc:
        raise ToolError(f"the vision model could not be reached: {exc}") from None
    if response.status_code >= 400:
        raise ToolError(
            f"the vision model failed: HTTP {response.status_code} {response.text[:300]}"
        )
    try:
        return response.json()["choices"][0]["message"]["content"] or ""
    except (ValueError, KeyError, IndexError, TypeError):
        raise ToolError("the vision model sent a reply that could not be read") from None
