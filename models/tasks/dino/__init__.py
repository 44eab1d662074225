"""The ``dino`` task: self-supervised DINO pre-training (Caron et al., ICCV 2021) of any PE.

* :mod:`.module`: :class:`DinoTask` (student / teacher, the LightningModule);
* :mod:`.head`: the projection head, loss, centring and EMA (:class:`DINOHead`, :func:`dino_loss`);
* :mod:`.knn`: the k-NN and linear-probe evaluation;
* :mod:`.multicrop`: the multi-crop views around a dataset's datamodule (:class:`DinoDataModule`);
* :mod:`.setup`: ``bench run --task dino`` (:class:`DinoSetup`, registered on import).
"""
from .head import DINOHead, dino_loss
from .module import DinoTask
from .multicrop import DinoDataModule
from .setup import DINO_OPTIONS, DinoSetup

__all__ = ["DINOHead", "dino_loss", "DinoTask", "DinoDataModule", "DINO_OPTIONS", "DinoSetup"]
