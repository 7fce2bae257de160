"""What an operation of a template will build, checked against the budget before it runs.

Each check looks at the arguments of one operation whose result can be far larger than its inputs
(``center(10**9)``, ``'x' * n``, ``s|replace('x', s)``, ``sep.join(items)``, ``'%999999999d' % 1``,
``(1).to_bytes(n)``, ``l.extend(l)``, ...) and asks the budget for room for its result first.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sized
from typing import Any

from runner.agentfile.template_budget import Budget, TemplateLimitError, TemplateLimits, current_budget

__all__ = ["COPIES", "check_binop", "check_method", "metered_filter", "need_format_field"]


# --- estimates of what an operation will build ---------------------------------------------------

_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?[a-zA-Z%]")
_FORMAT_SPEC = re.compile(r"^(?:.?[<>=^])?[+\- ]?z?#?0?(\d*)[_,]?(?:\.(\d+))?")


def _text_len(value: Any) -> int:
    return len(value) if isinstance(value, str | bytes) else len(str(value))


def _percent_size(template: str, args: Any) -> int:
    """An upper bound of the length of ``template % args`` set by widths and precisions."""
    values = args if isinstance(args, tuple) else (args,)
    stars = [v for v in values if isinstance(v, int)]
    size = len(template) + sum(_text_len(v) for v in values if isinstance(v, str | bytes))
    for width, precision in _PERCENT_SPEC.findall(template):
        for number in (width, precision):
            if number == "*":
                size += max(stars, default=0)
            elif number:
                size += int(number)
    return size


def _replace_size(text: str | bytes, old: Any, new: Any, count: Any) -> int:
    hits = len(text) + 1 if not old else text.count(old)
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return len(text) + hits * len(new)


def _json_indent_units(value: Any, depth: int = 1) -> int:
    """How many indent units ``json.dumps(value, indent=...)`` writes."""
    if isinstance(value, dict | list | tuple) and value:
        items = value.values() if isinstance(value, dict) else value
        return sum(depth + _json_indent_units(item, depth + 1) for item in items) + depth - 1
    return 0


def _width_arg(args: tuple[Any, ...], kwargs: Mapping[str, Any], index: int, name: str, default: Any) -> Any:
    if len(args) > index:
        return args[index]
    return kwargs.get(name, default)


# --- filters -----------------------------------------------------------------------------------

Prepare = Callable[[Budget, Any, tuple[Any, ...], dict[str, Any]], Any]


def _pre_center(budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    width = _width_arg(args, kwargs, 0, "width", 80)
    if isinstance(width, int):
        budget.need_chars(max(width, _text_len(value)), f"center({width})")
    return value


def _pre_indent(budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    width = _width_arg(args, kwargs, 0, "width", 4)
    unit = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    text = str(value)
    budget.need_chars(len(text) + (text.count("\n") + 1) * max(unit, 0), "indent")
    return value


def _pre_format(budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    budget.need_chars(_percent_size(str(value), tuple(args) or tuple(kwargs.values())), "format")
    return value


def _pre_join(budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    items = list(value)
    budget.step(len(items))
    sep = _width_arg(args, kwargs, 0, "d", "")
    size = max(len(items) - 1, 0) * _text_len(sep) + sum(_text_len(item) for item in items)
    budget.need_chars(size, "join")
    return items


def _pre_replace(budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if len(args) >= 2:
        text = str(value)
        count = _width_arg(args, kwargs, 2, "count", None)
        budget.need_chars(_replace_size(text, str(args[0]), str(args[1]), count), "replace")
    return value


def _pre_wordwrap(budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    text = str(value)
    width = _width_arg(args, kwargs, 0, "width", 79)
    wrap = _width_arg(args, kwargs, 2, "wrapstring", None) or "\n"
    lines = 2 * len(text) // max(width if isinstance(width, int) else 1, 1) + text.count("\n") + 2
    budget.need_chars(len(text) + lines * _text_len(wrap), "wordwrap")
    return value


def _pre_batch(budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    size = _width_arg(args, kwargs, 0, "linecount", 1)
    if isinstance(size, int) and _width_arg(args, kwargs, 1, "fill_with", None) is not None:
        budget.need_steps(size, f"batch({size}, fill_with)")
    return value


def _pre_slice(budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    slices = _width_arg(args, kwargs, 0, "slices", 1)
    if isinstance(slices, int):
        budget.need_steps(slices, f"slice({slices})")
    return value


def _pre_sum(budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    items = list(value)
    total = cost = 0
    for item in items:  # adding lists (or strings) copies the running total each time
        if isinstance(item, Sized):
            total += len(item)
            cost += total
    budget.need_steps(cost + len(items), "sum")
    return items


def _pre_tojson(budget: Budget, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    indent = _width_arg(args, kwargs, 0, "indent", None)
    unit = len(indent) if isinstance(indent, str) else indent if isinstance(indent, int) else 0
    if unit > 0:
        budget.need_chars(_json_indent_units(value) * unit, f"tojson(indent={indent!r})")
    return value


_FILTER_CHECKS: dict[str, Prepare] = {
    "center": _pre_center,
    "indent": _pre_indent,
    "format": _pre_format,
    "join": _pre_join,
    "replace": _pre_replace,
    "wordwrap": _pre_wordwrap,
    "batch": _pre_batch,
    "slice": _pre_slice,
    "sum": _pre_sum,
    "tojson": _pre_tojson,
}


#: How many times longer than its text a filter's result can be (``&`` becomes ``&amp;``, ...).
_FILTER_GROWTH = {"e": 6, "escape": 6, "forceescape": 6, "urlize": 6, "urlencode": 3, "upper": 3, "title": 3}


#: Filters that go through a text character by character (``'x' * n|list``, ``|unique``, ...).
_FILTER_ITERATES = frozenset(
    {"list", "unique", "sort", "map", "select", "reject", "selectattr", "rejectattr", "groupby"}
    | {"batch", "slice", "min", "max", "dictsort", "sum", "random", "xmlattr", "items"}
)
#: Filters whose Python code handles a text word by word.
_FILTER_PER_WORD = frozenset({"wordwrap", "title", "urlize"})


def metered_filter(limits: TemplateLimits, func: Callable[..., Any], name: str) -> Any:
    """Filter ``name`` (``func``), counting a step, checking what it will build and charging it."""
    prepare = _FILTER_CHECKS.get(name)
    growth = _FILTER_GROWTH.get(name, 1)
    skip = 1 if getattr(func, "jinja_pass_arg", None) is not None else 0

    @functools.wraps(func)
    def metered_filter(*args: Any, **kwargs: Any) -> Any:
        budget = current_budget(limits)
        budget.step()
        if prepare is not None and len(args) > skip:
            value = prepare(budget, args[skip], args[skip + 1 :], kwargs)
            args = (*args[:skip], value, *args[skip + 1 :])
        elif len(args) > skip and isinstance(args[skip], str | bytes):
            text = args[skip]
            if name in _FILTER_ITERATES:  # one item per character, in Python
                budget.need_steps(len(text), f"{name} of a text")
            elif name in _FILTER_PER_WORD:
                budget.step(len(text) // 8)
            budget.need_chars(len(text) * growth, name)
        result = func(*args, **kwargs)
        budget.charge(result, unless=args[skip : skip + 1])
        return result

    return metered_filter


# --- methods of Python values ------------------------------------------------------------------

_PADDING = frozenset({"center", "ljust", "rjust", "zfill"})
#: How many times longer than the text the result of these methods can be (``'ß'.upper()`` is "SS").
_METHOD_GROWTH = {
    "upper": 3,
    "lower": 2,
    "title": 3,
    "capitalize": 3,
    "swapcase": 3,
    "casefold": 3,
    "encode": 4,
    "hex": 3,
}
#: Methods of containers that build a new one (the others hand back what the container holds).
COPIES = frozenset(
    {"copy", "fromkeys", "union", "intersection", "difference", "symmetric_difference", "split"}
)


_LINE_BREAKS = ("\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def _pieces(obj: str | bytes, name: str, args: tuple[Any, ...]) -> int:
    """At most how many items ``obj.split(...)`` / ``splitlines()`` makes."""
    if name == "splitlines":
        if isinstance(obj, bytes):
            return obj.count(b"\n") + obj.count(b"\r") + 1
        return sum(obj.count(mark) for mark in _LINE_BREAKS) + 1
    sep = args[0] if args else None
    if isinstance(sep, str | bytes) and sep and type(sep) is type(obj):
        return obj.count(sep) + 1  # type: ignore[arg-type]
    return len(obj) // 2 + 1


def check_method(budget: Budget, obj: Any, name: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Refuse a call of a built-in method that would build too much (the arguments, maybe listed)."""
    if isinstance(obj, str | bytes):
        if name in _METHOD_GROWTH:
            budget.need_chars(len(obj) * _METHOD_GROWTH[name], name)
        elif name in _PADDING and args and isinstance(args[0], int):
            budget.need_chars(max(args[0], len(obj)), f"{name}({args[0]})")
        elif name in ("split", "rsplit", "splitlines"):
            budget.need_steps(_pieces(obj, name, args), name)
        elif name == "expandtabs":
            size = args[0] if args and isinstance(args[0], int) else 8
            tabs = obj.count("\t") if isinstance(obj, str) else obj.count(b"\t")
            budget.need_chars(len(obj) + tabs * size, name)
        elif name == "replace" and len(args) >= 2:
            count = args[2] if len(args) > 2 else -1
            budget.need_chars(_replace_size(obj, args[0], args[1], count), "replace")
        elif name == "join" and args:
            items = list(args[0])
            budget.step(len(items))
            size = max(len(items) - 1, 0) * len(obj) + sum(_text_len(i) for i in items)
            budget.need_chars(size, "join")
            return (items, *args[1:])
        elif name == "translate" and args and isinstance(args[0], dict):
            longest = max((_text_len(v) for v in args[0].values() if v is not None), default=1)
            budget.need_chars(len(obj) * max(longest, 1), "translate")
    elif isinstance(obj, int) and name == "to_bytes":
        length = args[0] if args and isinstance(args[0], int) else 1
        budget.need_chars(length, f"to_bytes({length})")
    elif isinstance(obj, list) and name == "extend" and args:
        extra = args[0] if isinstance(args[0], Sized) else list(args[0])
        budget.step(len(extra))
        return (extra, *args[1:])
    elif isinstance(obj, dict | set) and name == "update" and args:
        budget.step(sum(len(a) for a in args if isinstance(a, Sized)))
    return args


def check_binop(budget: Budget, name: str, left: Any, right: Any) -> None:
    """Refuse ``left <name> right`` when its result would be over a limit."""
    limits = budget.limits
    if name == "*":
        for seq, count in ((left, right), (right, left)):
            if isinstance(count, int) and isinstance(seq, str | bytes):
                budget.need_chars(len(seq) * max(count, 0), f"a string times {count}")
            elif isinstance(count, int) and isinstance(seq, list | tuple):
                budget.need_steps(len(seq) * max(count, 0), f"a list times {count}")
        if _ints(left, right) and left.bit_length() + right.bit_length() > limits.int_bits:
            raise TemplateLimitError(
                f"the product would have more than {limits.int_bits:,} bits", limit="int_bits"
            )
    elif name == "**" and _ints(left, right) and right > 0 and abs(left) > 1:
        if (abs(left).bit_length() - 1) * right > limits.int_bits:
            raise TemplateLimitError(
                f"{left} ** {right} would have more than {limits.int_bits:,} bits", limit="int_bits"
            )
    elif name == "+":
        if isinstance(left, str | bytes) and isinstance(right, str | bytes):
            budget.need_chars(len(left) + len(right), "+")
        elif isinstance(left, list | tuple) and isinstance(right, list | tuple):
            budget.need_steps(len(left) + len(right), "+")
    elif name == "%" and isinstance(left, str | bytes):
        text = left.decode("latin-1") if isinstance(left, bytes) else left
        budget.need_chars(_percent_size(text, right), "%")


def _ints(left: Any, right: Any) -> bool:
    return isinstance(left, int) and isinstance(right, int)


def need_format_field(budget: Budget, format_spec: str) -> None:
    """Refuse a ``str.format`` field whose width or precision is over the budget."""
    match = _FORMAT_SPEC.match(format_spec)
    if match:
        size = max(int(match.group(1) or 0), int(match.group(2) or 0))
        budget.need_chars(size, f"a format field of width {size}")
