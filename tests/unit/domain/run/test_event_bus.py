"""The event bus delivers typed events and survives failing subscribers."""

from __future__ import annotations

from jarvis.domain.run.events import (
    AgentRunStarted,
    Event,
    EventBus,
    EventType,
    InferenceStarted,
    Subscriber,
)


def test_subscribers_receive_published_events() -> None:
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append)
    event = AgentRunStarted(agent="simple", input="hi")
    bus.publish(event)
    assert seen == [event]


def test_a_failing_subscriber_never_breaks_the_publisher_or_the_others() -> None:
    errors: list[Exception] = []
    bus = EventBus(on_error=lambda _s, exc: errors.append(exc))
    seen: list[Event] = []

    def broken(_event: Event) -> None:
        raise RuntimeError("subscriber bug")

    bus.subscribe(broken)
    bus.subscribe(seen.append)
    bus.publish(AgentRunStarted(agent="simple", input="hi"))
    assert len(seen) == 1
    assert [str(e) for e in errors] == ["subscriber bug"]


def test_a_failing_error_handler_is_contained_too() -> None:
    def explode(_s: Subscriber, _e: Exception) -> None:
        raise ValueError("handler bug")

    bus = EventBus(on_error=explode)
    bus.subscribe(lambda _e: (_ for _ in ()).throw(RuntimeError("x")))
    bus.publish(AgentRunStarted(agent="a", input="b"))  # does not raise


def test_typed_subscription_filters_by_event_type() -> None:
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(seen.append, EventType.INFERENCE_START)
    bus.publish(AgentRunStarted(agent="a", input="b"))
    bus.publish(InferenceStarted(engine="e", model="m"))
    assert [e.type for e in seen] == [EventType.INFERENCE_START]


def test_unsubscribe_stops_delivery() -> None:
    bus = EventBus()
    seen: list[Event] = []
    unsubscribe = bus.subscribe(seen.append)
    unsubscribe()
    unsubscribe()  # idempotent
    bus.publish(AgentRunStarted(agent="a", input="b"))
    assert seen == []
    assert not bus.has_subscribers
