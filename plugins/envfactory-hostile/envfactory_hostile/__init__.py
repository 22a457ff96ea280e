"""Deliberately hostile envfactory plugins (a test fixture)."""
