"""Run configuration: one dataclass holding every option of ``bench run``.

Precedence (lowest to highest): the embedded defaults below (the default run) <
``--preset NAME`` (``pebench/presets/NAME.yaml``) < ``--config FILE`` < command-line flags.
The resolved configuration is saved as ``config.yaml`` in the run directory, and
``bench run --config <run>/config.yaml`` reproduces the run (same directory, same metrics).

Unknown keys in a YAML file are a user error (:class:`ConfigError`, exit code 2).
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.resources
import inspect
import math
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from pebench.core.errors import ConfigError, ResultsError
from pebench.core.io import MAX_YAML_BYTES, UnreadableYAML, load_yaml_untrusted
from pebench.core.options import Option, check_values, declared_options, flag_values, option
from pebench.core.schema import migrate
from pebench.tasks import list_tasks

__all__ = ["RunConfig", "ConfigError", "load_yaml_config", "load_preset", "preset_info", "list_presets", "merge",
           "resolve", "config_to_dict", "run_dir_for", "variant_name", "tokens_suffix", "parse_analyses", "ANALYSES",
           "check_resolution_syntax", "check_option_values", "merged_config", "run_config_from_args",
           "DEFAULT_PE_PREFERENCE"]


#: ``--logger`` values (the CSV logger's metrics.csv is written in every case)
LOGGERS = ("csv", "tensorboard", "wandb")
#: the default run uses the first of these PEs that is registered
DEFAULT_PE_PREFERENCE = ("pape", "rope-axial", "ape")


@dataclass
class RunConfig:
    """Every option of a run. The defaults are the embedded default run (``bench run``)."""

    # what to train
    dataset: str = option("shapes", 'dataset to train on (see `bench list`); default: shapes', metavar='NAME')
    pe: str | None = option(None,
                            'positional encoding (see `bench list`); default: the best registered of pape, '
                            'rope-axial, ape', metavar='NAME')
    model: str = option("vit-nano", 'ViT preset (see `bench list`); default: vit-nano', metavar='NAME')
    pe_options: dict = option({},
                              'PE constructor option, e.g. impl=naive (repeatable; keys: `bench list pes '
                              '--options`)', flag='--pe-option', metavar='KEY=VALUE')
    class_token: bool = option(False, 'prepend a CLS token')
    pool: str = option("mean", 'head pooling: mean of patch tokens or the CLS token', choices=('mean', 'cls'))
    rpt: bool = option(False, 'random permutation training (run directory <pe>+rpt)')
    coord_aug: str = option("none",
                            "coordinate augmentation in training for every PE that reads coords: dinov3 is "
                            "DINOv3's RoPE recipe (coords normalised to [-1, 1] per axis, then rescaled by a "
                            "log-uniform factor in [1/2, 2]; none at evaluation; run directory <pe>+coordaug; "
                            "pebench.encodings.coord_augment)", choices=("none", "dinov3"))
    drop_path: float = option(0.0, 'stochastic depth rate', metavar='X',
                              minimum=0.0, maximum=1.0, maximum_inclusive=False, what='the stochastic-depth rate')
    task: str | None = option(None,
                              "what to train (default: the dataset's own task, classification for most): supervised "
                              "classification, DINO self-supervised (k-NN / linear probe on frozen features, EED "
                              "per checkpoint), detection (COCO-style boxes) or segmentation (per-point labels)")
    task_options: dict = option({},
                                "task setting, e.g. n_local=6 or out_dim=4096 for --task dino (repeatable; keys: "
                                "each task's Options in docs/tasks.md, e.g. docs/tasks.md#self-supervised-dino---task-dino)",
                                flag='--task-option', metavar='KEY=VALUE')
    # data
    resolution: int | str | None = option(None,
                                          "input resolution: side S or 'AxB' (video/events: frames x side; points: "
                                          "points x groups)", metavar='R', none_means="the dataset's")
    data_root: str | None = option(None, 'root directory of a real dataset', metavar='PATH')
    data: dict = option({},
                        'extra datamodule option, e.g. train_size=512 (repeatable; keys: `bench list datasets '
                        '--options`)', flag='--data-option', metavar='KEY=VALUE')
    num_workers: int = option(0, 'data-loading worker processes per rank', metavar='N', minimum=0)
    # optimisation
    # 3: the default run within its 3-minute budget on 2 cores (issue #50 item 6; 4 epochs took 186 s idle)
    epochs: int = option(3, 'training epochs', metavar='N', minimum=1)
    batch_size: int = option(64, 'global batch size; with W processes (devices x nodes) each loads B/W', metavar='B',
                             minimum=1)
    lr: float = option(2e-3, 'peak learning rate (AdamW, warm-up then cosine)', metavar='X',
                       minimum=0.0, minimum_inclusive=False, what='the peak learning rate')
    lr_schedule: str = option("cosine", 'learning rate after the linear warm-up: cosine decay to 0 at the last step, '
                              'or held at the peak (constant; for runs that stop at --stop-at)',
                              choices=("cosine", "constant"))
    weight_decay: float = option(0.05, 'AdamW weight decay', metavar='X',
                                 minimum=0.0, what='the AdamW weight decay')
    warmup_epochs: float = option(1.0, 'linear warm-up length in epochs', metavar='N',
                                  minimum=0.0, what='the warm-up length in epochs')
    label_smoothing: float = option(0.0, 'cross-entropy label smoothing', metavar='X',
                                    minimum=0.0, maximum=1.0, maximum_inclusive=False, what='the label-smoothing factor')
    layer_decay: float | None = option(None, 'layer-wise learning-rate decay factor', metavar='X',
                                       minimum=0.0, minimum_inclusive=False, maximum=1.0, what='the layer-wise lr decay factor',
                                       none_means='none (no decay)')
    seed: int = option(0, "random seed (also the run directory's seed<S>)", metavar='S', minimum=0, maximum=2**32 - 1,
                       what="Lightning's seed_everything takes 0 .. 2**32-1")
    # trainer
    devices: int | str = option(1, 'devices per node (an integer, or auto)', metavar='N')
    accelerator: str = option("auto", 'cpu, gpu, mps or auto', metavar='A')
    strategy: str = option("auto", 'Lightning strategy, e.g. ddp (auto: single device)', metavar='S')
    num_nodes: int = option(1, 'number of nodes (multi-node DDP)', metavar='K', minimum=1)
    precision: str = option("32-true", 'Lightning precision: 32-true, bf16-mixed, 16-mixed', metavar='P')
    deterministic: bool = option(False, 'use deterministic algorithms (slower on GPU)')
    threads: int | None = option(None, "intra-op CPU threads (torch.set_num_threads): the reduction order, so the "
                                 "float rounding, depends on it; config.yaml records the count the run used, so "
                                 "`bench run --config <run>/config.yaml` reruns with it", metavar='N',
                                 minimum=1, what='a number of threads',
                                 none_means="torch's (OMP_NUM_THREADS, else the cores)")
    compile: bool = option(False,
                           'torch.compile the backbone (in place: checkpoints stay loadable without it); the first '
                           'steps pay the compilation (tens of seconds; needs a C++ compiler on CPU)')
    attention_impl: str = option("auto", "how attention is computed: auto picks per PE, device and phase (dense "
                                 "reference, fused SDPA, FlexAttention for bias PEs, bias-flash for a learned bias "
                                 "in CPU training); force one to debug (pebench.models.attention)",
                                 choices=("auto", "dense", "sdpa", "flex", "bias-flash"))
    fast_dev_run: bool = option(False,
                                'one training and one validation batch (smoke test; analyses off unless --analyses '
                                'is given)')
    limit_train_batches: float | None = option(None, 'fraction (<=1) or number of training batches per epoch',
                                               metavar='X',
                                               minimum=0.0, minimum_inclusive=False, what='a fraction (<= 1) or a number of batches',
                                               none_means='all')
    val_every: int | None = option(None, 'validate every N training steps, counted across epochs (a learning '
                                   'curve; --stop-at checks at each validation)', metavar='N',
                                   minimum=1, what='a number of training steps',
                                   none_means='once per epoch')
    stop_at: float | None = option(None, "stop training at the first validation whose value of the primary metric "
                                   "(its val/ form, e.g. val/acc1 as a fraction) is above X; the run is complete "
                                   "and results.json records the step (--epochs is then the budget)", metavar='X',
                                   what='a value of the validation metric',
                                   none_means='train every epoch')
    give_up: str | None = option(None, "STEP:X: stop training at the first validation at or after optimizer step "
                                 "STEP whose primary metric (val/ form) is not above X, e.g. a run still at "
                                 "chance; the run is complete and results.json says it gave up",
                                 metavar='STEP:X', none_means='never')
    eval_checkpoint: str = option("last", "the weights the final validation, the test split and the analyses "
                                  "read: the last step's, or those of the validation with the best primary metric "
                                  "(val/ form; best.ckpt in the run directory)", choices=("last", "best"))
    limit_val_batches: float | None = option(None, 'fraction (<=1) or number of validation batches', metavar='X',
                                             minimum=0.0, minimum_inclusive=False, what='a fraction (<= 1) or a number of batches',
                                             none_means='all')
    max_time: str | None = option(None, 'stop training after this wall time', metavar='DD:HH:MM:SS')
    progress_bar: bool = option(True, 'show the TQDM progress bar')
    tensorboard: bool = option(False, 'same as --logger tensorboard (needs the tensorboard extra)')
    logger: str = option("csv",
                         'experiment logger; metrics.csv is always written. tensorboard needs the tensorboard '
                         'extra; wandb (Weights & Biases, offline unless WANDB_MODE=online) needs the wandb extra',
                         choices=('csv', 'tensorboard', 'wandb'))
    # outputs and analyses
    out: str = option("runs", 'root of run directories; default: runs', metavar='DIR')
    analyses: str = option("auto",
                           'comma list of geometry,robustness,alpha,extrapolation, or none / all; default: all that '
                           'apply on synthetic datasets, geometry on real ones', metavar='LIST')
    extrapolation_resolutions: list | None = option(None,
                                                    'resolutions for the extrapolation analysis, e.g. 24,32,48,64',
                                                    metavar='LIST', none_means='sizes derived from the training size')
    analysis_options: dict = option({},
                                    'analysis setting, e.g. ssdc_tap=block_out or rpi_permutations=16 (repeatable)',
                                    flag='--analysis-option', metavar='KEY=VALUE')
    # data integrity: above this fraction of a split's samples missing or corrupt, the run is not complete
    max_skipped_fraction: float = option(0.05,
                                         "largest fraction of a split's samples that may be missing (exit 2 before "
                                         "training) or corrupt (status incomplete) (default: 0.05)", metavar='X',
                                         minimum=0.0, maximum=1.0, what="the largest fraction of a split's samples that may be missing or corrupt")


def field_names() -> list[str]:
    return [f.name for f in dataclasses.fields(RunConfig)]


def run_options() -> dict[str, Option]:
    """name -> the :class:`~pebench.core.options.Option` of every run option (declared on :class:`RunConfig`)."""
    return {o.name: o for o in declared_options(RunConfig)}


def _coerce(name: str, value: Any) -> Any:
    """Convert ``value`` to the kind of option ``name`` (YAML and CLI give loosely typed values)."""
    return run_options()[name].coerce(value, f"config key {name!r}")


def _check_keys(data: Mapping[str, Any], source: str) -> None:
    valid = field_names()
    for key in data:
        if key not in valid:
            raise ConfigError(f"unknown key {key!r} in {source}; valid keys: {', '.join(valid)}")


def load_yaml_config(path: str | Path) -> dict[str, Any]:
    """Read a run config YAML file; unknown keys raise :class:`ConfigError`."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_YAML_BYTES + 1)
        text = raw.decode("utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read config file {str(p)!r}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"config file {str(p)!r} is not UTF-8 text (byte {e.start}); expected a YAML mapping of "
                          f"run options") from None
    return _parse_yaml(text, f"config file {str(p)!r}")


def _yaml_mapping(text: str, source: str) -> dict[str, Any]:
    """The YAML mapping in ``text`` as read (``{}`` for an empty file); not YAML or not a mapping: ConfigError."""
    try:  # safe tags only; size, nesting and alias expansion bounded (a 458-byte alias bomb is one line)
        data = load_yaml_untrusted(text)
    except UnreadableYAML as e:
        raise ConfigError(f"{source} cannot be read: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must be a mapping of run options, got {type(data).__name__}")
    return data


def _parse_yaml(text: str, source: str) -> dict[str, Any]:
    data = _yaml_mapping(text, source)
    if "schema_version" in data:  # a run's config.yaml: read through the schema's migrations, then drop the key
        try:
            data = migrate(data)
        except ResultsError as e:
            raise ConfigError(f"{source}: {e}") from None
        data.pop("schema_version")
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


#: keys of a preset file that describe the preset instead of setting a run option (``bench list presets``
#: prints them; :func:`load_preset` leaves them out): what it is, and which published setting it follows
PRESET_INFO_KEYS = ("description", "follows")


def _preset_mapping(name: str) -> dict[str, Any]:
    res = _preset_dir() / f"{name}.yaml"
    if not res.is_file():
        raise ConfigError(f"unknown preset {name!r}; available: {', '.join(list_presets()) or '(none)'}")
    return _yaml_mapping(res.read_text(encoding="utf-8"), f"preset {name!r}")


def load_preset(name: str) -> dict[str, Any]:
    """The run options of ``pebench/presets/<name>.yaml`` (shipped with the package), without its
    :data:`PRESET_INFO_KEYS`."""
    data = {k: v for k, v in _preset_mapping(name).items() if k not in PRESET_INFO_KEYS}
    _check_keys(data, f"preset {name!r}")
    return {k: _coerce(k, v) for k, v in data.items()}


def preset_info(name: str) -> dict[str, str]:
    """``{"description": ..., "follows": ...}`` of preset ``name`` (an absent key: ``""``); a value that is
    not a string is a :class:`ConfigError`."""
    data = _preset_mapping(name)
    for key in PRESET_INFO_KEYS:
        if not isinstance(data.get(key, ""), str):
            raise ConfigError(f"preset {name!r}: {key!r} must be a string, got {data[key]!r}")
    return {key: data.get(key, "").strip() for key in PRESET_INFO_KEYS}


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
    from pebench.encodings import list_pes  # deferred: start-up time (torch; the CLI imports this module)

    names = list_pes()
    for name in DEFAULT_PE_PREFERENCE:
        if name in names:
            return name
    return names[0] if names else "none"


def __getattr__(name: str) -> Any:
    """Views of the analysis registry (:mod:`pebench.analysis.registry`; importing it imports torch, so only
    when asked for): ``ANALYSES``, the analyses ``--analyses all`` may run, in running order, and
    ``ANALYSIS_OPTIONS``, the keys ``--analysis-option`` accepts."""
    if name in ("ANALYSES", "ANALYSIS_OPTIONS"):
        from pebench.analysis.registry import (  # deferred: start-up time (torch)
            analysis_options,
            get_analysis,
            list_analyses,
        )

        if name == "ANALYSES":
            return tuple(n for n in list_analyses() if get_analysis(n).in_all)
        return tuple(analysis_options())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse_analyses(value: str | list | None, synthetic: bool, additive_pe: bool) -> tuple[list[str], bool]:
    """-> (analyses to run, explicitly requested). ``auto``: all that apply on synthetic datasets
    (alpha only for additive PEs), ``geometry`` on real ones. ``all``: all that apply. Names, their order and
    where they apply come from the analysis registry (``bench list analyses``)."""
    from pebench.analysis.registry import select_analyses  # deferred: start-up time (torch)

    pe = types.SimpleNamespace(additive=bool(additive_pe))
    if value is None or value == "auto":
        if not synthetic:
            return ["geometry"], False
        return select_analyses("all", pe)[0], False
    items = value if isinstance(value, list) else [v.strip() for v in str(value).split(",") if v.strip()]
    if items == ["none"]:
        return [], True
    if items == ["all"]:
        return select_analyses("all", pe)[0], True
    return select_analyses(items, pe)[0], True


def parse_give_up(text: str) -> tuple[int, float]:
    """``--give-up STEP:X`` as (step, value): a whole number of steps >= 1 and a finite value."""
    step, sep, value = str(text).partition(":")
    try:
        parsed = int(step), float(value)
    except ValueError:
        parsed = None
    if not sep or parsed is None or parsed[0] < 1 or not math.isfinite(parsed[1]):
        raise ConfigError(f"give_up must be STEP:X (a step >= 1 and a finite metric value, e.g. 400:0.3), got {text!r}")
    return parsed


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
    if cfg.task is not None and cfg.task not in list_tasks():
        raise ConfigError(f"unknown task {cfg.task!r}; available: {', '.join(list_tasks())}")
    if cfg.coord_aug not in ("none", "dinov3"):
        raise ConfigError(f"unknown coord_aug {cfg.coord_aug!r}; available: none, dinov3")
    if cfg.pool not in ("mean", "cls"):
        raise ConfigError(f"unknown pool {cfg.pool!r}; available: mean, cls")
    if cfg.deterministic and cfg.compile:
        raise ConfigError("conflicting flags: --deterministic pins CPU kernels to a portable path and --compile "
                          "generates host-specific ones (inductor's code under the AVX2 pin gave NaN losses on "
                          "an AVX-512 host); run reproducible runs without --compile")
    check_option_values(cfg)
    parse_analyses(cfg.analyses, True, True)  # validates names
    _check_analysis_options(cfg.analysis_options)
    for r in cfg.extrapolation_resolutions or []:
        check_resolution_syntax(r, "extrapolation_resolutions")
    return cfg


def check_option_values(cfg: RunConfig) -> None:
    """The run options' values against their declared bounds, before anything heavy is imported (torch-free:
    ``bench run --epochs -1`` answers in well under a second). :func:`resolve` calls it too."""
    check_values(cfg)  # kinds, choices and bounds of every declared option
    for name in ("limit_train_batches", "limit_val_batches"):
        v = getattr(cfg, name)
        if v is not None and v > 1 and v != int(v):
            raise ConfigError(f"{name} must be a fraction (<= 1) or a whole number of batches, got {v!r}")
    if cfg.give_up is not None:
        parse_give_up(cfg.give_up)
    if not str(cfg.out).strip():
        raise ConfigError("out must name a directory, got an empty string (default: runs)")
    if cfg.data_root is not None and not str(cfg.data_root).strip():
        raise ConfigError("data_root must name a directory, got an empty string")


def _check_analysis_options(opts: dict) -> None:
    """``analysis_options`` against the analyses' own declarations (unknown keys, types, choices, bounds:
    one-line :class:`ConfigError`)."""
    from pebench.analysis.registry import check_analysis_options  # deferred: start-up time (torch)

    check_analysis_options(opts)


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
    try:
        from pebench.datamodules import get_datamodule_class  # deferred: start-up time (torch; the CLI imports us)

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
    """The PE variant: the PE name, ``+rpt`` when trained with random permutations, ``+coordaug``
    with a coordinate augmentation, then :func:`tokens_suffix` (``pape+spiking``, ``ape+rpt+spiking``)."""
    aug = "+coordaug" if cfg.coord_aug != "none" else ""
    return (f"{cfg.pe}+rpt" if cfg.rpt else str(cfg.pe)) + aug + tokens_suffix(cfg)


def run_dir_for(cfg: RunConfig) -> Path:
    """``<out>/<dataset>/<pe-variant>/<model>/seed<S>``."""
    return Path(cfg.out) / cfg.dataset / variant_name(cfg) / cfg.model / f"seed{cfg.seed}"


def run_config_from_args(args: argparse.Namespace) -> RunConfig:
    """defaults < --preset < --config < flags -> resolved :class:`RunConfig`."""
    return resolve(merged_config(args))


def merged_config(args: argparse.Namespace) -> RunConfig:
    """defaults < --preset < --config < flags, before :func:`resolve` (which may import torch)."""
    layers: list[dict[str, Any]] = []
    if getattr(args, "preset", None):
        layers.append(load_preset(args.preset))
    if getattr(args, "config", None):
        layers.append(load_yaml_config(args.config))
    base = merge(*layers)
    flags = flag_values(args, RunConfig)
    if getattr(args, "config", None) and layers[-1].get("out") == "." and "out" not in flags:
        # committed results store `out: .` (relative to their study folder: docs/cli.md, `bench leaderboard --check`);
        # from that folder a rerun would write over the committed run, from anywhere else into a stray folder
        raise ConfigError(f"config file {str(args.config)!r} has out: . (a committed run's folder is relative to "
                          f"its study); give --out DIR to rerun it (e.g. --out runs)")
    for key, value in flags.items():
        if isinstance(value, dict):  # KEY=VALUE pairs update the file's mapping
            flags[key] = {**getattr(base, key), **value}
    return merge(dataclasses.asdict(base), flags)
