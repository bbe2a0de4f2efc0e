"""The agents: how a question becomes an answer, each on the loop and protocols of
:mod:`jarvis.domain.loop` and :mod:`jarvis.domain.protocols`."""
