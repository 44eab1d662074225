"""`bench list presets` says what each preset is: its task, dataset, model and schedule from its run options,
and its ``description`` / ``follows`` keys, which describe the preset and are not run options."""
from __future__ import annotations

import pytest
import yaml

from pebench.cli import main
from pebench.runner import config as run_config
from pebench.runner.config import PRESET_INFO_KEYS, ConfigError, list_presets, load_preset, merge, preset_info


def test_every_shipped_preset_says_what_it_is_and_what_it_follows():
    names = list_presets()
    assert names
    for name in names:
        info = preset_info(name)
        assert set(info) == set(PRESET_INFO_KEYS), name
        assert all(info[k] and "\n" not in info[k] for k in PRESET_INFO_KEYS), (name, info)
        assert not set(PRESET_INFO_KEYS) & set(load_preset(name)), name  # not run options


def test_list_presets_prints_each_presets_options_and_description(capsys):
    assert main(["list", "presets"]) == 0
    out = capsys.readouterr().out
    for name in list_presets():
        cfg, info = merge(load_preset(name)), preset_info(name)
        row = next(line for line in out.splitlines() if line.startswith(f"| {name} "))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[2:4] == [cfg.dataset, cfg.model] and cells[5] == f"{cfg.epochs} x {cfg.batch_size}", row
        assert f"\n{name}: {info['description']}\n    follows: {info['follows']}\n" in out + "\n"


@pytest.fixture()
def preset_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(run_config, "_preset_dir", lambda: tmp_path)
    return tmp_path


def test_the_description_keys_are_not_run_options_and_must_be_strings(preset_dir):
    (preset_dir / "mine.yaml").write_text(yaml.safe_dump({"description": "a test preset", "follows": "nothing",
                                                          "dataset": "shapes", "epochs": 2}), encoding="utf-8")
    assert load_preset("mine") == {"dataset": "shapes", "epochs": 2}
    assert preset_info("mine") == {"description": "a test preset", "follows": "nothing"}
    (preset_dir / "bare.yaml").write_text("dataset: shapes\n", encoding="utf-8")
    assert preset_info("bare") == {"description": "", "follows": ""}
    (preset_dir / "bad.yaml").write_text("description: [not, a, string]\ndataset: shapes\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="'description' must be a string"):
        preset_info("bad")
    (preset_dir / "typo.yaml").write_text("descriptoin: x\ndataset: shapes\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown key 'descriptoin'"):
        load_preset("typo")
