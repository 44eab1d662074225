"""``bench card``: the analytic PE card reproduces known invariances and the model's attention."""
from __future__ import annotations

import math

import lightning
import pytest
import torch

from pebench.cli import main
from pebench.cli.commands.card import CARD_COLUMNS, block_logits, card_rows, pe_card
from pebench.models import build_backbone
from pebench.tasks.classification import ClassificationTask

GRID, SAMPLES = 4, 2  # small: every column is defined at G = 4 (2G = 8 grid, distances up to 9.9)
TOL = 1e-5


def _card(pe: str) -> dict[str, float]:
    torch.manual_seed(0)
    return pe_card(build_backbone("vit-nano", pe=pe, spatial_dims=2, grid=(GRID, GRID)).eval(),
                   grid=GRID, samples=SAMPLES)


@pytest.fixture(scope="module")
def cards() -> dict[str, dict[str, float]]:
    return {pe: _card(pe) for pe in ("none", "ape", "sincos", "rope-axial", "alibi", "pape-ri", "lookhere", "pape",
                                     "liere", "comrope", "string")}


def test_none_is_neutral(cards):
    c = cards["none"]
    for col in ("shift", "rot90", "mirror", "|L| <G", "|L| >=G"):
        assert c[col] == pytest.approx(0.0, abs=1e-6), col
    for col in ("att d=0", "att <=1.5", "att <=3", "att <=6", "att >=G"):
        assert c[col] == pytest.approx(1.0, abs=1e-5), col
    assert math.isnan(c["att >6"])  # a 4 x 4 grid has no pair farther apart than 4.3


def test_relative_pes_are_shift_invariant_absolute_ones_not(cards):
    for pe in ("rope-axial", "alibi", "pape-ri", "lookhere", "pape", "comrope", "string"):
        assert cards[pe]["shift"] < TOL, pe
    for pe in ("ape", "sincos", "liere"):  # liere: non-commuting generators, not exactly relative
        assert cards[pe]["shift"] > 1e-2, pe


def test_rotation_and_mirror_invariance(cards):
    for pe in ("alibi", "pape-ri"):  # Euclidean distance only
        assert cards[pe]["rot90"] < TOL and cards[pe]["mirror"] < TOL, pe
    for pe in ("rope-axial", "lookhere", "sincos", "pape", "liere", "comrope", "string"):  # axis- or direction-dependent
        assert cards[pe]["rot90"] > 1e-2 and cards[pe]["mirror"] > 1e-2, pe


def test_distance_decay(cards):
    # ALiBi and LookHere penalise distance: more mass near the query than far away; beyond the grid
    # their positional logits differ from within it, while none has no positional logits at all
    for pe in ("alibi", "lookhere"):
        c = cards[pe]
        assert c["att d=0"] > 1.0 > c["att <=6"], pe
        assert c["att >=G"] < 1.0
    assert cards["rope-axial"]["|L| >=G"] > 0


@pytest.mark.parametrize("pe", ["none", "ape", "rope-axial", "lookhere", "pape"])
def test_block_logits_are_the_models_attention(pe):
    """softmax(block_logits) @ v through proj equals the block's own attention output."""
    torch.manual_seed(1)
    bb = build_backbone("vit-nano", pe=pe, spatial_dims=2, grid=(GRID, GRID)).eval()
    ys, xs = torch.meshgrid(torch.arange(GRID), torch.arange(GRID), indexing="ij")
    coords = torch.stack([ys.flatten(), xs.flatten()], -1).float()  # (N, 2)
    x = torch.randn(2, GRID * GRID, bb.embed_dim) * 0.5
    with torch.no_grad():
        for i in (0, bb.depth - 1):
            blk = bb.blocks[i]
            h = blk.norm1(bb.pe.encode_tokens(x, coords, (GRID, GRID)))
            B, N, D = h.shape
            H = blk.attn.num_heads
            v = blk.attn.qkv(h).reshape(B, N, 3, H, D // H)[:, :, 2].transpose(1, 2)  # (B, H, N, d)
            att = block_logits(bb, i, x, coords, (GRID, GRID)).softmax(-1)  # (B, H, N, N)
            ref = blk.attn.proj((att @ v).transpose(1, 2).reshape(B, N, D))
            out = blk.attn(h, coords, bb.pe.layer(i))
            torch.testing.assert_close(ref, out, atol=1e-5, rtol=1e-4)


def test_checkpoint_card_matches_its_backbone(tmp_path):
    torch.manual_seed(2)
    task = ClassificationTask(modality="image", num_classes=4, pe="rope-axial", patch_size=4,
                              train_grid=(GRID, GRID))
    path = tmp_path / "last.ckpt"
    torch.save({"state_dict": task.state_dict(), "hyper_parameters": dict(task.hparams),
                "pytorch-lightning_version": lightning.__version__}, path)
    (label, card), = card_rows([], grid=GRID, samples=SAMPLES, checkpoint=str(path))
    assert label == "rope-axial (checkpoint)"
    ref = pe_card(task.backbone.eval(), grid=GRID, samples=SAMPLES)
    assert card == pytest.approx(ref, nan_ok=True)


def test_cli_table_and_errors(capsys, tmp_path):
    assert main(["card", "--pe", "none,alibi", "--grid", "4", "--samples", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("| PE | ") and all(c.replace("|", "\\|") in out[0] for c in CARD_COLUMNS)  # `|L|` escaped
    assert [line.split("|")[1].strip() for line in out[2:]] == ["none", "alibi"]
    for argv, msg in ((["card", "--pe", "nope"], "unknown PE"), (["card", "--grid", "3"], "--grid"),
                      (["card", "--checkpoint", str(tmp_path / "missing.ckpt")], "does not exist")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("bench: error:") and msg in err and len(err.strip().splitlines()) == 1


def test_the_card_table_in_the_cli_docs_is_the_commands_output():
    """docs/cli.md shows `bench card`'s table: one row per image PE, each row what card_rows + format_card
    print (recomputed here for the cheap PEs; every PE's row is independent of the others)."""
    from pathlib import Path

    from pebench.cli.commands.card import format_card
    from pebench.encodings import get_pe_class, list_pes

    doc = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    start = doc.index("| PE | shift |")
    table = doc[start:doc.index("\n\n", start)].splitlines()
    rows = {line.split("|")[1].strip(): line for line in table[2:]}
    assert list(rows) == [p for p in list_pes() if "image" in get_pe_class(p).modalities]
    subset = ["none", "alibi", "pape-ri", "cpe"]
    fresh = format_card(card_rows(subset)).splitlines()
    assert table[:2] == fresh[:2] and [rows[pe] for pe in subset] == fresh[2:]
