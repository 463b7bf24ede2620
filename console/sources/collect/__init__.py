"""Collectors: fetch and compute, return immutable snapshots. No Textual imports here."""
