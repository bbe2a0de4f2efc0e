"""The web tools over httpx: page fetching with SSRF checks on every hop, and search.

The package itself imports nothing, so ``tool_spec`` can be read without loading httpx;
import the tool from :mod:`.web_search`.
"""
