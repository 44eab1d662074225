"""Embedded synthetic datasets rendered on the fly (no data root): images, video, events and points.

``render`` holds the shared seeded dataset and the anti-aliased 2-D shape rendering.
"""
