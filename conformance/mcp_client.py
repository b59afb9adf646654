"""Placeholder: the mcp_client conformance runner is being written (see Makefile 'conformance')."""
import sys

sys.exit("conformance/mcp_client.py: not written yet")
