"""Real image datasets (classification and COCO-format detection) and the synthetic COCO-format set."""
