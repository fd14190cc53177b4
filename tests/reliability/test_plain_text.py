"""The shared input text type: C0 control characters (NUL above all) and lone surrogates are refused."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from contracts.text import PlainText


class Body(BaseModel):
    text: PlainText
    texts: list[PlainText] = []


def test_tab_and_line_breaks_are_kept() -> None:
    assert Body(text="line one\n\tline two\r\n").text == "line one\n\tline two\r\n"
    assert Body(text="é ü — 中文 🙂 \x7f").text == "é ü — 中文 🙂 \x7f"


@pytest.mark.parametrize("bad", ["a\x00b", "\x01", "x\x1b[31m", "\x1f", "\x0b", "\x0c", "a\ud800b"])
def test_control_characters_and_lone_surrogates_are_refused(bad: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Body(text=bad)
    assert "control character" in str(caught.value) or "surrogate" in str(caught.value)
    with pytest.raises(ValidationError):
        Body(text="ok", texts=["fine", bad])


def test_json_input_is_checked_too() -> None:
    with pytest.raises(ValidationError):
        Body.model_validate_json('{"text": "a\\u0000b"}')
