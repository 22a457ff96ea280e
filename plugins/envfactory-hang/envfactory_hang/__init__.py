"""A deliberately slow envfactory plugin (a test fixture)."""
