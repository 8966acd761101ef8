pytest_plugins = ["mkg_core.testing"]
