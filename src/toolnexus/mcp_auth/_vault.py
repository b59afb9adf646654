"""`TokenVault`: OAuth secrets kept as encrypted records, in a durable store or in memory.

What is kept, per account and MCP server: the tokens (access, refresh, expiry, scope), the client
registration (its secret included) and the authorization server's token endpoint; and per
sign-in in progress, its PKCE verifier and the rest of what turning the code into tokens needs.
Any process sharing the store can finish a sign-in another process started, and refresh tokens
another process obtained.

Encryption: AES-256-GCM (`cryptography`, which the `mcp` SDK already depends on) with a random
96-bit nonce per write and the record's namespace and key as associated data, so a ciphertext
moved to another record does not decrypt. The key is the host's: 32 bytes, or their url-safe
base64 / hex text (`new_token_key()` makes one). A list of keys rotates: the first encrypts,
any decrypts (each record names its key by a short fingerprint). Record keys are SHA-256 digests
of (account, server URL) — the store never shows which servers an account uses. A record that
does not decrypt (a wrong key, a tampered row) reads as absent, with one warning: a sign-in is
asked for again, nothing crashes.

Without a store the vault is this process's memory (nothing to encrypt against: nothing leaves
the process). The vault never logs, prints or puts a secret into an exception.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import secrets
from collections.abc import Sequence
from typing import Any, Optional, Union

from .._diag import warn_once
from ..errors import ConfigError

KeyArg = Union[str, bytes, Sequence[Union[str, bytes]], None]
NAMESPACE_TOKENS = "toolnexus.mcp-oauth"
NAMESPACE_FLOWS = "toolnexus.mcp-oauth-flow"
_VERSION = 1


def new_token_key() -> str:
    """A fresh key for `OAuthOptions(key=...)`: 32 random bytes as url-safe base64 text."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii")


def _one_key(value: Union[str, bytes]) -> bytes:
    if isinstance(value, bytes):
        raw = value
    elif isinstance(value, str):
        text = value.strip()
        raw = b""
        for decode in (lambda t: base64.urlsafe_b64decode(t + "=" * (-len(t) % 4)), bytes.fromhex):
            try:
                raw = decode(text)
            except (ValueError, binascii.Error):
                continue
            if len(raw) == 32:
                break
    else:
        raise ConfigError(f"toolnexus: an OAuth token key must be bytes or text, got {type(value).__name__}")
    if len(raw) != 32:
        raise ConfigError("toolnexus: an OAuth token key must be 32 bytes (or their base64 / hex text); make one with "
                          "toolnexus.mcp_auth.new_token_key()")
    return raw


def parse_keys(key: KeyArg) -> list[bytes]:
    """`key` as a list of 32-byte keys (the first encrypts); [] for None."""
    if key is None:
        return []
    if isinstance(key, (str, bytes)):
        return [_one_key(key)]
    keys = [_one_key(k) for k in key]
    if not keys:
        raise ConfigError("toolnexus: OAuth token keys: the list is empty")
    return keys


def _fingerprint(key: bytes) -> str:
    return hashlib.sha256(b"toolnexus-token-key" + key).hexdigest()[:12]


def record_key(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


class TokenVault:
    """Encrypted JSON records in a `RunStore`'s plain records (`store=None`: this process's memory)."""

    def __init__(self, store: Any = None, key: KeyArg = None) -> None:
        self.store = store
        self._keys = parse_keys(key)
        if store is not None and not self._keys:
            raise ConfigError("toolnexus: OAuth tokens kept in a store need a key: OAuthOptions(store=..., key=...) "
                              "with 32 random bytes, e.g. toolnexus.mcp_auth.new_token_key() kept in your secrets")
        self._memory: dict[tuple[str, str], dict[str, Any]] = {}

    def __repr__(self) -> str:
        where = "memory" if self.store is None else type(self.store).__name__
        return f"TokenVault({where}, keys={len(self._keys)})"

    @property
    def durable(self) -> bool:
        return self.store is not None

    async def get(self, namespace: str, key: str) -> Optional[dict[str, Any]]:
        if self.store is None:
            found = self._memory.get((namespace, key))
            return json.loads(json.dumps(found)) if found is not None else None
        sealed = await self.store.get_record(namespace, key)
        if not sealed or sealed.get("gone"):
            return None
        return self._open(namespace, key, sealed)

    async def put(self, namespace: str, key: str, value: dict[str, Any]) -> None:
        if self.store is None:
            self._memory[(namespace, key)] = json.loads(json.dumps(value))
            return
        await self.store.put_record(namespace, key, self._seal(namespace, key, value))

    async def drop(self, namespace: str, key: str) -> None:
        """Forget a record (stores have no delete: the record becomes an empty tombstone)."""
        if self.store is None:
            self._memory.pop((namespace, key), None)
            return
        await self.store.put_record(namespace, key, {"v": _VERSION, "gone": True})

    # -- sealing -----------------------------------------------------------------------------------

    def _seal(self, namespace: str, key: str, value: dict[str, Any]) -> dict[str, Any]:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = secrets.token_bytes(12)
        plain = json.dumps(value, separators=(",", ":")).encode("utf-8")
        sealed = AESGCM(self._keys[0]).encrypt(nonce, plain, f"{namespace}\x1f{key}".encode())
        return {"v": _VERSION, "alg": "A256GCM", "kid": _fingerprint(self._keys[0]),
                "n": base64.b64encode(nonce).decode("ascii"), "ct": base64.b64encode(sealed).decode("ascii")}

    def _open(self, namespace: str, key: str, sealed: dict[str, Any]) -> Optional[dict[str, Any]]:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        kid = sealed.get("kid")
        candidates = [k for k in self._keys if _fingerprint(k) == kid] or list(self._keys)
        try:
            nonce = base64.b64decode(str(sealed.get("n")))
            data = base64.b64decode(str(sealed.get("ct")))
        except (ValueError, binascii.Error):
            candidates = []
        for candidate in candidates:
            try:
                plain = AESGCM(candidate).decrypt(nonce, data, f"{namespace}\x1f{key}".encode())
            except (InvalidTag, ValueError):
                continue
            value = json.loads(plain)
            return value if isinstance(value, dict) else None
        warn_once(f"vault:{kid}", "[toolnexus] an OAuth record in the store does not decrypt with the key given (a "
                                  "different key, or a damaged row): it is ignored and a sign-in will be asked for")
        return None
