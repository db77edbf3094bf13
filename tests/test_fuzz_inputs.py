"""Presets, settings, environment values and state files, fuzzed: zero tracebacks, zero
hangs. Each is a clear one-line error (``StenographError``), or opens, with a recorded
reset for state."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import talk, text_reply
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stenograph
from stenograph.engine.events import HandlerFailed
from stenograph.replay import replay, session_id_for

FUZZ = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
HANDLERS = ("inactivity-memorize", "update-threshold", "forked-extraction", "memory-compact")
ALL_FOUR = Path(__file__).parent / "presets" / "all-four.toml"
ENGINE = stenograph.Engine.from_preset(
    ALL_FOUR, overrides={"forked-extraction": {"backend": "offline"}}
)
FIELDS = {slot.name: sorted(type(slot.settings.values).model_fields) for slot in ENGINE.slots}
ALL_FIELDS = sorted({f for names in FIELDS.values() for f in names})
SPECIAL_PATHS = ["/dev/zero", "/dev/urandom", "/dev/null", "/", "/proc/self/mem", "FIFO"]


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    """A hang fails the test (SIGALRM after 60 s) instead of stalling the suite."""

    def hung(*_args):
        raise AssertionError("hung: an input read or parsed without end")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def fifo(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("fifo") / "pipe"
    os.mkfifo(path)
    return str(path)


def one_line(exc: BaseException) -> None:
    """A clear error: ours, with a message (a PresetError may list one line per field)."""
    assert isinstance(exc, stenograph.StenographError), repr(exc)
    assert str(exc).strip() and "Traceback" not in str(exc)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(SPECIAL_PATHS),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def _toml(value, fifo: str) -> str:
    if value is None:
        return '""'
    if value == "FIFO":
        value = fifo
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(str(value), repr(value))
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v, fifo) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{json.dumps(k)} = {_toml(v, fifo)}" for k, v in value.items()) + "}"
        )
    if isinstance(value, str):
        return json.dumps(value)
    return str(value)


@FUZZ
@given(
    slots=st.lists(
        st.tuples(
            st.sampled_from(HANDLERS),
            st.dictionaries(st.sampled_from(ALL_FIELDS), values, max_size=4),
        ),
        max_size=4,
    ),
    depth=st.sampled_from([0, 0, 0, 50, 500, 5000]),
)
def test_fuzzed_presets(tmp_path, fifo, slots, depth):
    from pydantic.alias_generators import to_camel

    text = "".join(
        f'[[handlers]]\nuse = "{name}"\n'
        + "".join(f"{to_camel(k)} = {_toml(v, fifo)}\n" for k, v in fields.items())
        for name, fields in slots
    )
    if depth:
        text += "deep = " + "[" * depth + "]" * depth + "\n"
    path = tmp_path / "fuzz.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        stenograph.Engine.from_preset(path)
    except Exception as exc:  # noqa: BLE001 - the property: only our errors
        one_line(exc)


@FUZZ
@given(handler=st.sampled_from(HANDLERS), data=st.data())
def test_fuzzed_overrides(fifo, handler, data):
    fields = data.draw(st.dictionaries(st.sampled_from(FIELDS[handler]), values, max_size=3))
    fields = {k: (fifo if v == "FIFO" else v) for k, v in fields.items()}
    try:
        stenograph.Engine.from_preset(ALL_FOUR, overrides={handler: fields})
    except Exception as exc:  # noqa: BLE001
        one_line(exc)


env_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30
) | st.sampled_from(["", " ", "[", "{}", "null", "nan", "1e999", '["Read"]', *SPECIAL_PATHS])


@FUZZ
@given(handler=st.sampled_from(HANDLERS), data=st.data())
def test_fuzzed_environment_values(monkeypatch, fifo, handler, data):
    name = data.draw(st.sampled_from(FIELDS[handler]))
    value = data.draw(env_text)
    variable = "STENOGRAPH_" + handler.upper().replace("-", "_") + "__" + name.upper()
    with monkeypatch.context() as patch:
        patch.setenv(variable, fifo if value == "FIFO" else value)
        try:
            stenograph.Engine.from_preset(ALL_FOUR)
        except Exception as exc:  # noqa: BLE001
            one_line(exc)
            assert variable in str(exc)


def test_the_issue_examples_are_one_line_errors(tmp_path, fifo, monkeypatch):
    for path in ("/dev/zero", "/dev/urandom", fifo):
        for key in ("templatePath", "promptPath"):
            with pytest.raises(stenograph.PresetError, match="not a regular file"):
                stenograph.Engine.from_preset(
                    "default", overrides={"forked-extraction": {key: path}}
                )
    deep = tmp_path / "deep.toml"
    deep.write_text("x = " + "[" * 500 + "]" * 500 + "\n")
    with pytest.raises(stenograph.PresetError, match="nested too deeply"):
        stenograph.Engine.from_preset(deep)
    for value in ("", "Read,Write"):
        monkeypatch.setenv("STENOGRAPH_INACTIVITY_MEMORIZE__EXCLUDE_TOOLS", value)
        with pytest.raises(stenograph.PresetError, match="must be JSON"):
            stenograph.Engine.from_preset("default")


@pytest.mark.parametrize("name", ["my..session.jsonl", "x" * 194 + ".jsonl", "...jsonl"])
def test_any_replay_file_name_gives_a_session(tmp_path, name):
    source = Path(__file__).parent.parent / "examples" / "demo-session.jsonl"
    path = tmp_path / name
    path.write_bytes(source.read_bytes()[:20_000].rsplit(b"\n", 1)[0] + b"\n")
    assert len(session_id_for(path)) <= 200
    with contextlib.suppress(stenograph.StenographError):
        replay(path, "inactivity-only", state_dir=tmp_path / "state")


state_keys = st.sampled_from(
    ["handlers", "seen", "notes", "window", "journalBytes", "version", "initialized", "x"]
)
handler_keys = st.sampled_from(
    ["update-threshold", "memory-compact", "inactivity-memorize", "forked-extraction", "other"]
)
handler_fields = st.sampled_from(
    ["initialized", "tokensAtLastExtraction", "lastExtractedUuid", "resumed", "overhead", "z"]
)
handler_state = st.one_of(values, st.dictionaries(handler_fields, values, max_size=3))
states = st.one_of(
    values,
    st.dictionaries(
        state_keys,
        st.one_of(values, st.dictionaries(handler_keys, handler_state, max_size=3)),
        max_size=5,
    ),
)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("saved")
    session = ENGINE.open_session("s", state_dir=root)
    talk(session, 3, 2500)
    session.close()
    return root / "s"


@FUZZ
@given(state=states, raw=st.one_of(st.none(), st.binary(max_size=40)))
def test_fuzzed_state_files_open_and_work(tmp_path, saved, state, raw):
    folder = tmp_path / "s"
    folder.mkdir(exist_ok=True)
    (folder / "journal.jsonl").write_bytes((saved / "journal.jsonl").read_bytes())
    data = raw if raw is not None else json.dumps(state, allow_nan=True).encode()
    (folder / "state.json").write_bytes(data)
    session = ENGINE.open_session("s", state_dir=tmp_path)
    session.append({"role": "user", "content": "next"})
    session.pre_call(model="m")
    session.post_sampling(text_reply("ok"))
    session.append({"role": "user", "content": "more"})
    session.pre_call(model="m")
    assert not [e for e in session.events if isinstance(e, HandlerFailed)], session.events
    session.close()
    for leftover in folder.glob("state.json.bad-*"):
        leftover.unlink()


@pytest.mark.parametrize(
    "name",
    [
        "STENOGRAPH_FORKED_EXTRACTION__PROMPT_PATH",
        "STENOGRAPH_FORKED_EXTRACTION__TEMPLATE_PATH",
        "STENOGRAPH_FORKED_EXTRACTION__MEMORY_PATH",
        "STENOGRAPH_MEMORY_COMPACT__RESUME_NOTES_PATH",
    ],
)
def test_a_home_of_an_unknown_user_is_a_one_line_error(monkeypatch, name):
    monkeypatch.setenv(name, "~0/notes.md")
    with pytest.raises(stenograph.PresetError, match="no user named '0'") as caught:
        stenograph.Engine.from_preset(ALL_FOUR)
    one_line(caught.value)
    assert name in str(caught.value)
