"""An example envfactory plugin package (see ``envfactory_example.plugin``)."""

__version__ = "0.2.0"
