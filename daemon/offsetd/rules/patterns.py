"""Name and message patterns, compiled for the hot path: globs, regexes, plain text.

Globs and regexes of one condition are joined into one alternation (`NameMatcher`, `any_regex`);
plain-text message patterns (no regex syntax; the common case) are substring tests, many times
faster than `re` on a 4 KiB trace head, and a real regex runs only on texts that hold one of
its required literals. `LastValue` remembers a function of the last value it saw, so the rules
of one event share one lower-casing of the same text.
"""

from __future__ import annotations

import fnmatch
import re
import re._constants as _sre_constants  # type: ignore[import-not-found]  # no stubs
import re._parser as _sre_parser  # type: ignore[import-not-found]  # no stubs
from collections.abc import Callable, Sequence
from typing import Any, Literal

from offsetd.rules.fields import RegexPattern
from offsetd.saferegex import RegexRefused, compile_regex

__all__ = ["LastValue", "NameMatcher", "any_regex", "substrings_only"]

_GLOB_CHARS = frozenset("*?[")
_CACHE_LIMIT = 4096  # names and classes: short strings


_GLOBAL_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")


def _scoped(regex: str) -> str:
    """`(?i)abc` -> `(?i:abc)`: leading global flags made local, so regexes can be joined."""
    found = _GLOBAL_FLAGS.match(regex)
    if found is None:
        return f"(?:{regex})"
    return f"(?{found.group(1)}:{regex[found.end() :]})"


_REGEX_SYNTAX = frozenset(".^$*+?{}[]\\|()")
_IGNORE_CASE = "(?i)"


class LastValue:
    """A one-slot memo of a function of one value, by identity. Every rule of one event works
    on the same strings and error, so this computes once per event. The slot holds the value
    (so its identity stays unique) and is replaced atomically (one tuple)."""

    __slots__ = ("_function", "_slot")

    def __init__(self, function: Callable[[Any], Any]) -> None:
        self._function = function
        self._slot: tuple[Any, Any] = (object(), None)

    def __call__(self, value: Any) -> Any:
        slot = self._slot
        if slot[0] is value:
            return slot[1]
        result = self._function(value)
        self._slot = (value, result)
        return result


_lowered: Callable[[str], str] = LastValue(str.lower)


def substrings_only(patterns: Sequence[str]) -> bool:
    return all(_REGEX_SYNTAX.isdisjoint(p.removeprefix(_IGNORE_CASE)) for p in patterns)


def any_regex(
    patterns: Sequence[str], how: Literal["search", "fullmatch"]
) -> Callable[[str], bool]:
    """Whether any of the regexes matches, compiled into one alternation when possible (RE2:
    linear in the text, whatever the rule's author wrote; `offsetd.saferegex`).

    Searches for plain text (no regex syntax; the common case for messages), optionally after
    `(?i)`, are substring tests, many times faster than `re` on a 4 KiB trace head.
    """
    if how == "search":
        plain: list[str] = []
        folded: list[str] = []
        regexes: list[str] = []
        for pattern in patterns:
            body = pattern.removeprefix(_IGNORE_CASE)
            if not _REGEX_SYNTAX.isdisjoint(body):
                regexes.append(pattern)
            elif pattern.startswith(_IGNORE_CASE):
                folded.append(body.lower())  # (?i)text: compared lower-cased
            else:
                plain.append(body)
        if not regexes:
            return _substrings(tuple(plain), tuple(folded))
    try:
        joined = compile_regex("|".join(_scoped(p) for p in patterns))
    except RegexRefused:  # flags that cannot be scoped: compile each on its own
        compiled = [getattr(compile_regex(p), how) for p in patterns]
        return lambda value: any(match(value) is not None for match in compiled)
    match = getattr(joined, how)
    required = _required_literals(patterns) if how == "search" else None
    if required is None:
        return lambda value: match(value) is not None
    plain, folded = required

    def search(value: str) -> bool:
        # A regex can only match a text that contains one of its required literals: substring
        # tests (memchr-fast) spare the regex engine most 4 KiB trace heads.
        if any(literal in value for literal in plain):
            return match(value) is not None
        if folded:
            if not value.isascii():  # Unicode case folding: no shortcut
                return match(value) is not None
            lowered = _lowered(value)
            if any(literal in lowered for literal in folded):
                return match(value) is not None
        return False

    return search


_MIN_LITERAL = 3


def _required_literals(patterns: Sequence[str]) -> tuple[list[str], list[str]] | None:
    """Literals of which every match of any of `patterns` contains at least one.

    (case-sensitive ones, lower-cased ASCII ones for `(?i)` patterns), or None when some
    pattern has none of at least three characters (then the regex always runs).

    Patterns are read with Python's parser, which knows RE2's syntax but for POSIX classes:
    it would read `[[:digit:]]abc` as a class and the literal `]abc`, so those get no prefilter.
    """
    plain: list[str] = []
    folded: list[str] = []
    for pattern in patterns:
        if "[:" in pattern:
            return None
        try:
            parsed = _sre_parser.parse(pattern)
        except (re.error, RecursionError):
            return None
        flags = parsed.state.flags
        if flags & (re.VERBOSE | re.LOCALE):
            return None
        literals = _literals_of(list(parsed))
        if literals is None:
            return None
        if flags & re.IGNORECASE:
            if not all(lit.isascii() for lit in literals):
                return None
            folded.extend(lit.lower() for lit in literals)
        else:
            plain.extend(literals)
    return plain, folded


def _literals_of(items: list[Any]) -> list[str] | None:
    """One required literal of a parsed sequence, or one per branch of a lone alternation."""
    if len(items) == 1:
        op, arg = items[0]
        if op is _sre_constants.BRANCH:
            found: list[str] = []
            for branch in arg[1]:
                literals = _literals_of(list(branch))
                if literals is None:
                    return None
                found.extend(literals)
            return found
        if op is _sre_constants.SUBPATTERN and not arg[1] and not arg[2]:  # no inline flags
            return _literals_of(list(arg[3]))
    best, run = "", []
    for op, arg in items:
        if op is _sre_constants.LITERAL:
            run.append(chr(arg))
            continue
        if len(run) > len(best):
            best = "".join(run)
        run = []
    if len(run) > len(best):
        best = "".join(run)
    return [best] if len(best) >= _MIN_LITERAL else None


def _substrings(plain: tuple[str, ...], folded: tuple[str, ...]) -> Callable[[str], bool]:
    if len(plain) == 1 and not folded:
        literal = plain[0]
        return lambda value: literal in value
    if len(folded) == 1 and not plain:
        literal = folded[0]
        return lambda value: literal in _lowered(value)

    def found(value: str) -> bool:
        if any(literal in value for literal in plain):
            return True
        if folded:
            lowered = _lowered(value)
            return any(literal in lowered for literal in folded)
        return False

    return found


class NameMatcher:
    """Literal names as a set lookup, globs as one `re` fullmatch (fnmatch builds them from
    parts that cannot backtrack badly), regexes as one RE2 fullmatch."""

    __slots__ = ("_fullmatch", "_literals", "cache", "text")

    def __init__(self, patterns: Sequence[str | RegexPattern]) -> None:
        literals: set[str] = set()
        globs: list[str] = []
        regexes: list[str] = []
        shown: list[str] = []
        for pattern in patterns:
            if isinstance(pattern, RegexPattern):
                regexes.append(pattern.regex)
                shown.append(f"regex {pattern.regex!r}")
            else:
                shown.append(repr(pattern))
                if _GLOB_CHARS.isdisjoint(pattern):
                    literals.add(pattern)
                else:
                    globs.append(fnmatch.translate(pattern))
        self._literals = frozenset(literals)
        matchers: list[Callable[[str], bool]] = []
        if globs:
            glob_match = re.compile("|".join(globs)).fullmatch
            matchers.append(lambda value: glob_match(value) is not None)
        if regexes:
            matchers.append(any_regex(regexes, "fullmatch"))
        self._fullmatch: Callable[[str], bool] | None = (
            None
            if not matchers
            else matchers[0]
            if len(matchers) == 1
            else lambda value: any(match(value) for match in matchers)
        )
        # value -> result; predicates look here first, inline (the same names repeat)
        self.cache: dict[str, bool] = {}
        self.text = " or ".join(shown)

    def __call__(self, value: str | None) -> bool:
        if value is None:
            return False
        hit = self.cache.get(value)
        if hit is None:
            hit = value in self._literals or (
                self._fullmatch is not None and self._fullmatch(value)
            )
            if len(self.cache) >= _CACHE_LIMIT:
                self.cache.clear()  # the same dict: predicates keep their bound `get`
            self.cache[value] = hit
        return hit
