"""A deliberately broken envfactory plugin package (a test fixture)."""
