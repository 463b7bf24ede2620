"""Headless subcommands of ``pod-console``; each module registers its own parser."""
