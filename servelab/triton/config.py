"""Model configs as ``ModelConfig`` protobufs, never edited with regexes.

A lab experiment changes ``instance_group`` or ``dynamic_batching``: read the
config.pbtxt into tritonclient's ``model_config_pb2.ModelConfig``, change the
fields, write it back showing a unified diff, and reload the model through
Triton's load API with the config as JSON — live in seconds, no restart, no
image rebuild. Bad configs are refused with a clear message while the old one
keeps serving (Triton keeps the loaded version when a reload fails).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeAlias

from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2 as mc

from servelab.core.notices import SaidPlainly

# model_config_pb2 is protobuf-generated without type stubs (classes built at import): to mypy a
# ModelConfig is Any, so its fields are not checked; the alias keeps it usable as an annotation.
ModelConfig: TypeAlias = mc.ModelConfig
KINDS = {"KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL"}
CONFIG_NAME = "config.pbtxt"


class ConfigError(SaidPlainly, ValueError):
    """A config that must not reach the server; the message says what is wrong."""


def parse_config(text: str) -> ModelConfig:
    """config.pbtxt text → ModelConfig; unknown fields are an error naming the field."""
    cfg = ModelConfig()
    try:
        text_format.Parse(text, cfg)
    except text_format.ParseError as exc:
        raise ConfigError(f"invalid config.pbtxt: {exc}") from None
    return cfg


def read_config(model_dir: Path) -> ModelConfig:
    """The ModelConfig in ``model_dir/config.pbtxt``."""
    path = Path(model_dir) / CONFIG_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no {CONFIG_NAME} in {model_dir}")
    return parse_config(path.read_text())


def config_text(cfg: ModelConfig) -> str:
    return text_format.MessageToString(cfg)


def config_json(cfg: ModelConfig) -> str:
    """JSON as Triton's load API takes it (field names as in config.pbtxt)."""
    return json_format.MessageToJson(cfg, preserving_proto_field_name=True)


def config_dict(cfg: ModelConfig) -> dict[str, Any]:
    return json_format.MessageToDict(cfg, preserving_proto_field_name=True)


def from_dict(data: dict[str, Any]) -> ModelConfig:
    """A config as the server returns it (``get_model_config``) → ModelConfig."""
    cfg = ModelConfig()
    json_format.ParseDict(data, cfg, ignore_unknown_fields=True)
    return cfg


def _kind(kind: str | int) -> int:
    if isinstance(kind, int):
        return kind
    name = kind.upper() if kind.upper().startswith("KIND_") else f"KIND_{kind.upper()}"
    if name not in KINDS:
        raise ConfigError(f"unknown instance kind {kind!r}: use one of {', '.join(sorted(KINDS))}")
    return mc.ModelInstanceGroup.Kind.Value(name)


def set_instance_groups(cfg: ModelConfig,
                        groups: Iterable[tuple[int, str] | tuple[int, str, Sequence[int]]]) -> ModelConfig:
    """Replace ``instance_group`` with ``(count, kind[, gpus])`` entries, e.g. ``[(2, "KIND_GPU", [0, 1])]``.

    ``count`` must be ≥ 1: Triton silently reads 0 as "use the default", which
    would hide a typo in an experiment.
    """
    new = ModelConfig()
    new.CopyFrom(cfg)
    del new.instance_group[:]
    for group in groups:
        count, kind = group[0], group[1]
        gpus = group[2] if len(group) > 2 else ()
        if int(count) < 1:
            raise ConfigError(f"instance count must be at least 1, got {count}")
        entry = new.instance_group.add(count=int(count), kind=_kind(kind))
        entry.gpus.extend(int(g) for g in gpus)
    if not new.instance_group:
        raise ConfigError("at least one instance group is needed")
    return new


def set_instances(cfg: ModelConfig, count: int, kind: str = "KIND_CPU",
                  gpus: Sequence[int] = ()) -> ModelConfig:
    """Shorthand for one instance group."""
    return set_instance_groups(cfg, [(count, kind, gpus)])


def set_dynamic_batching(cfg: ModelConfig, enabled: bool, preferred_batch_sizes: Sequence[int] = (),
                         max_queue_delay_us: int = 0) -> ModelConfig:
    """Turn dynamic batching on (with preferred sizes and queue delay) or off."""
    new = ModelConfig()
    new.CopyFrom(cfg)
    new.ClearField("dynamic_batching")
    if enabled:
        if new.max_batch_size < 1:
            raise ConfigError("dynamic batching needs max_batch_size ≥ 1")
        too_big = [s for s in preferred_batch_sizes if not 1 <= int(s) <= new.max_batch_size]
        if too_big:
            raise ConfigError(f"preferred batch sizes {too_big} are outside 1..{new.max_batch_size}")
        if max_queue_delay_us < 0:
            raise ConfigError("max_queue_delay_us must be ≥ 0")
        new.dynamic_batching.preferred_batch_size.extend(int(s) for s in preferred_batch_sizes)
        new.dynamic_batching.max_queue_delay_microseconds = int(max_queue_delay_us)
        new.dynamic_batching.SetInParent()
    return new


def set_parameter(cfg: ModelConfig, key: str, value: str) -> ModelConfig:
    """Set a string ``parameters`` entry (e.g. food_classifier's CPU_THREADS)."""
    new = ModelConfig()
    new.CopyFrom(cfg)
    new.parameters[key].string_value = str(value)
    return new


def validate(cfg: ModelConfig) -> None:
    """Checks Triton would not do, or would answer less clearly."""
    for group in cfg.instance_group:
        if group.count < 1:
            raise ConfigError(f"instance count must be at least 1, got {group.count}")


def diff_configs(old: str, new: str, name: str = CONFIG_NAME) -> str:
    """Readable unified diff of two config texts ('' when equal)."""
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{name}", tofile=f"b/{name}"))


def write_config(model_dir: Path, cfg: ModelConfig) -> str:
    """Write ``cfg`` as config.pbtxt (canonical text format); return the diff against the old file."""
    validate(cfg)
    path = Path(model_dir) / CONFIG_NAME
    old = config_text(parse_config(path.read_text())) if path.is_file() else ""
    new = config_text(cfg)
    path.write_text(new)
    return diff_configs(old, new, f"{Path(model_dir).name}/{CONFIG_NAME}")


def _client_of(server_or_client: Any) -> Any:
    return server_or_client.client() if hasattr(server_or_client, "client") else server_or_client


def live_config(server_or_client: Any, name: str) -> ModelConfig:
    """The config the server is using right now."""
    return from_dict(_client_of(server_or_client).get_model_config(name))


class ConfigFile(Protocol):
    """Where a model's config.pbtxt lives: on this machine, or on a target's host (a Stack's file)."""

    def read(self) -> str | None:
        """The file's text, or None when there is none."""

    def write(self, text: str) -> None:
        """Replace the file's text."""


@dataclass
class LocalConfigFile:
    """``model_dir/config.pbtxt`` on this machine."""

    model_dir: Path

    def read(self) -> str | None:
        path = Path(self.model_dir) / CONFIG_NAME
        return path.read_text() if path.is_file() else None

    def write(self, text: str) -> None:
        (Path(self.model_dir) / CONFIG_NAME).write_text(text)


def apply_config(server_or_client: Any, name: str, where: Path | ConfigFile | None, cfg: ModelConfig,
                 timeout: float = 120.0, reload: Callable[[str, str], None] | None = None) -> ModelConfig:
    """The one way a config changes: write it, reload ``name`` with it, read the live config back.

    ``where`` is the model's folder (or a ``ConfigFile``; None: nothing written).
    ``server_or_client`` is a ``TritonServer`` (its refusals carry the server
    log's reason) or a tritonclient HTTP client; ``reload(name, config_json)``
    replaces the reload call (a Stack's ``reload_model``). On refusal the file
    is restored and ``ConfigError`` carries Triton's message; the previously
    loaded config keeps serving. The live config must show what was written.
    """
    from tritonclient.utils import InferenceServerException

    validate(cfg)
    file = LocalConfigFile(Path(where)) if isinstance(where, str | Path) else where
    previous = file.read() if file is not None else None
    if file is not None:
        file.write(config_text(cfg))
    try:
        try:
            if reload is not None:
                reload(name, config_json(cfg))
            elif hasattr(server_or_client, "load") and hasattr(server_or_client, "client"):
                server_or_client.load(name, config=config_json(cfg), timeout=timeout)
            else:
                _client_of(server_or_client).load_model(name, config=config_json(cfg))
        except (InferenceServerException, RuntimeError) as exc:
            message = exc.message() if isinstance(exc, InferenceServerException) else str(exc)
            raise ConfigError(
                f"new config for '{name}' refused, the old one keeps serving: {message}") from None
        live = live_config(server_or_client, name)
        _confirm(name, cfg, live)
    except BaseException:
        # refused, unreachable, or live differs from what was written: the file says what serves
        if file is not None and previous is not None:
            file.write(previous)
        raise
    return live


def _confirm(name: str, wanted: ModelConfig, live: ModelConfig) -> None:
    """The fields an experiment changes must read back from the server as written."""
    def groups(c: ModelConfig) -> list[tuple[int, int, list[int]]]:
        return [(g.count, g.kind, list(g.gpus)) for g in c.instance_group]

    checks = {
        "instance_group": (groups(wanted), groups(live)),
        "dynamic_batching": (wanted.HasField("dynamic_batching"), live.HasField("dynamic_batching")),
    }
    if wanted.HasField("dynamic_batching") and wanted.dynamic_batching.preferred_batch_size:
        # none sent: Triton fills in max_batch_size itself, so there is nothing to compare
        checks["preferred_batch_size"] = (list(wanted.dynamic_batching.preferred_batch_size),
                                          list(live.dynamic_batching.preferred_batch_size))
    wrong = {k: v for k, v in checks.items() if v[0] != v[1]}
    if wrong:
        raise ConfigError(f"the server's live config for '{name}' differs from the one sent: "
                          + "; ".join(f"{k}: sent {a}, live {b}" for k, (a, b) in wrong.items()))


def summary(cfg: ModelConfig) -> dict[str, Any]:
    """The few fields a result row needs to say which config was measured."""
    return {
        "instances": ", ".join(
            f"{g.count}x{mc.ModelInstanceGroup.Kind.Name(g.kind)}" + (f"{list(g.gpus)}" if g.gpus else "")
            for g in cfg.instance_group) or "default",
        "dynamic_batching": cfg.HasField("dynamic_batching"),
        "preferred_batch_size": list(cfg.dynamic_batching.preferred_batch_size),
        "max_queue_delay_us": int(cfg.dynamic_batching.max_queue_delay_microseconds),
        "max_batch_size": int(cfg.max_batch_size),
        "backend": cfg.backend or cfg.platform,
        "parameters": {k: v.string_value for k, v in cfg.parameters.items()},
    }


def to_json(cfg: ModelConfig) -> str:
    return json.dumps(config_dict(cfg), sort_keys=True)
