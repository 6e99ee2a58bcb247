"""The package version (one place: ``jaxrank.__version__`` and the model files' metadata)."""

__version__ = "0.1.0"
