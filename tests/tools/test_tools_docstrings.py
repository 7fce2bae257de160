"""Docstring parsing: first paragraph as description, reST and Google parameter sections."""

from __future__ import annotations

from runner.tools.docstrings import parse_docstring


def test_description_is_the_first_paragraph_joined_on_one_line() -> None:
    doc = parse_docstring(
        """Fetch the weather
        for a city.

        Longer explanation that the model does not need.
        """
    )
    assert doc.description == "Fetch the weather for a city."


def test_rest_params_with_types_and_continuation_lines() -> None:
    doc = parse_docstring(
        """Search.

        :param query: What to look
            for, in words.
        :param int limit: How many results.
        :returns: the hits
        """
    )
    assert doc.params == {"query": "What to look for, in words.", "limit": "How many results."}


def test_rest_fields_directly_after_the_summary_end_the_description() -> None:
    doc = parse_docstring("Add numbers.\n:param a: first\n:param b: second")
    assert doc.description == "Add numbers."
    assert doc.params == {"a": "first", "b": "second"}


def test_google_args_section_with_types_and_continuations() -> None:
    doc = parse_docstring(
        """Book a table.

        Args:
            name (str): Who books.
            people: How many
                guests come.
            **extra: Anything else.

        Returns:
            dict: the booking
        """
    )
    assert doc.description == "Book a table."
    assert doc.params == {"name": "Who books.", "people": "How many guests come.", "extra": "Anything else."}


def test_google_returns_section_is_not_read_as_parameters() -> None:
    doc = parse_docstring(
        """Do it.

        Returns:
            value: not a parameter
        """
    )
    assert doc.params == {}


def test_missing_docstring_gives_empty_description() -> None:
    doc = parse_docstring(None)
    assert doc.description == ""
    assert doc.params == {}
