"""An envfactory plugin that clashes with a built-in name (a test fixture)."""
