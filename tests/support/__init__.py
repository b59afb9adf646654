"""Test helpers shared by several test modules (real servers, fixtures)."""
