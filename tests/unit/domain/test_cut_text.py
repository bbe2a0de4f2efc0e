"""Cutting text masked for URL credentials: a cut inside a URL's authority keeps nothing of
its credentials, and masking costs only what is kept."""

from __future__ import annotations

from jarvis.domain.cut_text import cut_masked, masked_prefix
from jarvis.domain.url_masks import redact_urls

TEXT = "see http://admin:Hunter2Secret@db.internal:5432/x and https://tok3n@h/y, then more"
SECRETS = ("admin", "Hunter2Secret", "tok3n")


def test_a_cut_anywhere_keeps_no_credential() -> None:
    for limit in range(len(TEXT) + 2):
        kept = cut_masked(TEXT, limit, redact_urls)
        assert len(kept) <= limit + 3  # "***" may be longer than what it hides
        for secret in SECRETS:
            for size in range(2, len(secret) + 1):
                assert secret[:size] not in kept, (limit, kept)


def test_what_is_not_cut_is_masked_as_a_whole() -> None:
    assert cut_masked(TEXT, len(TEXT), redact_urls) == redact_urls(TEXT)
    assert cut_masked("plain text", 5, redact_urls) == "plain"
    assert cut_masked("an @ at the cut", 4, redact_urls) == "an @"


def test_masking_costs_only_what_is_kept() -> None:
    seen: list[int] = []

    def mask(text: str) -> str:
        seen.append(len(text))
        return redact_urls(text)

    huge = "http://" + "a" * 10_000_000 + "@host"
    assert cut_masked(huge, 4000, mask) == "http://***"
    assert seen == [4001]


def test_a_quote_of_outside_text_masks_with_the_url_masker() -> None:
    assert masked_prefix(TEXT, 25) == "see http://***"
    assert masked_prefix(TEXT, len(TEXT)) == redact_urls(TEXT)
