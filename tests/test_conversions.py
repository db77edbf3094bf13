"""``integrations.framework.Conversions``: what a framework adapter converted of each message
of the list it passes whole on every call is kept while the message is unchanged."""

from __future__ import annotations

from typing import Any

from stenograph.integrations.framework import Conversions


class Message:
    """A framework message: its fields in ``__dict__``, given new values by assignment."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


class Unsortable:
    """A field value whose comparison fails, as a numpy array's does."""

    def __eq__(self, other: object) -> bool:
        raise ValueError("the truth value of an array is ambiguous")

    __hash__ = None  # type: ignore[assignment]


def converter() -> tuple[Conversions[str], list[str]]:
    made: list[str] = []

    def convert(message: Message) -> str:
        made.append(message.text)
        return f"<{message.text}>"

    return Conversions(convert, lambda m: tuple(m.__dict__.values())), made


def test_a_message_is_converted_once_while_its_fields_keep_their_values():
    convert, made = converter()
    first, second = Message(text="a"), Message(text="b")
    assert convert([first]) == ["<a>"]
    assert convert([first, second]) == ["<a>", "<b>"]
    assert convert([first, second]) == ["<a>", "<b>"]
    assert made == ["a", "b"]


def test_a_field_given_a_new_value_converts_the_message_again():
    convert, made = converter()
    message = Message(text="a", extra=[1])
    convert([message])
    message.text = "b"
    assert convert([message]) == ["<b>"]
    message.extra = [1]  # a new object, equal to the old one: the same conversion
    assert convert([message]) == ["<b>"]
    message.extra = [2]
    assert convert([message]) == ["<b>"]
    assert made == ["a", "b", "b"]


def test_a_field_that_cannot_be_compared_counts_as_changed():
    convert, made = converter()
    message = Message(text="a", artifact=Unsortable())
    convert([message])
    message.artifact = Unsortable()
    assert convert([message]) == ["<a>"]
    assert made == ["a", "a"]


def test_without_parts_a_message_is_kept_while_it_is_the_same_object():
    made: list[str] = []
    convert = Conversions(lambda m: made.append(m["text"]) or m["text"])
    message = {"text": "a"}
    convert([message])
    convert([message, {"text": "a"}])
    assert made == ["a", "a"]
