"""The PE probe suite: embedded image, video and point-cloud probes of one PE property each.

``probe_scenes`` holds the shared glyph canvas and scene generator.
"""
