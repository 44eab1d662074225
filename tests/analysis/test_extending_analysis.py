"""docs/extending.md's "An analysis" section, followed literally: its two files are written into a temporary
package, the analysis is found as a plugin (``PEBENCH_PLUGINS``), listed with its option, and the section's
own test is run."""
from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

import pebench.core.registry as core_registry
from pebench.analysis import registry

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "extending.md"
FILE_MARK = "# file: "


def section_files() -> dict[str, str]:
    text = GUIDE.read_text().split("## An analysis", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    return {b.split("\n", 1)[0][len(FILE_MARK):].strip(): b.split("\n", 1)[1] for b in blocks if b.startswith(FILE_MARK)}


@pytest.fixture
def plugin_package(tmp_path, monkeypatch):
    files = section_files()
    assert set(files) == {"my_pebench/token_norm.py", "my_pebench/test_token_norm.py"}
    for name, text in {"my_pebench/__init__.py": "", **files}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(core_registry.PLUGINS_ENV, "my_pebench.token_norm")
    # forget the plugin afterwards: the registry's entries and the loaded-plugin set are restored
    monkeypatch.setattr(registry._ANALYSES, "_entries", dict(registry._ANALYSES._entries))
    monkeypatch.setattr(registry._ANALYSES, "_order", dict(registry._ANALYSES._order))
    monkeypatch.setattr(core_registry, "_plugins_loaded", set(core_registry._plugins_loaded))
    yield tmp_path
    for mod in [m for m in sys.modules if m == "my_pebench" or m.startswith("my_pebench.")]:
        del sys.modules[mod]


def test_the_guide_analysis_is_a_plugin_with_declared_options_and_its_own_test_passes(plugin_package):
    assert "token-norm" in registry.list_analyses()  # imported through PEBENCH_PLUGINS
    assert registry.list_analyses()[-1] == "token-norm"  # order=100: after the built-in ones
    cls = registry.get_analysis("token-norm")
    assert cls.key == "token-norm" and cls.in_all is False
    assert registry.option_defaults()["token_norm_samples"] == 32
    with pytest.raises(Exception, match=r"token_norm_samples must be >= 1 \(.*\), got 0"):
        registry.check_analysis_options({"token_norm_samples": 0})
    test_module = importlib.import_module("my_pebench.test_token_norm")
    tests = [getattr(test_module, n) for n in dir(test_module) if n.startswith("test_")]
    assert len(tests) == 1
    tests[0]()  # the section's own test
