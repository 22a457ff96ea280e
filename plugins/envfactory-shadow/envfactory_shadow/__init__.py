"""An envfactory plugin whose presets are named like built-ins (a test fixture)."""
