"""Resolution extrapolation (docs/architecture.md §4): one trained checkpoint evaluated at several input sizes.

:func:`evaluate_extrapolation` evaluates top-1 accuracy on ``datamodule.eval_dataloader(res)``
for each resolution. Nothing is re-fitted: each PE applies its own native rule (APE interpolates
its table, RoPE / sincos / ALiBi / PaPE compute any coords, LookHere rebuilds its masks), and the
token grid comes from the tokenizer for the new input size. The opt-in analysis ``extrapolation-rules``
(:func:`evaluate_extrapolation_rules`) evaluates the same sizes under each extrapolation rule of the PE's
``extrapolation`` option (:mod:`pebench.encodings.extrapolation`: PI, NTK, YaRN, DINOv3-normalised, ...).

* images: side ``S`` or ``"HxW"``; video / events: ``"TxS"`` (frames / time bins x side) or ``S``.
  A size not divisible by the patch (tubelet) size gives a row ``{"resolution", "error"}`` and is
  skipped; so does any resolution the datamodule rejects. :func:`check_resolutions` raises for the
  same sizes instead; ``bench run`` / ``bench eval`` call it first, so there such a size is a user
  error (exit code 2) before anything is trained or written.
* points: ``"MxG"`` sets ``task.tokenizer.num_groups = G`` for that evaluation; a bare ``M`` scales
  the trained group count with the point count, ``G = round(G_train · M / M_train)`` (at least 1,
  at most M), so each group keeps about as many points as in training. The tokenizer's group
  count is restored afterwards.

Rows: ``{"resolution": "64", "acc1": float, "n_tokens": int, "n_samples": int}`` (``n_tokens``:
patch tokens per sample). Runs in eval mode under ``torch.no_grad()`` in one process after
training. ``max_samples`` caps the samples per resolution (default: the whole validation set).

:func:`default_resolutions` picks sizes when the run gives none: images ``[S, 1.5S, 2S, 3S, 4S]``
(rounded to patch multiples), video / events ``TxS, Tx2S, 2TxS, 2Tx2S``, points
``MxG, 2Mx2G, 4Mx4G``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from pebench.core.errors import ConfigError
from pebench.core.options import option
from pebench.datamodules.base import parse_resolution
from pebench.encodings.base import PositionalEncoding
from pebench.encodings.extrapolation import extrapolation_rules_of, set_extrapolation

from .geometry import evaluating, task_device
from .plots import plot_extrapolation
from .progress import Steps
from .registry import Analysis, AnalysisContext, register_analysis
from .robustness import capped_batches, logits_in_chunks

__all__ = ["evaluate_extrapolation", "evaluate_extrapolation_rules", "rows_per_size", "check_resolutions",
           "default_resolutions", "resolution_key", "ExtrapolationOptions", "ExtrapolationAnalysis",
           "ExtrapolationRulesOptions", "ExtrapolationRulesAnalysis", "model_pe", "rules_to_compare",
           "resolution_tuple", "round_to_multiple", "count_tokens"]


def resolution_tuple(res: Any) -> tuple[int, ...]:
    """A resolution given as a sequence of sizes or as text (``"S"``, ``"AxB"``: ``parse_resolution``) as a tuple."""
    if isinstance(res, (tuple, list)):
        return tuple(int(r) for r in res)
    return parse_resolution(res)


def resolution_key(res: Any) -> str:
    if isinstance(res, (tuple, list)):
        return "x".join(str(int(r)) for r in res)
    return str(res).strip().lower()


def round_to_multiple(v: float, m: int) -> int:
    """``v`` rounded to the nearest multiple of ``m`` (at least ``m``)."""
    return max(m, int(round(v / m)) * m)


def default_resolutions(datamodule: Any, task: Any = None) -> list[str]:
    """Default extrapolation sizes for the datamodule's modality (see the module docstring)."""
    modality = datamodule.modality
    res = tuple(datamodule.resolution)
    p = int(getattr(datamodule, "patch_size", 1))
    out: list[str] = []
    if modality == "image":
        for f in (1, 1.5, 2, 3, 4):
            if len(res) == 2 and res[0] != res[1]:
                out.append(f"{round_to_multiple(res[0] * f, p)}x{round_to_multiple(res[1] * f, p)}")
            else:
                out.append(str(round_to_multiple(res[0] * f, p)))
    elif modality in ("video", "events"):
        t, s = res if len(res) == 2 else (None, res[0])
        if t is None:
            shape = datamodule.input_shape()
            t = int(shape[-3])
        tub = int(getattr(datamodule, "tubelet", 1))
        for ft, fs in ((1, 1), (1, 2), (2, 1), (2, 2)):
            out.append(f"{round_to_multiple(t * ft, tub)}x{round_to_multiple(s * fs, p)}")
    elif modality == "points":
        m = res[0]
        g = int(task.tokenizer.num_groups) if task is not None else int(getattr(datamodule, "num_groups", 64))
        if len(res) == 2:
            g = res[1]
        out = [f"{m * k}x{g * k}" for k in (1, 2, 4)]
    else:
        raise ValueError(f"unknown modality {modality!r}")
    return list(dict.fromkeys(out))


def _point_groups(task: Any, datamodule: Any, res: tuple[int, ...]) -> int:
    if len(res) == 2:
        return int(res[1])
    m_train = int(tuple(datamodule.resolution)[0])
    g_train = int(task.hparams.get("num_groups", task.tokenizer.num_groups)) if hasattr(task, "hparams") \
        else int(task.tokenizer.num_groups)
    return int(min(res[0], max(1, round(g_train * res[0] / m_train))))


def count_tokens(task: Any, datamodule: Any, res: tuple[int, ...]) -> int:
    """Validate the size (ResolutionError / ValueError) and return the patch-token count."""
    shape = tuple(datamodule.input_shape(res))
    if task.modality == "points":
        return int(task.tokenizer.num_groups)
    sizes = shape[-2:] if task.modality == "image" else shape[-3:]
    return int(math.prod(task.tokenizer.grid_for(sizes)))


def check_resolutions(task: Any, datamodule: Any, resolutions: Sequence[str | int]) -> None:
    """Raise one ``ValueError`` line (``ResolutionError`` where the size is the problem) for the first
    resolution :func:`evaluate_extrapolation` would turn into an error row: not ``S`` / ``AxB``
    positive integers, not divisible by the patch (tubelet) size, more groups than points. ``bench
    run`` and ``bench eval`` call it before anything is written, so a bad size is a user error up
    front rather than a row in ``results.json``. A task whose settings are not sizes (segmentation's
    ``FxK``) brings its own check through its setup (:class:`~.evaluators.TaskAnalyses`)."""
    points = task.modality == "points"
    groups0 = int(task.tokenizer.num_groups) if points else None
    try:
        for r in resolutions:
            key = resolution_key(r)
            try:
                res = resolution_tuple(r)
                if points:
                    task.tokenizer.num_groups = _point_groups(task, datamodule, res)
                count_tokens(task, datamodule, res)
            except ValueError as e:
                msg = f"extrapolation resolution {key!r}: {' '.join(str(e).split())}"
                try:
                    err = type(e)(msg)  # keep ResolutionError / DataRootError
                except Exception:  # noqa: BLE001 - a subclass with another signature
                    err = ValueError(msg)
                raise err from None
    finally:
        if points:
            task.tokenizer.num_groups = groups0


def rows_per_size(task: Any, resolutions: Sequence[Any], measure: Callable[[Any], dict[str, Any]]
                  ) -> list[dict[str, Any]]:
    """``[{"resolution": key, **measure(size)}]`` in evaluation mode, one row per size; a size the data or
    the model rejects (a ``ValueError``: ``ResolutionError`` and the datamodules' size errors are) gives an
    error row instead. Every task's extrapolation goes through this loop, with its own ``measure``."""
    rows: list[dict[str, Any]] = []
    steps = Steps("extrapolation", len(resolutions), "size")  # one progress line per size
    with evaluating(task):
        for r in resolutions:
            key = resolution_key(r)
            try:
                rows.append({"resolution": key, **measure(r)})
            except ValueError as e:
                rows.append({"resolution": key, "error": " ".join(str(e).split()) or type(e).__name__})
            steps.done(key)
    return rows


def evaluate_extrapolation(task: Any, datamodule: Any, resolutions: Sequence[str | int],
                           max_samples: int | None = None) -> list[dict[str, Any]]:
    """Top-1 accuracy at each resolution (see the module docstring). A task with its own metric
    (detection, segmentation) brings its own function through its setup (:class:`~.evaluators.TaskAnalyses`)."""
    device = task_device(task)
    points = task.modality == "points"
    groups0 = int(task.tokenizer.num_groups) if points else None

    def measure(r: Any) -> dict[str, Any]:
        try:
            res = resolution_tuple(r)
            if points:
                task.tokenizer.num_groups = _point_groups(task, datamodule, res)
            n_tokens = count_tokens(task, datamodule, res)
            correct = n = 0
            for x, y in capped_batches(datamodule.eval_dataloader(res), max_samples, device):
                correct += int((logits_in_chunks(task, x).argmax(-1) == y).sum())
                n += int(y.numel())
            return {"acc1": correct / n if n else None, "n_tokens": n_tokens, "n_samples": n}
        finally:
            if points:
                task.tokenizer.num_groups = groups0

    return rows_per_size(task, resolutions, measure)


# ------------------------------------------------------------------------------- registration
@dataclass(frozen=True)
class ExtrapolationOptions:
    extrapolation_samples: int | None = option(128, "samples per resolution inside bench run (none: all)",
                                               minimum=1, what="samples")


@register_analysis("extrapolation", order=40, options=ExtrapolationOptions)
class ExtrapolationAnalysis(Analysis):
    """The task's metric at other input resolutions (the run's extrapolation_resolutions, else the defaults)."""

    plot = ("extrapolation.png", plot_extrapolation)

    def run(self, ctx: AnalysisContext) -> list[dict[str, Any]]:
        resolutions = (list(ctx.config.get("extrapolation_resolutions") or [])
                       or ctx.hooks.default_resolutions(ctx.datamodule, ctx.task))
        return ctx.hooks.evaluate_extrapolation(ctx.task, ctx.datamodule, resolutions,
                                                max_samples=ctx.options["extrapolation_samples"])


@dataclass(frozen=True)
class ExtrapolationRulesOptions(ExtrapolationOptions):
    extrapolation_rules: str = option("all", "comma list of extrapolation rules to compare (the PE's --pe-option "
                                      "extrapolation choices, e.g. native,pi,yarn), or all")


def model_pe(task: Any) -> PositionalEncoding:
    """The positional encoding of ``task``'s backbone (its one :class:`PositionalEncoding` module)."""
    pes = [m for m in task.modules() if isinstance(m, PositionalEncoding)]
    if len(pes) != 1:
        raise ConfigError(f"expected one positional encoding in the model, found {len(pes)}")
    return pes[0]


def rules_to_compare(value: str, available: Sequence[str]) -> list[str]:
    """``extrapolation_rules`` (``all`` or a comma list) -> the rules, each one the PE declares (else ConfigError)."""
    items = [r.strip() for r in str(value).split(",") if r.strip()]
    if items == ["all"]:
        return list(available)
    bad = [r for r in items if r not in available]
    if bad or not items:
        raise ConfigError(f"extrapolation_rules: {bad[0] if bad else value!r} is not a rule of this PE; "
                          f"its rules: {', '.join(available)}")
    return list(dict.fromkeys(items))


def evaluate_extrapolation_rules(task: Any, datamodule: Any, resolutions: Sequence[str | int], rules: Sequence[str],
                                 evaluate: Callable[..., list[dict[str, Any]]] = evaluate_extrapolation,
                                 max_samples: int | None = None) -> dict[str, list[dict[str, Any]]]:
    """One trained model at each resolution under each extrapolation rule: ``{rule: rows}`` (rows as
    ``evaluate``, the task's extrapolation function, gives them); the PE's own rule is restored after."""
    pe = model_pe(task)
    out: dict[str, list[dict[str, Any]]] = {}
    for rule in rules:
        with set_extrapolation(pe, rule):
            out[rule] = evaluate(task, datamodule, resolutions, max_samples=max_samples)
    return out


@register_analysis("extrapolation-rules", key="extrapolation_rules", order=45, options=ExtrapolationRulesOptions,
                   in_all=False)
class ExtrapolationRulesAnalysis(Analysis):
    """The extrapolation resolutions under each extrapolation rule of the PE (pi, ntk, yarn, ...), one checkpoint."""

    @classmethod
    def applies(cls, pe: Any) -> str | None:
        if extrapolation_rules_of(pe):
            return None
        return "the PE has no extrapolation option (rope-axial and ape have one: see `bench list pes --options`)"

    def run(self, ctx: AnalysisContext) -> dict[str, list[dict[str, Any]]]:
        rules = rules_to_compare(ctx.options["extrapolation_rules"], extrapolation_rules_of(model_pe(ctx.task)))
        resolutions = (list(ctx.config.get("extrapolation_resolutions") or [])
                       or ctx.hooks.default_resolutions(ctx.datamodule, ctx.task))
        return evaluate_extrapolation_rules(ctx.task, ctx.datamodule, resolutions, rules,
                                            evaluate=ctx.hooks.evaluate_extrapolation,
                                            max_samples=ctx.options["extrapolation_samples"])
