"""``opencode.json`` for one engine: a provider ``jarvis`` on the engine's OpenAI-compatible
API with the one model, offline and private (no sharing, no updates), permissions per agent.
"""

from __future__ import annotations

import json

PROVIDER_ID = "jarvis"
CONTEXT_TOKENS = 32_768
OUTPUT_TOKENS = 4_096


def opencode_config(*, base_url: str, model: str, api_key: str) -> str:
    """The config text. ``build`` may edit and run commands; ``plan`` may not (opencode's
    own agent rules); nothing may fetch from the web."""
    config = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": f"{PROVIDER_ID}/{model}",
        "small_model": f"{PROVIDER_ID}/{model}",
        "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny"},
        "agent": {"plan": {"permission": {"edit": "deny", "bash": "deny"}}},
        "provider": {
            PROVIDER_ID: {
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
