"""``bench list [datasets|pes|models|presets|analyses|tasks|all] [--options]``: what the registries and the
shipped presets hold (``presets`` reads only the YAML files: no registry, no torch)."""
from __future__ import annotations

import argparse
from typing import Any

from pebench.core.options import format_value
from pebench.leaderboard.summary import format_table
from pebench.runner.config import list_presets, load_preset, merge, preset_info
from pebench.tasks import get_task_setup, list_tasks

__all__ = ["cmd_list", "analyses_listing", "presets_listing", "option_rows"]


def option_rows(owner: str, options: list[dict[str, Any]]) -> list[list[str]]:
    """Rows of a ``bench list --options`` table from :meth:`~pebench.core.options.Option.describe` dicts."""
    return [[owner, o["key"], o["type"] + (f" {{{', '.join(map(str, o['choices']))}}}" if o.get("choices") else ""),
             format_value(o["default"]), o["help"]] for o in options]


def cmd_list(args: argparse.Namespace) -> int:
    what = args.what
    if what == "presets":  # YAML files only: no registry, no torch
        print(presets_listing())
        return 0
    from pebench.datamodules import (  # deferred: start-up time (torch)
        MODALITIES,
        data_options,
        get_datamodule_class,
        list_datamodules,
    )
    from pebench.encodings import get_pe_class, list_pes, pe_options  # deferred: start-up time (torch)
    from pebench.models import list_models, model_config  # deferred: start-up time (torch)
    from pebench.runner.run import load_registries  # deferred: start-up time (torch, Lightning)

    load_registries()
    if what in ("datasets", "all"):
        rows = []

        def listing_order(name: str) -> tuple:  # embedded sets first, then real ones; by modality, then name
            c = get_datamodule_class(name)
            return c.needs_data_root, MODALITIES.index(c.modality) if c.modality in MODALITIES else 99, name

        for name in sorted(list_datamodules(), key=listing_order):
            c = get_datamodule_class(name)
            synthetic = "(synthetic, generated on the fly)"
            if callable(getattr(c, "no_pe_bound", None)):  # probes: the exact no-PE ceiling of the test split
                synthetic = f"(synthetic probe; no-PE ceiling {100 * c.no_pe_bound():.1f} %)"
            rows.append([name, c.modality, "yes" if c.needs_data_root else "no",
                         c.expected_layout if c.needs_data_root else synthetic])
        print("datasets\n" + format_table(["name", "modality", "--data-root", "expected layout"], rows))
        from pebench.cli.docs import sources_listing  # deferred: it imports the registries (torch)

        print(sources_listing())
        if getattr(args, "options", False):
            rows = [r for name in list_datamodules()
                    for r in option_rows(name, [o.describe() for o in data_options(get_datamodule_class(name))])]
            print("dataset options (bench run --data-option KEY=VALUE; read from each datamodule's constructor)\n"
                  + format_table(["dataset", "key", "type", "default", "meaning"], rows))
    if what in ("pes", "all"):
        # "token sets": whether the PE applies to tokens without a shared grid (the probe-set-* datasets)
        rows = [[n, ", ".join(c.modalities), "yes" if c.additive else "no", "no" if c.needs_grid else "yes"]
                for n, c in ((n, get_pe_class(n)) for n in list_pes())]
        print("positional encodings\n" + format_table(["name", "modalities", "additive", "token sets"], rows))
        if getattr(args, "options", False):
            rows = [r for n in list_pes() for r in option_rows(n, pe_options(n))]
            print("PE options (bench run --pe-option KEY=VALUE; the declarations build_pe validates against)\n"
                  + format_table(["pe", "key", "type", "default", "meaning"], rows))
    if what in ("models", "all"):
        rows = [[n, c.embed_dim, c.depth, c.num_heads, c.embed_dim // c.num_heads] for n, c in ((n, model_config(n)) for n in list_models())]
        print("models\n" + format_table(["name", "dim", "depth", "heads", "head dim"], rows))
    if what in ("presets", "all"):
        print(presets_listing())
    if what in ("analyses", "all"):
        print(analyses_listing(getattr(args, "options", False)))
    if what in ("tasks", "all"):
        setups = {n: get_task_setup(n) for n in list_tasks()}
        rows = [[n, ", ".join(s.accepts), ", ".join(s.modalities or ("any",)), str(len(s.options))]
                for n, s in setups.items()]
        print("tasks (bench run --task NAME)\n" + format_table(["name", "label kinds", "modalities", "options"], rows))
        if getattr(args, "options", False):
            rows = [r for n, s in setups.items() for r in option_rows(n, [o.describe() for o in s.options])]
            print("task options (bench run --task-option KEY=VALUE; each task's TaskSetup.options)\n"
                  + format_table(["task", "key", "type", "default", "meaning"], rows))
    return 0


def analyses_listing(options: bool = False) -> str:
    """``bench list analyses``: each registered analysis, its results.json key, whether ``--analyses all`` runs
    it and what it measures; with ``--options`` every ``--analysis-option`` key (from the declarations)."""
    from pebench.analysis.registry import describe_analyses  # deferred: start-up time (torch)

    described = describe_analyses()
    rows = [[a["name"], a["key"], "yes" if a["in_all"] else "when named", a["what"]] for a in described]
    out = "analyses (bench run --analyses NAME,...)\n" + format_table(["name", "results.json key", "in all", "what"], rows)
    if options:
        rows = [r for a in described for r in option_rows(a["name"], a["options"])]
        out += ("\nanalysis options (bench run --analysis-option KEY=VALUE; each analysis' own declaration)\n"
                + format_table(["analysis", "key", "type", "default", "meaning"], rows))
    return out


def presets_listing() -> str:
    """``bench list presets``: each preset's task, dataset, model and schedule (from its run options), then
    what it is and which published setting it follows (its ``description`` and ``follows`` keys)."""
    names = list_presets()
    if not names:
        return "presets (bench run --preset NAME)\n(none installed)"
    rows, about = [], []
    for name in names:
        cfg, info = merge(load_preset(name)), preset_info(name)
        rows.append([name, cfg.task or "(the dataset's)", cfg.dataset, cfg.model, str(cfg.resolution or "default"),
                     f"{cfg.epochs} x {cfg.batch_size}", format_value(cfg.lr), cfg.precision])
        about.append(f"{name}: {info['description'] or '(no description)'}\n    follows: {info['follows'] or '(not said)'}")
    return ("presets (bench run --preset NAME; every option of one: bench run --preset NAME --print-config)\n"
            + format_table(["name", "task", "dataset", "model", "resolution", "epochs x batch", "lr", "precision"], rows)
            + "\n" + "\n".join(about))
