"""Whether a served agent's model takes images, and the 400 for an image it would not.

The rule, decided from the model id only (no request to the model):

1. litellm's model data (``runner.models.model_data``, read as a data file: litellm is not
   imported): a model the map lists takes images when its entry says ``supports_vision: true``
   and not otherwise (litellm's own ``supports_vision`` reads a missing key as no).
2. An id the map does not list (a local OpenAI-compatible server's name, ``openai/...`` with an
   ``api_base``): the name after the provider is matched against the small tables below, the
   image-taking families first (``llama-3.2-11b-vision`` is a Llama 3 that takes images).
3. Neither: unknown, and the image goes to the model, which answers for itself (a refusal is its
   502 ``model_error``). The test suite's ``openai/scripted`` model is unknown, so images reach it.

There is no agent-file setting for this; an agent whose model is refused wrongly can name it by an
id the map knows. A workflow's request is not checked (its steps' agents each have their own model).
"""

from __future__ import annotations

import re
from typing import Any

from runner.serve.protocol import ApiError

__all__ = ["check_images", "image_params", "takes_images"]

#: Model families that take images (names without their provider, matched anywhere, any case).
_VISION = re.compile(
    r"vision|(?:^|[-_.:/])vl(?:$|[-_.:])|llava|pixtral|gpt-4o|gpt-4\.1|gpt-4-turbo|gpt-5|"
    r"claude-(?:3|sonnet|opus|haiku)|gemini|gemma-?3|llama-?4|minicpm-v|moondream|internvl|"
    r"molmo|multimodal|^o[134](?:$|-(?!mini))",
    re.IGNORECASE,
)
#: Model families that take text only.
_TEXT_ONLY = re.compile(
    r"gpt-3\.5|davinci|babbage|deepseek|o1-mini|o3-mini|llama-?[23]|codellama|mistral-7b|mixtral|"
    r"qwen[0-9.]*-coder|qwq|phi-?[23](?:$|[-_.:])|embed",
    re.IGNORECASE,
)


def takes_images(model_id: str) -> bool | None:
    """True / False when the rule above decides for ``model_id``; None when it does not know."""
    from runner.models.model_data import model_info

    info = model_info(model_id)
    if info is not None:
        return info.get("supports_vision") is True
    name = model_id.split("/", 1)[1] if "/" in model_id else model_id
    if _VISION.search(name):
        return True
    if _TEXT_ONLY.search(name):
        return False
    return None


def image_params(value: Any) -> list[str]:
    """Where the ``input`` holds image parts: ``input[i].content[j]`` for each (after validation)."""
    if not isinstance(value, list):
        return []
    found = []
    for index, item in enumerate(value):
        content = item.get("content") if isinstance(item, dict) else None
        for position, part in enumerate(content if isinstance(content, list) else ()):
            if isinstance(part, dict) and part.get("type") == "input_image":
                found.append(f"input[{index}].content[{position}]")
    return found


def check_images(value: Any, agent: str, model_id: str | None) -> None:
    """A 400 (``image_input_unsupported``, naming the first image part) when ``value`` holds images
    and the model of ``agent`` is known to take none."""
    if model_id is None:
        return
    where = image_params(value)
    if not where or takes_images(model_id) is not False:
        return
    more = f" (and {len(where) - 1} more)" if len(where) > 1 else ""
    raise ApiError(
        400,
        f"'{where[0]}'{more} is an image, and the model of '{agent}' ({model_id}) does not take "
        "images; send text only, or serve an agent whose model takes images",
        param=where[0],
        code="image_input_unsupported",
    )
