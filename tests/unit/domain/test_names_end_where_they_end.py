"""Names that become store keys and session ids are checked whole: ``$`` in a pattern also
matches before a final newline, so ``"news\\n"`` passed as a valid operator name, session id
or store key. And a refused name is cut at 80 characters in its message: it may come from
a client, a file or a model, and echoing 30,000 characters helps nobody."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jarvis.domain.errors import ConfigurationError
from jarvis.domain.operators import check_operator_id, check_state_key
from jarvis.domain.sessions.ids import check_session_id

CHECKS: dict[str, Callable[[str], str]] = {
    "operator": check_operator_id,
    "state key": check_state_key,
    "session": check_session_id,
}


@pytest.mark.parametrize("check", CHECKS.values(), ids=CHECKS.keys())
def test_a_name_with_a_final_newline_is_refused(check: Callable[[str], str]) -> None:
    assert check("news") == "news"
    with pytest.raises(ConfigurationError):
        check("news\n")


@pytest.mark.parametrize("check", CHECKS.values(), ids=CHECKS.keys())
def test_a_refused_long_name_is_cut_in_its_message(check: Callable[[str], str]) -> None:
    with pytest.raises(ConfigurationError) as caught:
        check("é" * 30_000)
    assert len(str(caught.value)) < 300
    assert "..." in str(caught.value)
