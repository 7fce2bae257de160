"""The runner's recording span: what the SDK's ``Span`` records, at a fraction of its cost a call.

The SDK's tracer validates every attribute under a lock as it is set, wraps each event's attributes
in a ``BoundedAttributes``, asks its processors at a span's start and end, and builds the span it
hands them from the live one (~40 us a span start on a busy loop, ~200 us a step in all). The
runner's spans are made and ended on one task, with attributes it makes itself, so this one reads
its scope's attributes (a dict the scope fills while it runs) only once the span has ended, where
the exporter asks for them, on the batch processor's thread: there the values are checked (plain
values as they are, anything else through the SDK's own ``BoundedAttributes``), ``None`` and the
attributes the user did not opt in to left out, and the configured ``SpanLimits`` applied. The run's
loop only starts, ends and hands on the span; a span's parent (and a request's ``traceparent``) is
read from the context with one lookup when it is the runner's own span, under the key the API
itself uses (``SPAN_KEY``, asked of the API at import), and through the API otherwise. What the
processor and the exporter receive is the SDK's own ``ReadableSpan`` (this class is one): the same
name, ids, parent, kind, attributes, events, status, times, resource and instrumentation scope as
the SDK's tracer would give them (``tests/telemetry/test_spans.py`` holds the two side by side).

The sampler (``OTEL_TRACES_SAMPLER``), the id generator and the span limits
(``OTEL_SPAN_*_LIMIT``, ``OTEL_ATTRIBUTE_*``) are the provider's; a span the sampler drops is the
API's ``NonRecordingSpan`` (it still carries the trace context to what it calls), as with the SDK.
A sampler other than the default is given the start attributes, and what it returns is the span's
first attributes (the scope's own come after them).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from time import time_ns
from types import MappingProxyType
from typing import Any, cast

from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, SpanProcessor, TracerProvider, sampling
from opentelemetry.sdk.trace import Span as SDKSpan
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

__all__ = ["BAGGAGE_KEY", "SPAN_KEY", "Spans"]

log = logging.getLogger("runner.telemetry")

_PLAIN = (str, bool, int, float)
#: W3C trace context level 2's "random trace id" flag (SDKs before 1.41 do not set it).
_RANDOM = getattr(TraceFlags, "RANDOM_TRACE_ID", 0)
_SAMPLED = TraceFlags.SAMPLED
_UNSET = Status(StatusCode.UNSET)
_NONE: Mapping[str, Any] = MappingProxyType({})


def _key(context: Context) -> str:
    """The one key of ``context``, which the API made from an empty one."""
    (key,) = context.keys()
    return key


#: The keys under which the API keeps a context's span and its baggage (a ``Context`` is a dict),
#: asked of the API itself: a span's start reads its parent, and a request's ``traceparent`` its
#: span, with one lookup each instead of the API's chain of calls.
SPAN_KEY = _key(trace.set_span_in_context(trace.INVALID_SPAN, Context()))
BAGGAGE_KEY = _key(baggage.set_baggage("runner", "key", Context()))


def _plain_tuple(value: Any) -> bool:
    """Whether ``value`` is a tuple of plain values of one type (what the conventions allow)."""
    if type(value) is not tuple or not value:
        return False
    first = type(value[0])
    return first in _PLAIN and all(type(v) is first for v in value)


def _checked(attributes: Mapping[str, Any]) -> Mapping[str, Any]:
    """``attributes`` themselves when every value is one the conventions allow as it is; else a
    copy as the SDK's ``BoundedAttributes`` cleans it (other sequences made tuples, an invalid value
    replaced as the SDK's warning says)."""
    for value in attributes.values():
        if type(value) not in _PLAIN and not _plain_tuple(value):
            return dict(BoundedAttributes(None, attributes, immutable=False))
    return attributes


def _bounded(values: dict[str, Any], count: int | None, length: int | None) -> Mapping[str, Any]:
    """``values`` within a count and a value-length limit, as the SDK bounds them (the oldest
    dropped, and counted); as they are when neither limit applies."""
    if (count is not None and len(values) > count) or length is not None:
        return BoundedAttributes(count, values, immutable=True, max_value_len=length)
    return values


class Spans:
    """Start recording spans for ``provider``'s sampler and ids; hand each ended one to ``processor``."""

    def __init__(
        self,
        provider: TracerProvider,
        processor: SpanProcessor,
        resource: Resource,
        limits: SpanLimits,
        scope: InstrumentationScope,
        hidden: frozenset[str] = frozenset(),
    ) -> None:
        self.sampler = provider.sampler
        self.ids = provider.id_generator
        self.processor = processor
        self.resource = resource
        self.limits = limits
        self.scope = scope
        #: Attributes left out of every span (the newest conventions' without the user's opt-in).
        self.hidden = hidden
        #: The class of this provider's spans: the span class with its resource, scope and ``self``.
        fields = {"_spans": self, "_resource": resource, "_instrumentation_scope": scope}
        self.made: type[Span] = type("Span", (Span,), fields)
        self._random_ids = bool(_RANDOM) and bool(getattr(self.ids, "is_trace_id_random", lambda: False)())

    def start(self, name: str, attributes: Mapping[str, Any], parent: Any, kind: SpanKind) -> trace.Span:
        """A span named ``name`` under the context ``parent`` (None: the current one), started now.
        ``attributes`` are read as the span's once it has ended (a scope's, which it fills as it
        runs; not copied)."""
        if parent is None:
            parent = otel_context.get_current()
        above = self.span_context_in(parent)
        flags: int
        if above is not None:
            trace_id, flags = above.trace_id, above.trace_flags
            random = flags & _RANDOM
        else:
            trace_id, flags = self.ids.generate_trace_id(), _SAMPLED
            random = _RANDOM if self._random_ids else 0
        first: Mapping[str, Any] = {}
        if self.sampler is sampling.DEFAULT_ON:  # the default's decision, without its calls: the parent's
            sampled = recording = bool(flags & _SAMPLED)
            state: Any = above.trace_state if above is not None else None
        else:
            given = _checked(self.visible(attributes))
            decided = self.sampler.should_sample(parent, trace_id, name, kind, given, ())
            decision: Any = decided.decision
            recording, sampled = decision.is_recording(), decision.is_sampled()
            state, first = decided.trace_state, decided.attributes or {}
        flags = TraceFlags((_SAMPLED if sampled else 0) | random)
        context = SpanContext(trace_id, self.ids.generate_span_id(), False, flags, state)
        if not recording:
            return trace.NonRecordingSpan(context)
        span = self.made(name, context, above, kind, attributes)
        if first:
            span._first = first
        return span

    def span_context_in(self, context: Context) -> SpanContext | None:
        """The context of ``context``'s span; None when it has none that is valid. The runner's own
        span (always valid) is read with one lookup, any other as the API reads it."""
        span = context.get(SPAN_KEY)
        if type(span) is self.made:
            return span.context
        found = trace.get_current_span(context).get_span_context()
        return found if found.is_valid else None

    def visible(self, attributes: Mapping[str, Any]) -> dict[str, Any]:
        """``attributes`` as a span shows them: without ``None`` values and the hidden keys."""
        hidden = self.hidden
        return {k: v for k, v in attributes.items() if v is not None and k not in hidden}

    def event(self, name: str, attributes: Mapping[str, Any] | None, timestamp: int | None) -> Event:
        """An event as the SDK's span would hold it (its attributes within the event limits)."""
        values = dict(_checked(attributes or {}))  # the caller's dict may change after
        bounded = _bounded(values, self.limits.max_event_attributes, self.limits.max_attribute_length)
        return Event(name, bounded, timestamp if timestamp is not None else time_ns())


class Span(trace.Span, ReadableSpan):
    """A recording span of the runner's (see the module's docstring), ended once; it is itself the
    SDK's ``ReadableSpan`` its processor receives (as the SDK's own span is). Its attributes and
    events are settled (checked, limited) at the first read after it ended."""

    _settling = threading.Lock()
    # ReadableSpan's fields (which its properties, what exporters read, return) as they are until
    # set: a span starts with five of its own. ``Spans`` makes the subclass that names its
    # ``_spans``, ``_resource`` and ``_instrumentation_scope``.
    _spans: Spans
    _attributes: Any = None  # settled, once ended
    _events: Any = ()  # a list from the first event
    _links: Sequence[trace.Link] = ()
    _status = _UNSET
    _end_time: int | None = None
    _instrumentation_info = None
    _first: Mapping[str, Any] = _NONE  # the sampler's
    _set: Any = _NONE  # set on the span itself (checked): a dict from the first
    _error: str | None = None
    #: The span's context, as the SDK's ``ReadableSpan.context`` gives it: a plain attribute here (a
    #: processor reads it twice as each span ends).
    context: SpanContext = cast(SpanContext, None)

    def __init__(
        self,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        kind: SpanKind,
        attributes: Mapping[str, Any],
    ) -> None:
        self._name = name
        self.context = self._context = context
        self._parent = parent
        self._kind = kind
        self._live = attributes  # the scope's, read once the span has ended
        self._start_time = time_ns()

    # ----------------------------------------------------------------- what the exporter reads

    def _settled(self) -> None:
        """The span's attributes and events as the SDK's span holds them once ended (its limits
        applied); nothing before the end."""
        if self._attributes is not None or self._end_time is None:
            return
        with self._settling:
            if self._attributes is not None:
                return
            limits = self._spans.limits
            if limits.max_events is not None and len(self._events) > limits.max_events:
                self._events = BoundedList.from_seq(limits.max_events, self._events)
            count, length = limits.max_span_attributes, limits.max_span_attribute_length
            self._attributes = _bounded(self._merged(), count, length)

    @property
    def attributes(self) -> Mapping[str, Any]:
        self._settled()
        return MappingProxyType(self._attributes if self._attributes is not None else self._merged())

    @property
    def dropped_attributes(self) -> int:
        self._settled()
        return super().dropped_attributes

    @property
    def events(self) -> Sequence[Event]:
        self._settled()
        return tuple(self._events)

    @property
    def dropped_events(self) -> int:
        self._settled()
        return super().dropped_events

    def to_json(self, indent: int | None = 4) -> str:
        self._settled()
        return super().to_json(indent)

    def _merged(self) -> dict[str, Any]:
        """The attributes so far, unbounded: the sampler's, the scope's, those set on the span, the
        error last (what a reader before the end sees; what the end settles)."""
        merged = {**self._first, **_checked(self._spans.visible(self._live)), **self._set}
        if self._error:
            merged["error.type"] = self._error
        return merged

    # ----------------------------------------------------------------- the API's span

    def get_span_context(self) -> SpanContext:
        return self._context  # type: ignore[return-value]  # always set (the SDK's type allows None)

    def is_recording(self) -> bool:
        return self._end_time is None

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        if self._end_time is None:
            if self._set is _NONE:
                self._set = {}
            self._set.update(_checked(attributes))

    def set_attribute(self, key: str, value: Any) -> None:
        self.set_attributes({key: value})

    def add_event(
        self, name: str, attributes: Mapping[str, Any] | None = None, timestamp: int | None = None
    ) -> None:
        if self._end_time is None:
            if not self._events:
                self._events = []
            self._events.append(self._spans.event(name, attributes, timestamp))

    def add_link(self, context: SpanContext, attributes: Mapping[str, Any] | None = None) -> None:
        """Links are not kept: the runner's spans have none (the SDK's own span keeps them)."""

    def update_name(self, name: str) -> None:
        if self._end_time is None:
            self._name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        """The SDK's rules: an ``OK`` status is final, ``UNSET`` changes nothing."""
        if self._end_time is not None or self._status.status_code is StatusCode.OK:
            return
        if isinstance(status, StatusCode):
            status = Status(status, description)
        if status.status_code is not StatusCode.UNSET:
            self._status = status

    def record_exception(
        self,
        exception: BaseException,
        attributes: Mapping[str, Any] | None = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        """The SDK's own: an ``exception`` event (type, message, stack trace) through ``add_event``."""
        SDKSpan.record_exception(self, exception, attributes, timestamp, escaped)  # type: ignore[arg-type]

    def fail(self, error: str, description: str | None) -> None:
        """The work failed: ``error`` its ``error.type`` (set last), an error status."""
        if self._end_time is None:
            self._error = error
            self.set_status(Status(StatusCode.ERROR, description))

    def end(self, end_time: int | None = None) -> None:
        """End the span and hand it to the processor (its attributes are settled when read)."""
        if self._end_time is not None:
            log.debug("span %s ended twice; the second end is ignored", self._name)
            return
        self._end_time = end_time if end_time is not None else time_ns()
        self._spans.processor.on_end(self)
