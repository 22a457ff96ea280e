"""An envfactory plugin package whose hook lacks ``@envfactory.hookimpl`` (a test fixture)."""
