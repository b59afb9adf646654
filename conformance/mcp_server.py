"""Placeholder: the mcp_server conformance runner is being written (see Makefile 'conformance')."""
import sys

sys.exit("conformance/mcp_server.py: not written yet")
