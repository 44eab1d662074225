"""Event-camera datasets (classification and detection), the Prophesee .dat reader and event tokens."""
