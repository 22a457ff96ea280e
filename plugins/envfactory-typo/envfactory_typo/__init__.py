"""An envfactory plugin with a misspelled hook name (a test fixture)."""
