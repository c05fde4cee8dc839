"""Typed inputs: units, presets, the cluster, model, training and layout models, and the coercion
of what callers pass (objects, dicts, preset names) into them. Units stop here: everything above
this package reads canonical plain numbers."""
