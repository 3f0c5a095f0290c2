"""tunebot: a git-native bot that tunes compute kernels one reviewable change at a time."""

__version__ = "0.1.0"
