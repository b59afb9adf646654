"""The package version, in a leaf module so internals can read it without importing the package root."""

VERSION = "0.22.0"
