"""pebench: a PyTorch Lightning benchmark suite for positional encodings in vision transformers."""
__version__ = "0.1.0"
