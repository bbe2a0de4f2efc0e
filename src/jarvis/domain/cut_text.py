"""Cutting text that is shown or kept with its URL credentials masked.

A masker finds a URL's userinfo by the ``@`` that ends it (``http://user:secret@host``).
Masking the whole text before cutting it costs time in proportion to the whole text (a
tool result, a question of megabytes), for a few thousand characters kept. Cutting first
costs only what is kept, but a cut inside a URL's authority
(``http://admin:Hunter2Se|cret@db``) leaves that ``@`` past the cut, where no masker sees
it, and the start of the password would be kept in clear.

:func:`cut_masked` cuts first and closes the authority the cut may fall in: it puts an
``@`` at the cut, so the masker takes what was kept of an unfinished authority for
userinfo and masks it, then takes that ``@`` away again. A host cut there is masked too:
it was cut anyway. The result is what masking the whole text would have kept of the
credentials (nothing), at the cost of the kept part.
"""

from __future__ import annotations

from collections.abc import Callable

from jarvis.domain.url_masks import redact_urls


def cut_masked(text: str, limit: int, mask: Callable[[str], str]) -> str:
    """The first ``limit`` characters of ``text``, masked by ``mask``; an authority the cut
    falls in is masked whole (see the module)."""
    if len(text) <= limit:
        return mask(text)
    masked = mask(text[:limit] + "@")
    return masked[:-1] if masked.endswith("@") else masked


def masked_prefix(text: str, limit: int) -> str:
    """What an error message quotes of text from outside (an engine's body, a process's
    stderr): its first ``limit`` characters with URL credentials masked, a cut authority
    included. Masking it later, whole, would miss a password the cut ends in."""
    return cut_masked(text, limit, redact_urls)
