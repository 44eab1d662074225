"""Run configuration: one dataclass holding every option of ``bench run``.

Precedence (lowest to highest): the embedded defaults below (the default run) <
``--preset NAME`` (``pebench/presets/NAME.yaml``) < ``--config FILE`` < command-line flags.
The resolved configuration is saved as ``config.yaml`` in the run directory, and
``bench run --config <run>/config.yaml`` reproduces the run (same directory, same metrics).

Unknown keys in a YAML file are a user error (:class:`ConfigError`, exit code 2).
"""
from __future__ import annotations

import dataclasses
import importlib.resources
import math
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from .core.errors import ConfigError

__all__ = ["RunConfig", "ConfigError", "load_yaml_config", "load_preset", "list_presets", "merge",
           "resolve", "config_to_dict", "run_dir_for", "variant_name", "tokens_suffix", "parse_analyses", "ANALYSES",
           "check_resolution_syntax",
           "DEFAULT_PE_PREFERENCE"]

#: keys of ``analysis_options`` / ``--analysis-option`` (pebench.analysis.evaluators.DEFAULT_OPTIONS; a test
#: keeps the two in step)
ANALYSIS_OPTIONS = ("probe_size", "ssdc_tap", "eed_tap", "ssdc_distance", "rpi_permutations", "rpi_null",
                    "robustness_samples", "alpha_samples", "alpha_probe_size", "extrapolation_samples")

#: ``--task`` values (one LightningModule each in pebench.models.tasks)
TASKS = ("classification", "dino", "detection", "segmentation")

#: ``--logger`` values (the CSV logger's metrics.csv is written in every case)
LOGGERS = ("csv", "tensorboard", "wandb")
#: analyses ``--analyses`` accepts (``none``/``all``/``auto`` are shorthands)
ANALYSES = ("geometry", "robustness", "alpha", "extrapolation")
#: the default run uses the first of these PEs that is registered
DEFAULT_PE_PREFERENCE = ("pape", "rope-axial", "ape")


def parse_bool(value: Any) -> bool | None:
    """``True``/``False`` from a bool or a word (1/true/yes/on, 0/false/no/off, any case); ``None`` otherwise."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    return True if word in ("1", "true", "yes", "on") else False if word in ("0", "false", "no", "off") else None


@dataclass
class RunConfig:
    """Every option of a run. The defaults are the embedded default run (``bench run``)."""

    # what to train
    dataset: str = "shapes"
    pe: str | None = None                     # None: best registered of DEFAULT_PE_PREFERENCE
    model: str = "vit-nano"
    pe_options: dict = field(default_factory=dict)
    class_token: bool = False
    pool: str = "mean"
    rpt: bool = False
    drop_path: float = 0.0
    task: str | None = None               # None: the dataset's default_task (TASKS; pebench.tasks)
    task_options: dict = field(default_factory=dict)  # e.g. n_local, out_dim for --task dino
    # data
    resolution: int | str | None = None       # None: the dataset's default
    data_root: str | None = None
    data: dict = field(default_factory=dict)  # extra datamodule kwargs (e.g. train_size)
    num_workers: int = 0
    # optimisation
    epochs: int = 4
    batch_size: int = 64                      # global batch; each of W ranks gets batch_size // W
    lr: float = 2e-3
    weight_decay: float = 0.05
    warmup_epochs: float = 1.0
    label_smoothing: float = 0.0
    layer_decay: float | None = None
    seed: int = 0
    # trainer
    devices: int | str = 1
    accelerator: str = "auto"
    strategy: str = "auto"
    num_nodes: int = 1
    precision: str = "32-true"
    deterministic: bool = False
    compile: bool = False                     # torch.compile the backbone (nn.Module.compile, in place)
    attention_impl: str = "auto"              # auto | dense | sdpa | flex (pebench.models.attention)
    fast_dev_run: bool = False
    limit_train_batches: float | None = None
    limit_val_batches: float | None = None
    max_time: str | None = None               # "DD:HH:MM:SS"
    progress_bar: bool = True
    tensorboard: bool = False                 # alias of logger="tensorboard" (kept for old config files)
    logger: str = "csv"                       # csv | tensorboard | wandb (metrics.csv is always written)
    # outputs and analyses
    out: str = "runs"
    analyses: str = "auto"                    # auto | none | all | comma list of ANALYSES
    extrapolation_resolutions: list | None = None
    analysis_options: dict = field(default_factory=dict)  # e.g. ssdc_tap, rpi_permutations (ANALYSIS_OPTIONS)
    # data integrity: above this fraction of a split's samples missing or corrupt, the run is not complete
    max_skipped_fraction: float = 0.05


_HINTS: dict[str, Any] | None = None


def _hints() -> dict[str, Any]:
    global _HINTS
    if _HINTS is None:
        _HINTS = typing.get_type_hints(RunConfig)
    return _HINTS


def field_names() -> list[str]:
    return [f.name for f in dataclasses.fields(RunConfig)]


def _coerce(name: str, value: Any) -> Any:
    """Convert ``value`` to the type of field ``name`` (YAML and CLI give loosely typed values)."""
    if value is None:
        return None
    hint = _hints()[name]
    args = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
    origin = typing.get_origin(hint)
    if origin is dict or hint is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"config key {name!r} must be a mapping, got {value!r}")
        return dict(value)
    if list in args or typing.get_origin(args[0]) is list:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"config key {name!r} must be a list, got {value!r}")
        return [str(v) for v in value]
    if bool in args:
        flag = parse_bool(value)
        if flag is None:
            raise ConfigError(f"config key {name!r} must be true or false, got {value!r}")
        return flag
    for t in args:  # first type that accepts the value (int | str: keep ints as ints)
        if t is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if t is int and isinstance(value, str) and value.lstrip("-").isdigit():
            return int(value)
        if t is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if t is float and isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                continue
        if t is str and isinstance(value, (str, int, float)):
            return str(value)
    raise ConfigError(f"config key {name!r} has an invalid value {value!r} (expected {hint})")


def _check_keys(data: Mapping[str, Any], source: str) -> None:
    valid = field_names()
    for key in data:
        if key not in valid:
            raise ConfigError(f"unknown key {key!r} in {source}; valid keys: {', '.join(valid)}")


def load_yaml_config(path: str | Path) -> dict[str, Any]:
    """Read a run config YAML file; unknown keys raise :class:`ConfigError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read config file {str(p)!r}: {e.strerror or e}") from None
    return _parse_yaml(text, f"config file {str(p)!r}")


def _parse_yaml(text: str, source: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{source} is not valid YAML: {str(e).splitlines()[0]}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must be a mapping of run options, got {type(data).__name__}")
    _check_keys(data, source)
    return {k: _coerce(k, v) for k, v in data.items()}


def _preset_dir() -> Any:
    return importlib.resources.files("pebench") / "presets"


def list_presets() -> list[str]:
    try:
        d = _preset_dir()
        return sorted(p.name[:-5] for p in d.iterdir() if p.name.endswith(".yaml"))
    except (FileNotFoundError, NotADirectoryError, ModuleNotFoundError):
        return []


def load_preset(name: str) -> dict[str, Any]:
    """Read ``pebench/presets/<name>.yaml`` (shipped with the package)."""
    res = _preset_dir() / f"{name}.yaml"
    if not res.is_file():
        raise ConfigError(f"unknown preset {name!r}; available: {', '.join(list_presets()) or '(none)'}")
    return _parse_yaml(res.read_text(encoding="utf-8"), f"preset {name!r}")


def merge(*layers: Mapping[str, Any]) -> RunConfig:
    """Later layers override earlier ones; ``None`` values in a layer mean "not given"."""
    values: dict[str, Any] = {}
    for layer in layers:
        _check_keys(layer, "options")
        for k, v in layer.items():
            if v is not None:
                values[k] = _coerce(k, v)
    return RunConfig(**values)


def best_default_pe() -> str:
    from pebench.encodings import list_pes

    names = list_pes()
    for name in DEFAULT_PE_PREFERENCE:
        if name in names:
            return name
    return names[0] if names else "none"


def parse_analyses(value: str | list | None, synthetic: bool, additive_pe: bool) -> tuple[list[str], bool]:
    """-> (analyses to run, explicitly requested). ``auto``: all that apply on synthetic datasets
    (alpha only for additive PEs), ``geometry`` on real ones. ``all``: all that apply."""
    if value is None or value == "auto":
        if not synthetic:
            return ["geometry"], False
        return [a for a in ANALYSES if a != "alpha" or additive_pe], False
    items = value if isinstance(value, list) else [v.strip() for v in str(value).split(",") if v.strip()]
    if items == ["none"]:
        return [], True
    if items == ["all"]:
        return [a for a in ANALYSES if a != "alpha" or additive_pe], True
    for a in items:
        if a not in ANALYSES:
            raise ConfigError(f"unknown analysis {a!r}; available: {', '.join(ANALYSES)}, none, all")
    return [a for a in ANALYSES if a in items], True


def resolve(cfg: RunConfig) -> RunConfig:
    """Fill in defaults that depend on what is installed (the default PE) and check simple
    consistency rules that need no registry."""
    cfg = dataclasses.replace(cfg, pe_options=dict(cfg.pe_options), data=dict(cfg.data),
                              analysis_options=dict(cfg.analysis_options))
    if cfg.pe is None:
        cfg.pe = best_default_pe()
    if cfg.logger not in LOGGERS:
        raise ConfigError(f"unknown logger {cfg.logger!r}; available: {', '.join(LOGGERS)}")
    if cfg.tensorboard and cfg.logger == "wandb":
        raise ConfigError("conflicting flags: --tensorboard is --logger tensorboard; choose one of "
                          "--logger tensorboard or --logger wandb")
    if cfg.tensorboard:
        cfg.logger = "tensorboard"
    if cfg.rpt and cfg.pe == "none":
        raise ConfigError("conflicting flags: --rpt permutes tokens against positions, which needs a PE "
                          "(got --pe none)")
    if cfg.pool == "cls" and not cfg.class_token:
        raise ConfigError("conflicting flags: --pool cls needs --class-token")
    if cfg.task is not None and cfg.task not in TASKS:
        raise ConfigError(f"unknown task {cfg.task!r}; available: {', '.join(TASKS)}")
    if cfg.pool not in ("mean", "cls"):
        raise ConfigError(f"unknown pool {cfg.pool!r}; available: mean, cls")
    for name in ("epochs", "batch_size", "num_nodes"):
        if getattr(cfg, name) < 1:
            raise ConfigError(f"{name} must be >= 1, got {getattr(cfg, name)}")
    if cfg.num_workers < 0:
        raise ConfigError(f"num_workers must be >= 0, got {cfg.num_workers}")
    if cfg.deterministic and cfg.compile:
        raise ConfigError("conflicting flags: --deterministic pins CPU kernels to a portable path and --compile "
                          "generates host-specific ones (inductor's code under the AVX2 pin gave NaN losses on "
                          "an AVX-512 host); run reproducible runs without --compile")
    _check_numbers(cfg)
    if not str(cfg.out).strip():
        raise ConfigError("out must name a directory, got an empty string (default: runs)")
    if cfg.data_root is not None and not str(cfg.data_root).strip():
        raise ConfigError("data_root must name a directory, got an empty string")
    parse_analyses(cfg.analyses, True, True)  # validates names
    unknown = sorted(set(cfg.analysis_options) - set(ANALYSIS_OPTIONS))
    if unknown:
        raise ConfigError(f"unknown analysis option {unknown[0]!r}; available: {', '.join(ANALYSIS_OPTIONS)}")
    _check_analysis_options(cfg.analysis_options)
    for r in cfg.extrapolation_resolutions or []:
        check_resolution_syntax(r, "extrapolation_resolutions")
    return cfg


def _check_analysis_options(opts: dict) -> None:
    """Values of the analysis options that pick a protocol (one-line :class:`ConfigError`)."""
    for key in ("ssdc_tap", "eed_tap"):
        if key in opts and opts[key] not in ("attn_in", "block_out"):
            raise ConfigError(f"analysis option {key} must be attn_in or block_out, got {opts[key]!r}")
    if opts.get("ssdc_distance") not in (None, "l1", "euclidean"):
        raise ConfigError(f"analysis option ssdc_distance must be l1 or euclidean, got {opts['ssdc_distance']!r}")
    k = opts.get("rpi_permutations", 8)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"analysis option rpi_permutations must be an integer >= 1, got {k!r}")
    if opts.get("rpi_null", True) not in (True, False):
        raise ConfigError(f"analysis option rpi_null must be true or false, got {opts['rpi_null']!r}")


#: float options: name -> (lowest, lowest allowed, highest, highest allowed, what it is)
_RANGES: dict[str, tuple[float, bool, float, bool, str]] = {
    "lr": (0.0, False, math.inf, False, "the peak learning rate"),
    "weight_decay": (0.0, True, math.inf, False, "the AdamW weight decay"),
    "warmup_epochs": (0.0, True, math.inf, False, "the warm-up length in epochs"),
    "label_smoothing": (0.0, True, 1.0, False, "the label-smoothing factor"),
    "drop_path": (0.0, True, 1.0, False, "the stochastic-depth rate"),
    "layer_decay": (0.0, False, 1.0, True, "the layer-wise lr decay factor"),
    "limit_train_batches": (0.0, False, math.inf, False, "a fraction (<= 1) or a number of batches"),
    "limit_val_batches": (0.0, False, math.inf, False, "a fraction (<= 1) or a number of batches"),
    "max_skipped_fraction": (0.0, True, 1.0, True, "the largest fraction of a split's samples that may be "
                                                    "missing or corrupt"),
}


def _check_numbers(cfg: RunConfig) -> None:
    """Every float option finite and inside its range (one-line :class:`ConfigError` otherwise)."""
    for name, (lo, lo_in, hi, hi_in, what) in _RANGES.items():
        v = getattr(cfg, name)
        if v is None:
            continue
        lo_s = f"{'>=' if lo_in else '>'} {lo:g}"
        hi_s = "" if math.isinf(hi) else f" and {'<=' if hi_in else '<'} {hi:g}"
        hi_s += " and finite"
        ok = (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
              and (v >= lo if lo_in else v > lo) and (v <= hi if hi_in else v < hi))
        if not ok:
            raise ConfigError(f"{name} must be {lo_s}{hi_s} ({what}), got {v!r}")
        if name.startswith("limit_") and v > 1 and v != int(v):
            raise ConfigError(f"{name} must be a fraction (<= 1) or a whole number of batches, got {v!r}")


def check_resolution_syntax(value: Any, name: str) -> None:
    """``S`` or ``AxB`` with positive integers, else :class:`ConfigError` (divisibility by the patch
    size is checked where the dataset is known)."""
    parts = str(value).strip().lower().split("x")
    if not (1 <= len(parts) <= 2 and all(p.isdigit() and int(p) > 0 for p in parts)):
        raise ConfigError(f"{name}: {str(value)!r} is not a resolution; expected positive integers "
                          f"'S' or 'AxB', e.g. 24,32,48")


def config_to_dict(cfg: RunConfig) -> dict[str, Any]:
    return dataclasses.asdict(cfg)


def config_to_yaml(cfg: RunConfig) -> str:
    return yaml.safe_dump(config_to_dict(cfg), sort_keys=False)


def dataset_default_tokens(dataset: str) -> str | None:
    """The default of dataset ``dataset``'s ``tokens`` data option (``spiking`` for dvsgesture, as in
    the PaPE paper; ``frames`` for synthetic-events), or None when it has no such option or is not
    registered."""
    import inspect

    try:
        from pebench.datamodules import get_datamodule_class

        param = inspect.signature(get_datamodule_class(dataset).__init__).parameters.get("tokens")
    except (ImportError, KeyError, ValueError):
        return None
    return None if param is None or param.default is inspect.Parameter.empty else str(param.default).lower()


def tokens_suffix(cfg: RunConfig) -> str:
    """``+<tokens>`` (e.g. ``+spiking``, ``+frames`` on dvsgesture) when the ``tokens`` data option
    picks a token kind other than the dataset's default, else ``""``: spiking and frames runs of
    one dataset, PE and seed get different run directories and variant labels."""
    tokens = cfg.data.get("tokens")
    if tokens is None:
        return ""
    tokens = str(tokens).strip().lower()
    return "" if tokens == dataset_default_tokens(cfg.dataset) else f"+{tokens}"


def variant_name(cfg: RunConfig) -> str:
    """The PE variant: the PE name, ``+rpt`` when trained with random permutations, then
    :func:`tokens_suffix` (``pape+spiking``, ``ape+rpt+spiking``)."""
    return (f"{cfg.pe}+rpt" if cfg.rpt else str(cfg.pe)) + tokens_suffix(cfg)


def run_dir_for(cfg: RunConfig) -> Path:
    """``<out>/<dataset>/<pe-variant>/<model>/seed<S>``."""
    return Path(cfg.out) / cfg.dataset / variant_name(cfg) / cfg.model / f"seed{cfg.seed}"
