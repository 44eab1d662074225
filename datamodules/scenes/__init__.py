"""3-D scene segmentation datasets (real and synthetic) and their shared augmentation and collate."""
