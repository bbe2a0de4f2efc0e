"""The embedded engine holds the inner completions of llama.cpp's function-calling format
to ``max_tokens``: that format runs them with ``max_tokens=None`` (to the end of the context)."""

from __future__ import annotations

from jarvis.adapters.inference.llamacpp import MIN_INNER_TOKENS, _completions_bounded


class FunctionCallingLlama:
    """Calls its own ``create_completion`` as llama-cpp-python's chat formats do."""

    chat_format: str | None = None
    metadata: dict[str, str] = {}  # noqa: RUF012

    def __init__(self) -> None:
        self.asked: list[object] = []

    @property
    def n_tokens(self) -> int:
        return 0

    def create_completion(self, *args: object, **kwargs: object) -> object:
        self.asked.append(kwargs.get("max_tokens"))
        return {}

    def create_chat_completion(self, **kwargs: object) -> object:
        self.create_completion(prompt="choose", max_tokens=None)  # the format's own calls
        self.create_completion(prompt="arguments", max_tokens=None)
        self.create_completion(prompt="bounded", max_tokens=5)
        return {}

    def close(self) -> None:
        pass


def test_inner_completions_without_a_bound_get_the_requests_one_and_only_for_that_call() -> None:
    llama = FunctionCallingLlama()
    with _completions_bounded(llama, 100):
        llama.create_chat_completion()
    assert llama.asked == [100, 100, 5]
    llama.create_chat_completion()  # after the call: the object is as it was
    assert llama.asked[3:] == [None, None, 5]
    assert "create_completion" not in vars(llama)


def test_a_tiny_max_tokens_still_leaves_room_for_the_formats_choice() -> None:
    llama = FunctionCallingLlama()
    with _completions_bounded(llama, 1):
        llama.create_chat_completion()
    assert llama.asked[:2] == [MIN_INNER_TOKENS, MIN_INNER_TOKENS]
