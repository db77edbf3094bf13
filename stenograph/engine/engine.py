"""The Engine: a preset's handlers, one plugin manager, and dispatch in preset order."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy
from pluggy import HookImpl
from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from . import hookspecs
from .clock import Clock
from .discovery import HandlerCatalog
from .errors import HandlerError, PluginError, PresetError
from .events import Event, HandlerFailed
from .handler import Handler
from .hooks import check_hook
from .presets import Preset, SlotSpec, load_preset
from .session import CALL_SECONDS, LEASE_SECONDS, MAX_EVENTS, WAIT_SECONDS, Session
from .settings import ResolvedSettings, SettingsResolver, env_prefix, env_warnings
from .state import HandlerState, StateKey
from .telemetry import Telemetry

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from ..stores.base import Store

log = logging.getLogger("stenograph.engine")
ORDER_MARKERS = ("tryfirst", "trylast", "wrapper", "hookwrapper")
PHASE_ARGUMENTS = ("session", "call", "state")  # what phase hooks usually take


@dataclass(frozen=True)
class Slot:
    """One handler instance at one position of the preset."""

    index: int
    name: str
    state_key: str
    handler: Handler
    settings: ResolvedSettings
    impls: dict[str, HookImpl]
    typed_state: StateKey[HandlerState] = field(default_factory=StateKey)


class Engine:
    """Built from a preset; opens sessions. Nothing is half-applied: a bad preset raises
    before any Engine exists."""

    #: Spans and events for a tracing backend, set on one engine or on the class (every
    #: engine) by ``stenograph.integrations.otel``; None: off.
    telemetry: Telemetry | None = None

    def __init__(
        self,
        preset: Preset,
        overrides: dict[Any, dict[str, Any]] | None = None,
        handlers: Iterable[type[Handler]] = (),
        services: dict[str, Any] | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.preset = preset
        self.services: dict[str, Any] = dict(services or {})
        self.executor = executor
        self.strict = preset.strict
        self.pm = self.plugin_manager()
        self.catalog = HandlerCatalog()
        for handler in handlers:
            self.catalog.add_handler(handler)
        overrides = dict(overrides or {})
        self._check_override_targets(overrides)
        self.slots = self._build_slots(overrides)
        models = {slot.name: type(slot.settings.values) for slot in self.slots}
        self.warnings = env_warnings(self.catalog.names(), models)
        for warning in self.warnings:
            log.warning("%s", warning)
        self._hooked = {
            hook: tuple((slot, slot.impls[hook]) for slot in self.slots if hook in slot.impls)
            for hook in hookspecs.SLOT_HOOKS
        }
        self._firstresult = frozenset(
            hook
            for hook in hookspecs.SLOT_HOOKS
            if getattr(self.pm.hook, hook).spec.opts.get("firstresult")
        )
        self.blocking_hooks = frozenset(
            hook for hook, plan in self._hooked.items() if any(s.handler.blocking for s, _ in plan)
        )

    @staticmethod
    def plugin_manager() -> pluggy.PluginManager:
        """A new plugin manager that knows stenograph's hookspecs."""
        pm = pluggy.PluginManager(hookspecs.PROJECT)
        pm.add_hookspecs(hookspecs)
        return pm

    @classmethod
    def from_preset(
        cls,
        preset: str | Path,
        overrides: dict[Any, dict[str, Any]] | None = None,
        handlers: Iterable[type[Handler]] = (),
        services: dict[str, Any] | None = None,
        executor: Executor | None = None,
    ) -> Engine:
        """A built-in preset name or a path to a ``.toml`` file. ``overrides`` maps a handler
        name (every slot of it) or a slot index to settings that beat every other layer;
        ``handlers`` adds handler classes defined in the host application; ``services``
        hands objects to handlers (``{"anthropic": client}`` for forked-extraction);
        ``executor`` (a ``concurrent.futures.Executor``: a process pool, Dask's
        ``Client.get_executor(pure=False)``) runs the notes jobs, which then need a
        session store (default: the shared background threads)."""
        return cls(load_preset(preset), overrides, handlers, services, executor)

    def open_session(
        self,
        session_id: str,
        state_dir: str | Path | None = ".stenograph",
        clock: Clock | None = None,
        services: dict[str, Any] | None = None,
        on_event: Callable[[Event], None] | None = None,
        *,
        store: str | Path | Store | None = None,
        lease_seconds: float = LEASE_SECONDS,
        wait_seconds: float = WAIT_SECONDS,
        max_events: int | None = MAX_EVENTS,
        call_seconds: float = CALL_SECONDS,
    ) -> Session:
        """Open (or reopen, with its saved history and state) the session ``session_id``.
        ``store`` is a store URL (``file:DIR``, ``sqlite:///path.db``, ``postgresql://…``,
        ``redis://…``) or a :class:`~stenograph.stores.Store`; without one, ``state_dir``
        names the folder store (``None`` keeps everything in memory). A call holds the
        session's lease for up to ``lease_seconds``, renewed during a model call of up to
        ``call_seconds``; another worker waits up to ``wait_seconds`` for it, then gets
        ``SessionBusy``. ``services`` add to the engine's; ``on_event`` is called with every
        event as it is recorded (on the thread that records it); ``session.events`` keeps
        the newest ``max_events`` of them (``None``: every one)."""
        return Session(
            self,
            session_id,
            state_dir=state_dir,
            clock=clock,
            services=services,
            on_event=on_event,
            store=store,
            lease_seconds=lease_seconds,
            wait_seconds=wait_seconds,
            max_events=max_events,
            call_seconds=call_seconds,
        )

    def implements(self, hook_name: str) -> bool:
        """Whether a slot implements ``hook_name`` (``extraction_requested``: an extractor)."""
        return bool(self._hooked[hook_name])

    def slot(self, name: str) -> Slot:
        """The first slot running the handler ``name``."""
        for slot in self.slots:
            if slot.name == name:
                return slot
        raise KeyError(name)

    # building --------------------------------------------------------------------------

    def _check_override_targets(self, overrides: dict[Any, dict[str, Any]]) -> None:
        names = {s.handler for s in self.preset.slots}
        for target in overrides:
            if isinstance(target, int) and 0 <= target < len(self.preset.slots):
                continue
            if target not in names:
                raise PresetError(
                    f"overrides name {target!r}, which is not a handler or slot index of preset"
                    f" {self.preset.label} (handlers: {', '.join(sorted(names)) or 'none'})."
                )

    def _build_slots(self, overrides: dict[Any, dict[str, Any]]) -> tuple[Slot, ...]:
        specs = [
            (i, spec, self.catalog.get(spec.handler, spec.where))
            for i, spec in enumerate(self.preset.slots)
        ]
        seen: dict[str, int] = {}
        slots = []
        for i, spec, handler_cls in specs:
            settings = self._resolve(i, spec, handler_cls, overrides)
            seen[spec.handler] = seen.get(spec.handler, 0) + 1
            key = (
                spec.handler if seen[spec.handler] == 1 else f"{spec.handler}#{seen[spec.handler]}"
            )
            handler = handler_cls(settings.values, slot=i)
            slots.append(
                Slot(i, spec.handler, key, handler, settings, self._register(i, spec, handler))
            )
        return tuple(slots)

    def _resolve(
        self, i: int, spec: SlotSpec, handler_cls: type[Handler], overrides: dict[Any, Any]
    ) -> ResolvedSettings:
        resolver = SettingsResolver(spec.handler, handler_cls.Settings, spec.where)
        layers: list[tuple[str, dict[str, Any]]] = []
        for where, values in spec.layers:  # parent first; each normalised as it is read
            layer = SettingsResolver(spec.handler, handler_cls.Settings, where)
            layers.append((f"preset {where}", layer.normalise(values)))
        for name, value in resolver.env_values().items():
            layers.append((f"env {env_prefix(spec.handler)}{name.upper()}", {name: value}))
        code: dict[str, Any] = {}
        for target in (spec.handler, i):
            value = overrides.get(target, {})
            if not isinstance(value, dict):
                raise PresetError(f"overrides[{target!r}] must be a dict of settings.")
            code.update(
                SettingsResolver(spec.handler, handler_cls.Settings, "overrides").normalise(value)
            )
        layers.append(("overrides", code))
        return resolver.resolve(layers)

    def _register(self, i: int, spec: SlotSpec, handler: Handler) -> dict[str, HookImpl]:
        name = f"{i}:{spec.handler}"
        try:
            self.pm.register(handler, name=name)
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(
                f"handler '{spec.handler}' ({spec.where}) is invalid: {exc}"
            ) from None
        impls = {}
        for hook_name in hookspecs.SLOT_HOOKS:
            for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
                if impl.plugin_name == name:
                    self._check_markers(spec, hook_name, impl)
                    impls[hook_name] = impl
        return impls

    @staticmethod
    def _check_markers(spec: SlotSpec, hook_name: str, impl: HookImpl) -> None:
        for marker in ORDER_MARKERS:
            if getattr(impl, marker, False):
                raise PluginError(
                    f"handler '{spec.handler}' ({spec.where}) marks {hook_name} with {marker};"
                    " stenograph runs handlers in the order the preset lists them, so ordering"
                    " markers are not allowed. Reorder the preset instead."
                )

    # dispatch --------------------------------------------------------------------------

    def dispatch(self, hook_name: str, session: Session, call: Any = None) -> None:
        """Run the phase or lifecycle hook ``hook_name`` for every slot in preset order;
        failures are isolated."""
        values = {"call": call}
        for slot, impl in self._hooked[hook_name]:
            if call is not None:
                call.handler, call.slot = slot.name, slot.index
            self._run(slot, impl, hook_name, session, values)

    def call_hook(self, hook_name: str, session: Session, **arguments: Any) -> Any:
        """Call ``hook_name`` on every slot in preset order with ``arguments`` (plus
        ``session`` and each slot's ``state``), failures isolated. A ``firstresult`` hook
        returns the first result that is not None (None when there is none); any other
        returns the list of results that are not None."""
        if hook_name not in self._hooked:
            check_hook(hook_name)  # raises: every hook is planned
        first = hook_name in self._firstresult
        results = []
        for slot, impl in self._hooked[hook_name]:
            result = self._run(slot, impl, hook_name, session, arguments)
            if result is not None:
                if first:
                    return result
                results.append(result)
        return None if first else results

    def _run(
        self, slot: Slot, impl: HookImpl, hook_name: str, session: Session, values: dict[str, Any]
    ) -> Any:
        if impl.argnames == PHASE_ARGUMENTS:  # a phase hook's usual arguments, in order
            typed = slot.handler.State is not None  # slot_state, inline: on every phase call
            state = session.stash[slot.typed_state] if typed else self.slot_state(session, slot)
            args = [session, values["call"], state]
        else:
            args = [
                session
                if arg == "session"
                else values[arg]
                if arg in values
                else self.slot_state(session, slot)
                for arg in impl.argnames
            ]
        try:
            return impl.function(*args)
        except Exception as exc:
            self._failed(session, slot, hook_name, exc)
            return None

    def slot_state(self, session: Session, slot: Slot) -> HandlerState | dict[str, Any]:
        """What a slot's hooks get as ``state``: its ``State`` model, else the plain dict."""
        if slot.handler.State is None:
            return session.handler_state(slot.state_key)
        return session.stash[slot.typed_state]

    def bind_states(self, session: Session) -> None:
        """Validate each slot's loaded state against its ``State`` model; a field of the
        wrong type is reported (file, handler, field) and falls back to its default."""
        for slot in self.slots:
            model = slot.handler.State
            if model is None:
                continue
            backing = session.handler_state(slot.state_key)
            try:
                state = model.bind(backing)
            except ValidationError as exc:
                for error in exc.errors():
                    key = str(error["loc"][0]) if error["loc"] else ""
                    session.state_reset(
                        f"handlers.{slot.state_key}.{to_camel(key)}",
                        f"handler '{slot.name}', field '{to_camel(key)}': {error['msg']};"
                        f" got {error.get('input')!r}",
                    )
                    backing.pop(key, None)
                state = model.bind(backing)
            session.stash[slot.typed_state] = state

    def _failed(self, session: Session, slot: Slot, hook_name: str, exc: Exception) -> None:
        log.error(
            "handler '%s' (slot %d) failed in %s", slot.name, slot.index, hook_name, exc_info=exc
        )
        session.record(
            HandlerFailed(
                time=session.clock(),
                handler=slot.name,
                slot=slot.index,
                phase=hook_name,
                error=f"{type(exc).__name__}: {exc}",
            )
        )
        if self.strict:
            raise HandlerError(slot.name, slot.index, hook_name, exc) from exc
