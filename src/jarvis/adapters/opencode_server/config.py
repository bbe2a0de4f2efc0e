"""``opencode.json`` for one engine: a provider (``jarvis`` unless named) on the engine's
OpenAI-compatible API with the one model, offline and private (no sharing, no updates),
permissions per agent. In pass-through mode (no engine URL, a ``provider/model`` model) no
provider is written: opencode resolves the model from its own configuration.
"""

from __future__ import annotations

import json

PROVIDER_ID = "jarvis"
CONTEXT_TOKENS = 32_768
OUTPUT_TOKENS = 4_096


def passthrough_config() -> str:
    """The config text of pass-through mode: the same policy, no provider, no model."""
    return json.dumps(_policy(), indent=2)


def _policy() -> dict[str, object]:
    return {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny"},
        "agent": {"plan": {"permission": {"edit": "deny", "bash": "deny"}}},
    }


def opencode_config(
    *, base_url: str, model: str, api_key: str, provider_id: str = PROVIDER_ID
) -> str:
    """The config text. ``build`` may edit and run commands; ``plan`` may not (opencode's
    own agent rules); nothing may fetch from the web."""
    config = {
        **_policy(),
        "model": f"{provider_id}/{model}",
        "small_model": f"{provider_id}/{model}",
        "provider": {
            provider_id: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "jarvis engine",
                "options": {"baseURL": base_url, "apiKey": api_key or "jarvis-local"},
                "models": {
                    model: {
                        "name": model,
                        "tool_call": True,
                        "limit": {"context": CONTEXT_TOKENS, "output": OUTPUT_TOKENS},
                    }
                },
            }
        },
    }
    return json.dumps(config, indent=2)
