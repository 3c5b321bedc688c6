#!/usr/bin/env python3
"""Check a baton cluster's leader announcements from outside Go.

A reader of docs/protocol.md ("A client in another language") in Python:
it speaks the NATS text protocol over a plain socket (no NATS client
library), reads the cluster's members file with its statements, and
believes a leader only if the announcement is signed by the leader it
names, is of the cluster and algorithm the members file states, and, in a
byzantine cluster, carries a certificate of a quorum of the members that
holds. Its only dependency is PyNaCl (Debian: python3-nacl).

    baton_verify.py --keys members.keys query
    baton_verify.py --keys members.keys last
    baton_verify.py --keys members.keys watch --count 3

A cluster of member credentials (dynamic membership) has no members file:
its reader holds the authority's public keys, and knows its cluster and
algorithm from its own configuration. Each announcement then carries the
signer's credential (Election-Credential, a NATS user JWT), which is
checked as docs/protocol.md ("Member credentials") lists before the
signature is checked with the key it binds:

    baton_verify.py --authority A... --cluster orders --algorithm bully query

query asks election.<cluster>.query (the leader answers); last reads the
last announcement kept by the JetStream stream that captures
election.<cluster>.leader; watch subscribes to election.<cluster>.leader
and checks each announcement as it arrives. Each announcement read is
reported as one JSON line on stdout, with "verdict" "verified" or
"refused" (and the reason) and the SHA-256 of the payload; "none" when
nothing answered. watch first
prints {"event": "subscribed"} once its subscription is in place, then
judges each announcement on its own: an application that follows the
leader keeps the highest term it believed and ignores the others.

Exit status: 0 when every announcement read was verified, 1 when one was
refused, 3 when nothing answered (no leader, an empty stream, a time-out),
2 for a bad command line, members file or authority, or without PyNaCl, 4 when the server cannot be
reached or refuses the connection.
"""

import argparse
import base64
import hashlib
import json
import os
import re
import secrets
import socket
import sys
import time
import urllib.parse

try:
    import nacl.exceptions
    import nacl.signing
except ImportError:
    print("baton_verify: needs PyNaCl: apt-get install python3-nacl, or pip install pynacl", file=sys.stderr)
    sys.exit(2)

# --- the members file and nkeys public keys -------------------------------

ALGORITHMS = ("bully", "ring", "paxos", "byzantine")
STATEMENT_PREFIX = "#:"
MAX_MEMBERS = 1024  # signing.MaxMemberKeys
CLUSTER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
DECIMAL = re.compile(r"^[0-9]+$")
PREFIX_BYTE_USER = 20 << 3  # nkeys: base32-encodes to "U"
PREFIX_BYTE_ACCOUNT = 0 << 3  # nkeys: base32-encodes to "A"


class Refused(Exception):
    """An announcement that must not be believed."""


class ConfigError(Exception):
    """A bad command line or members file."""


def crc16_xmodem(data: bytes) -> int:
    """CRC-16/XMODEM: polynomial 0x1021, initial value 0, no reflection."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def raw_public_key(nkey: str, prefix: int, kind: str) -> bytes:
    """The 32-byte Ed25519 key of a public nkey of the kind whose prefix
    byte is prefix, checked: 56 characters of base32, the CRC16, the
    prefix byte."""
    if not isinstance(nkey, str) or len(nkey) != 56 or not re.fullmatch(r"[A-Z2-7]+", nkey):
        raise ValueError("not 56 characters of base32")
    decoded = base64.b32decode(nkey)  # 56 characters: no padding needed
    body, checksum = decoded[:-2], decoded[-2:]
    if crc16_xmodem(body) != int.from_bytes(checksum, "little"):
        raise ValueError("its CRC16 does not match")
    if body[0] != prefix:
        raise ValueError("not %s (prefix byte %#x)" % (kind, body[0]))
    return body[1:33]


def raw_user_key(nkey: str) -> bytes:
    """The 32-byte Ed25519 key of a public user nkey ("U..."), checked."""
    return raw_public_key(nkey, PREFIX_BYTE_USER, "a user key")


def raw_account_key(nkey: str) -> bytes:
    """The 32-byte Ed25519 key of a public account nkey ("A..."), checked."""
    return raw_public_key(nkey, PREFIX_BYTE_ACCOUNT, "an account key")


class Members:
    """A members file: ID -> verify key, and what it states."""

    certificates = True  # the members a certificate's quorum counts

    def __init__(self, keys, cluster, algorithm):
        self.keys = keys
        self.cluster = cluster
        self.algorithm = algorithm

    def signer(self, subject: str, payload: bytes, headers: dict) -> int:
        return check_signature(self, subject, payload, headers)

    @classmethod
    def parse(cls, text: str) -> "Members":
        keys, seen, cluster, algorithm = {}, {}, "", ""
        for number, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            where = "line %d" % number
            if line.startswith(STATEMENT_PREFIX):
                fields = line[len(STATEMENT_PREFIX):].split()
                if len(fields) != 2:
                    raise ConfigError('%s: want "#: cluster <name>" or "#: algorithm <name>"' % where)
                if fields[0] == "cluster":
                    if cluster:
                        raise ConfigError("%s: the cluster is stated twice" % where)
                    if not CLUSTER_NAME.match(fields[1]):
                        raise ConfigError("%s: cluster name %r" % (where, fields[1]))
                    cluster = fields[1]
                elif fields[0] == "algorithm":
                    if algorithm:
                        raise ConfigError("%s: the algorithm is stated twice" % where)
                    if fields[1] not in ALGORITHMS:
                        raise ConfigError("%s: unknown algorithm %r" % (where, fields[1]))
                    algorithm = fields[1]
                else:
                    raise ConfigError("%s: unknown statement %r" % (where, fields[0]))
                continue
            if not line or line.startswith("#"):
                continue
            fields = line.split()
            if len(fields) != 2:
                raise ConfigError('%s: want "<ID> <public key>"' % where)
            if not DECIMAL.match(fields[0]) or not 1 <= int(fields[0]) < 1 << 64:
                raise ConfigError("%s: %r is not a positive integer ID" % (where, fields[0]))
            member = int(fields[0])
            if member in keys:
                raise ConfigError("%s: member %d twice" % (where, member))
            if fields[1] in seen:
                raise ConfigError("%s: member %d has the key of member %d" % (where, member, seen[fields[1]]))
            if len(keys) == MAX_MEMBERS:
                raise ConfigError("%s: more than %d members" % (where, MAX_MEMBERS))
            try:
                keys[member] = nacl.signing.VerifyKey(raw_user_key(fields[1]))
            except ValueError as e:
                raise ConfigError("%s: member %d: %s" % (where, member, e)) from None
            seen[fields[1]] = member
        if not keys:
            raise ConfigError("no member listed")
        return cls(keys, cluster, algorithm)


# --- announcements, signatures, certificates ------------------------------

MAX_PAYLOAD = 1024  # protocol.MaxPayload
MAX_CERTIFICATE_JSON = 32 << 10  # certify.MaxJSONSize
MAX_ANNOUNCEMENT = MAX_PAYLOAD + MAX_CERTIFICATE_JSON
MAX_TERM = 1 << 62  # protocol.MaxTerm
MAX_CERT_MEMBERS = 128  # certify.MaxMembers
CERTIFY_PREFIX = b"baton-certify-v1"
KIND_VOTE = 1
RFC3339 = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def no_duplicates(pairs):
    """A JSON object that names no field twice, nor a field in two cases."""
    seen = set()
    for name, _ in pairs:
        if name.lower() in seen:
            raise Refused("the field %r appears twice (in some case)" % name)
        seen.add(name.lower())
    return dict(pairs)


def is_uint(value, low, high):
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def check_signature(members: Members, subject: str, payload: bytes, headers: dict) -> int:
    """The signer's ID, if Election-Signature is its signature of
    subject, a zero byte and the raw payload."""
    if "Election-Signer" not in headers or "Election-Signature" not in headers:
        raise Refused("not signed")
    signer, signature = headers["Election-Signer"], headers["Election-Signature"]
    if signer is None or signature is None:
        raise Refused("a signature header given twice")
    if not DECIMAL.match(signer) or int(signer) not in members.keys:
        raise Refused("signer %.20r is not a member" % signer)
    raw = signature_bytes(signature)
    try:
        members.keys[int(signer)].verify(subject.encode() + b"\x00" + payload, raw)
    except nacl.exceptions.BadSignatureError:
        raise Refused("the signature is not member %s's" % signer) from None
    return int(signer)


def signature_bytes(signature) -> bytes:
    """The 64 bytes of an Election-Signature: 86 characters of base64url
    without padding."""
    if len(signature) != 86 or not re.fullmatch(r"[A-Za-z0-9_-]+", signature):
        raise Refused("the signature is not 86 characters of base64url")
    return base64.urlsafe_b64decode(signature + "==")


# --- member credentials (dynamic membership) -------------------------------

MAX_CREDENTIAL = 4096  # protocol.MaxCredentialSize, membercreds.MaxTokenSize
MAX_MEMBER_ID = 1 << 16  # protocol.MaxMemberID: dynamic members are 1 to 65536
CREDENTIAL_NAME_PREFIX = "baton"
CLUSTER_TAG = "baton-cluster:"
ID_TAG = "baton-id:"
BASE64URL = re.compile(r"[A-Za-z0-9_-]*")  # fullmatch: no newline at the end
NO_LEADING_ZERO = re.compile(r"[1-9][0-9]*")


def unpadded_base64url(part: str, what: str) -> bytes:
    """The bytes of base64url without padding (RFC 4648 section 5), as
    Go's base64.RawURLEncoding reads them."""
    if not BASE64URL.fullmatch(part) or len(part) % 4 == 1:
        raise Refused("credential: the %s is not base64url without padding" % what)
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def json_object(data: bytes, what: str) -> dict:
    try:
        value = json.loads(data, object_pairs_hook=no_duplicates)
    except (ValueError, UnicodeDecodeError) as e:
        raise Refused("credential: the %s is not JSON: %s" % (what, e)) from None
    except Refused as e:  # a field twice: Go's decoder would keep the last
        raise Refused("credential: the %s: %s" % (what, e)) from None
    if not isinstance(value, dict):
        raise Refused("credential: the %s is not a JSON object" % what)
    return value


class Authority:
    """The reader of a cluster of member credentials: the authority's
    account keys (A...) and the reader's own cluster, from its
    configuration. Each member's key comes from the credential its
    messages carry."""

    certificates = False  # no members file: nothing to count a quorum of

    def __init__(self, authorities, cluster):
        self.authorities = authorities  # public key -> verify key
        self.cluster = cluster

    @classmethod
    def parse(cls, text: str, cluster: str) -> "Authority":
        """--authority: the authority's public account keys (A...), and
        its signing keys if it issues with them, comma-separated."""
        if not CLUSTER_NAME.fullmatch(cluster):
            raise ConfigError("--authority needs --cluster: the name of the reader's cluster, [A-Za-z0-9_-]+")
        authorities = {}
        for raw in text.split(","):
            key = raw.strip()
            if key in authorities:
                raise ConfigError("--authority: %s is listed twice" % key)
            try:
                authorities[key] = nacl.signing.VerifyKey(raw_account_key(key))
            except ValueError as e:
                raise ConfigError("--authority %.60r: %s, want an account public key (A...)" % (key, e)) from None
        return cls(authorities, cluster)

    def credential(self, token, now: float):
        """(ID, verify key of sub) of a member credential that holds:
        docs/protocol.md, "Member credentials", checks 1 to 5."""
        # 1. The JWT: its size, header, claims and the issuer's signature.
        if len(token) > MAX_CREDENTIAL:
            raise Refused("credential: %d bytes, at most %d" % (len(token), MAX_CREDENTIAL))
        if not token.isascii():
            raise Refused("credential: not ASCII")
        parts = token.split(".")
        if len(parts) != 3:
            raise Refused("credential: not a JWT (header.claims.signature)")
        header = json_object(unpadded_base64url(parts[0], "header"), "header")
        if header.get("typ") != "JWT" or header.get("alg") != "ed25519-nkey":
            raise Refused("credential: header typ %.20r alg %.20r, want JWT and ed25519-nkey"
                          % (header.get("typ"), header.get("alg")))
        claims = json_object(unpadded_base64url(parts[1], "claims"), "claims")
        nats = claims.get("nats")
        if not isinstance(nats, dict) or not is_uint(nats.get("version"), 2, 2):
            raise Refused("credential: claims of version %.20r, want nats.version 2"
                          % (nats.get("version") if isinstance(nats, dict) else None,))
        signature = unpadded_base64url(parts[2], "signature")
        if len(signature) != 64:
            raise Refused("credential: a signature of %d bytes, want 64" % len(signature))
        # 2. Its issuer is the authority (or one of its signing keys), and
        # so is the account a signing key issues for.
        issuer = claims.get("iss")
        if not isinstance(issuer, str) or issuer not in self.authorities:
            raise Refused("credential: iss %.60r is not an authority of the cluster" % (issuer,))
        try:
            self.authorities[issuer].verify((parts[0] + "." + parts[1]).encode(), signature)
        except nacl.exceptions.BadSignatureError:
            raise Refused("credential: its signature is not that of its iss %s" % issuer) from None
        account = nats.get("issuer_account")
        if account is not None and account != "" and account not in self.authorities:
            raise Refused("credential: nats.issuer_account %.60r is not an authority of the cluster" % (account,))
        # 3. A user credential, of a user key, not a bearer token.
        if nats.get("type") != "user":
            raise Refused("credential: nats.type %.20r, want user" % (nats.get("type"),))
        try:
            key = nacl.signing.VerifyKey(raw_user_key(claims.get("sub")))
        except ValueError as e:
            raise Refused("credential: sub %.60r is %s, want a user public key (U...)" % (claims.get("sub"), e)) from None
        bearer = nats.get("bearer_token", False)
        if bearer is None:  # JSON null: false, as Go reads it
            bearer = False
        if not isinstance(bearer, bool):
            raise Refused("credential: nats.bearer_token %.20r is not true or false" % (bearer,))
        if bearer:
            raise Refused("credential: a bearer token, which proves nothing of its holder")
        # 4. Valid now (seconds since the Unix epoch; 0, null or absent:
        # no bound).
        bounds = {}
        for field in ("nbf", "exp"):
            value = claims.get(field)
            if value is None:
                value = 0
            if not isinstance(value, int) or isinstance(value, bool) or not -(1 << 63) <= value < 1 << 63:
                raise Refused("credential: %s %.30r is not a 64-bit integer" % (field, value))
            bounds[field] = value
        if bounds["nbf"] > 0 and now < bounds["nbf"]:
            raise Refused("credential: not valid before %d (nbf)" % bounds["nbf"])
        if bounds["exp"] > 0 and now >= bounds["exp"]:
            raise Refused("credential: expired at %d (exp)" % bounds["exp"])
        # 5. "baton <cluster> <id>": the reader's cluster, exactly, and an
        # ID of 1 to 65536 without leading zeros; the tags agree.
        name = claims.get("name")
        fields = name.split(" ") if isinstance(name, str) else []
        if len(fields) != 3 or fields[0] != CREDENTIAL_NAME_PREFIX:
            raise Refused("credential: name %.80r is not \"baton <cluster> <id>\"" % (name,))
        if fields[1] != self.cluster:
            raise Refused("credential: name %.80r: a member of cluster %.40r, not %r" % (name, fields[1], self.cluster))
        if not NO_LEADING_ZERO.fullmatch(fields[2]) or not 1 <= int(fields[2]) <= MAX_MEMBER_ID:
            raise Refused("credential: name %.80r: the ID is not 1 to %d in decimal" % (name, MAX_MEMBER_ID))
        member = int(fields[2])
        tags = nats.get("tags", [])
        if tags is None:
            tags = []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise Refused("credential: nats.tags is not a list of strings")
        for prefix, want in ((CLUSTER_TAG, CLUSTER_TAG + self.cluster.lower()), (ID_TAG, ID_TAG + fields[2])):
            found = [t for t in tags if t.startswith(prefix)]
            if not found:
                raise Refused("credential: no tag %r" % want)
            for t in found:
                if t != want:
                    raise Refused("credential: tag %.80r contradicts the name, which states %r" % (t, want))
        return member, key

    def signer(self, subject: str, payload: bytes, headers: dict) -> int:
        """The signer's ID, if its credential holds, names it, and the
        key it binds signed subject, a zero byte and the raw payload."""
        if "Election-Signer" not in headers or "Election-Signature" not in headers:
            raise Refused("not signed")
        signer, signature = headers["Election-Signer"], headers["Election-Signature"]
        if signer is None or signature is None:
            raise Refused("a signature header given twice")
        if "Election-Credential" not in headers:
            raise Refused("no credential (Election-Credential)")
        token = headers["Election-Credential"]
        if token is None:
            raise Refused("the credential header given twice")
        if not DECIMAL.match(signer):
            raise Refused("signer %.20r is not a member ID" % signer)
        # 1 to 5: the credential.
        member, key = self.credential(token, time.time())
        # 6. It is the signer's.
        if member != int(signer):
            raise Refused("signer %s carries the credential of member %d" % (signer, member))
        # 7. The signature, with the key the credential binds.
        try:
            key.verify(subject.encode() + b"\x00" + payload, signature_bytes(signature))
        except nacl.exceptions.BadSignatureError:
            raise Refused("the signature is not that of member %d's credential key" % member) from None
        return member


def vote_encoding(cluster: str, member: int, term: int, leader: int) -> bytes:
    c = cluster.encode()
    return (CERTIFY_PREFIX + bytes([KIND_VOTE]) + len(c).to_bytes(2, "big") + c
            + member.to_bytes(8, "big") + term.to_bytes(8, "big") + leader.to_bytes(8, "big"))


def check_certificate(members: Members, cert, cluster: str, term: int, leader: int) -> None:
    """Raises Refused unless cert certifies leader in term of cluster."""
    if not isinstance(cert, dict) or set(cert) != {"cluster", "term", "leader", "votes"}:
        raise Refused("the certificate is not {cluster, term, leader, votes}")
    if cert["cluster"] != cluster or cert["term"] != term or cert["leader"] != leader:
        raise Refused("the certificate is of another cluster, term or leader")
    n = len(members.keys)
    if n > MAX_CERT_MEMBERS:
        raise Refused("%d members, a certificate counts at most %d" % (n, MAX_CERT_MEMBERS))
    f = (n - 1) // 3
    quorum = (n + f + 2) // 2  # ceil((n+f+1)/2)
    votes = cert["votes"]
    if not isinstance(votes, list) or not votes:
        raise Refused("the certificate has no votes")
    if len(votes) > n:
        raise Refused("%d votes among %d members" % (len(votes), n))
    if len(votes) < quorum:
        raise Refused("%d votes, a quorum of %d members is %d" % (len(votes), n, quorum))
    if leader not in members.keys:
        raise Refused("the certified leader %d is not a member" % leader)
    signers = set()
    for vote in votes:
        if not isinstance(vote, dict) or set(vote) != {"member", "signature"}:
            raise Refused("a vote is not {member, signature}")
        member = vote["member"]
        if not is_uint(member, 1, (1 << 64) - 1) or member in signers or member not in members.keys:
            raise Refused("vote of %r: not a member, or twice" % (member,))
        signers.add(member)
        try:
            signature = base64.b64decode(vote["signature"], validate=True)
        except (TypeError, ValueError):
            raise Refused("member %d's vote: the signature is not base64" % member) from None
        if len(signature) != 64:
            raise Refused("member %d's vote: a signature of %d bytes" % (member, len(signature)))
        try:
            members.keys[member].verify(vote_encoding(cluster, member, term, leader), signature)
        except nacl.exceptions.BadSignatureError:
            raise Refused("member %d's vote for %d in term %d does not hold" % (member, leader, term)) from None


def check_announcement(members, cluster: str, algorithm: str, payload: bytes, headers: dict) -> dict:
    """The announcement, if it may be believed; raises Refused otherwise.
    members is the reader's Members (a members file) or Authority (member
    credentials)."""
    if len(payload) > MAX_ANNOUNCEMENT:
        raise Refused("%d bytes" % len(payload))
    # 1. The signature, over the leader subject, before anything is decoded.
    signer = members.signer("election.%s.leader" % cluster, payload, headers)
    # 2. The fields.
    try:
        a = json.loads(payload, object_pairs_hook=no_duplicates)
    except (ValueError, UnicodeDecodeError) as e:
        raise Refused("not JSON: %s" % e) from None
    if not isinstance(a, dict):
        raise Refused("not a JSON object")
    if a.get("cluster") != cluster:
        raise Refused("cluster %r, not %r" % (a.get("cluster"), cluster))
    if not is_uint(a.get("leader"), 1, (1 << 64) - 1):
        raise Refused("leader %r" % (a.get("leader"),))
    if not is_uint(a.get("term"), 1, MAX_TERM):
        raise Refused("term %r: want 1 to 2^62" % (a.get("term"),))
    at = a.get("at")
    if not isinstance(at, str) or not RFC3339.match(at) or at.startswith("0001-01-01T00:00:00"):
        raise Refused("at %r is not an RFC 3339 time" % (at,))
    certificate = a.get("certificate")
    if certificate is None and len(payload) > MAX_PAYLOAD:
        raise Refused("%d bytes without a certificate" % len(payload))
    # 3. The algorithm is the one the members file states (or the reader
    # is configured with): a cluster's algorithm is never taken from the
    # message.
    if a.get("algorithm") not in ALGORITHMS:
        raise Refused("unknown algorithm %r" % (a.get("algorithm"),))
    if a["algorithm"] != algorithm:
        raise Refused("algorithm %r in a %s cluster" % (a["algorithm"], algorithm))
    # 4. The leader it names signed it.
    if a["leader"] != signer:
        raise Refused("signed by member %d, but it names leader %d" % (signer, a["leader"]))
    # 5. A byzantine leader only with a certificate that holds; a
    # certificate carried by any announcement is checked.
    if algorithm == "byzantine" and certificate is None:
        raise Refused("a byzantine leader without a certificate")
    if certificate is not None:
        if not members.certificates:
            raise Refused("a certificate, which only a members file can count a quorum of")
        check_certificate(members, certificate, cluster, a["term"], a["leader"])
    return a


# --- the NATS text protocol ----------------------------------------------

class NoResponders(Exception):
    """The server's "NATS/1.0 503" status: nobody subscribes."""


class Timeout(Exception):
    pass


class NATS:
    """Just enough of the NATS client protocol: CONNECT with headers and
    no_responders, SUB, PUB, and MSG/HMSG/PING/-ERR in return."""

    def __init__(self, url: str, user: str, password: str, timeout: float):
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("nats", "") or not u.hostname:
            raise ConfigError("--server %r: want nats://host:port" % url)
        user, password = u.username or user, u.password or password
        self.sock = socket.create_connection((u.hostname, u.port or 4222), timeout=timeout)
        self.buf = b""
        self.sids = 0
        line = self._line()
        if not line.startswith(b"INFO "):
            raise ConnectionError("the server did not start with INFO: %r" % line[:80])
        info = json.loads(line[5:])
        if info.get("tls_required"):
            raise ConnectionError("the server requires TLS, which this verifier does not speak")
        if not info.get("headers"):
            raise ConnectionError("the server does not support headers, which carry the signatures")
        connect = {"verbose": False, "pedantic": False, "lang": "python", "version": "baton-verify",
                   "name": "baton-verify", "protocol": 1, "headers": True, "no_responders": True}
        if user:
            connect["user"], connect["pass"] = user, password or ""
        self._send(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        while True:  # PONG, or -ERR (e.g. 'Authorization Violation')
            line = self._line()
            if line == b"PONG":
                break
            if line.startswith(b"-ERR"):
                raise ConnectionError(line.decode(errors="replace"))

    def _send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> None:
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            raise Timeout() from None
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buf += chunk

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]  # and the CRLF after it
        return data

    def subscribe(self, subject: str) -> str:
        self.sids += 1
        self._send(("SUB %s %d\r\n" % (subject, self.sids)).encode())
        return str(self.sids)

    def flush(self) -> None:
        """Returns once the server has handled everything sent before."""
        self._send(b"PING\r\n")
        while self.next_message(pong=True) is not None:
            pass

    def publish(self, subject: str, payload: bytes, reply: str = "") -> None:
        head = "PUB %s %s%d\r\n" % (subject, reply + " " if reply else "", len(payload))
        self._send(head.encode() + payload + b"\r\n")

    def next_message(self, pong: bool = False):
        """(subject, status, headers, payload) of the next MSG or HMSG;
        None on PONG when pong is set. Answers the server's PINGs."""
        while True:
            line = self._line()
            op = line.split(b" ", 1)[0].upper()
            if op == b"PING":
                self._send(b"PONG\r\n")
            elif op == b"PONG":
                if pong:
                    return None
            elif op in (b"+OK", b"INFO"):
                pass
            elif op == b"-ERR":
                raise ConnectionError(line.decode(errors="replace"))
            elif op == b"MSG":  # MSG <subject> <sid> [reply] <#bytes>
                parts = line.decode().split()
                return parts[1], "", {}, self._exact(int(parts[-1]))
            elif op == b"HMSG":  # HMSG <subject> <sid> [reply] <#header bytes> <#total bytes>
                parts = line.decode().split()
                hlen, total = int(parts[-2]), int(parts[-1])
                data = self._exact(total)
                status, headers = parse_headers(data[:hlen])
                return parts[1], status, headers, data[hlen:]
            else:
                raise ConnectionError("unexpected from the server: %r" % line[:80])

    def request(self, subject: str, payload: bytes):
        """(headers, payload) of the first answer; NoResponders when the
        server answers "NATS/1.0 503"."""
        inbox = "_INBOX.%s" % secrets.token_hex(11)
        self.subscribe(inbox)
        self.publish(subject, payload, reply=inbox)
        while True:
            subject_, status, headers, data = self.next_message()
            if subject_ != inbox:
                continue
            if status.startswith("503"):
                raise NoResponders(subject)
            return headers, data


def parse_headers(block: bytes):
    """The status ("" or e.g. "503") and the headers of a NATS header
    block: "NATS/1.0[ <status>[ <description>]]\\r\\n" then
    "Name: value\\r\\n" lines, then an empty line. A name given twice is
    kept as None, so that the checks refuse it."""
    lines = block.decode("utf-8", errors="strict").split("\r\n")
    if not lines[0].startswith("NATS/1.0"):
        raise ConnectionError("a header block without NATS/1.0")
    status = lines[0][len("NATS/1.0"):].strip()
    headers = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise ConnectionError("a header line without a colon")
        name, value = name.strip(), value.strip()
        headers[name] = None if name in headers else value  # None: given twice
    return status, headers


# --- the three ways of reading the leader ---------------------------------

def stream_of(nc: NATS, subject: str) -> str:
    _, data = nc.request("$JS.API.STREAM.NAMES", json.dumps({"subject": subject}).encode())
    names = json.loads(data).get("streams") or []
    if len(names) != 1:
        raise Timeout("%d streams capture %s" % (len(names), subject))
    return names[0]


def last_announcement(nc: NATS, stream: str, subject: str):
    """(headers, payload) of the last message of subject in stream."""
    _, data = nc.request("$JS.API.STREAM.MSG.GET." + stream, json.dumps({"last_by_subj": subject}).encode())
    answer = json.loads(data)
    if "error" in answer:
        raise Timeout("stream %s: %s" % (stream, answer["error"].get("description")))
    message = answer["message"]
    headers = {}
    if message.get("hdrs"):
        _, headers = parse_headers(base64.b64decode(message["hdrs"]))
    return headers, base64.b64decode(message.get("data", ""))


def report(source: str, verdict: str, **fields) -> None:
    print(json.dumps(dict(source=source, verdict=verdict, **fields)), flush=True)


def judge(source, members, cluster, algorithm, headers, payload) -> bool:
    digest = hashlib.sha256(payload).hexdigest()
    try:
        a = check_announcement(members, cluster, algorithm, payload, headers)
    except Refused as e:
        report(source, "refused", reason=str(e), sha256=digest)
        return False
    report(source, "verified", leader=a["leader"], term=a["term"], algorithm=a["algorithm"], sha256=digest)
    return True


def members_reader(path: str, given_cluster: str, given_algorithm: str):
    """--keys: the members file, and the cluster and algorithm it states
    or the command line gives."""
    with open(path, encoding="utf-8") as f:
        members = Members.parse(f.read())
    cluster, algorithm = members.cluster, members.algorithm
    for name, given, stated in (("cluster", given_cluster, cluster), ("algorithm", given_algorithm, algorithm)):
        if given and stated and given != stated:
            raise ConfigError("--%s %s, but the members file states %s" % (name, given, stated))
    cluster, algorithm = cluster or given_cluster, algorithm or given_algorithm
    if not CLUSTER_NAME.match(cluster):
        raise ConfigError("the cluster is not known: state it in the members file (#: cluster <name>) or give --cluster")
    if algorithm not in ALGORITHMS:
        raise ConfigError("the algorithm is not known: state it in the members file (#: algorithm <name>) or give --algorithm")
    return members, cluster, algorithm


def authority_reader(authorities: str, cluster: str, algorithm: str):
    """--authority: the reader of a cluster of member credentials, whose
    cluster and algorithm come from the command line alone (the reader's
    configuration), never from a message."""
    if not cluster:
        raise ConfigError("--authority needs --cluster: the reader's own cluster, which a credential must name")
    if not CLUSTER_NAME.fullmatch(cluster):
        raise ConfigError("--cluster %r: want [A-Za-z0-9_-]+" % cluster)
    if algorithm not in ALGORITHMS:
        raise ConfigError("--authority needs --algorithm: the cluster's algorithm (bully, ring or paxos)")
    if algorithm == "byzantine":
        raise ConfigError("--algorithm byzantine needs --keys: a certificate counts a quorum of the members file")
    return Authority.parse(authorities, cluster), cluster, algorithm


def main(argv) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=("query", "last", "watch"))
    p.add_argument("--server", default=os.environ.get("NATS_URL", "nats://127.0.0.1:4222"))
    p.add_argument("--user", default=os.environ.get("NATS_USER", ""))
    p.add_argument("--password", default=os.environ.get("NATS_PASSWORD", ""))
    readers = p.add_mutually_exclusive_group(required=True)
    readers.add_argument("--keys", help="the cluster's members file (ELECTION_KEYS_FILE)")
    readers.add_argument("--authority", metavar="A...[,A...]",
                         help="member credentials: the authority's public account keys (ELECTION_AUTHORITY), "
                              "comma-separated; needs --cluster and --algorithm")
    p.add_argument("--cluster", default="", help="the cluster, if the members file does not state it; required with --authority")
    p.add_argument("--algorithm", default="", help="the algorithm, if the members file does not state it; required with --authority")
    p.add_argument("--stream", default="", help="last: the stream (default: the one that captures the leader subject)")
    p.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for an answer")
    p.add_argument("--count", type=int, default=0, help="watch: stop after this many announcements (0: never)")
    args = p.parse_args(argv)
    try:
        if args.authority is not None:
            members, cluster, algorithm = authority_reader(args.authority, args.cluster, args.algorithm)
        else:
            members, cluster, algorithm = members_reader(args.keys, args.cluster, args.algorithm)
    except (OSError, ConfigError) as e:
        print("baton_verify: %s" % e, file=sys.stderr)
        return 2
    leader_subject = "election.%s.leader" % cluster
    try:
        nc = NATS(args.server, args.user, args.password, args.timeout)
    except ConfigError as e:
        print("baton_verify: %s" % e, file=sys.stderr)
        return 2
    except (OSError, ConnectionError, ValueError) as e:
        print("baton_verify: %s: %s" % (args.server, e), file=sys.stderr)
        return 4
    try:
        if args.mode == "query":
            headers, payload = nc.request("election.%s.query" % cluster, b"")
            return 0 if judge("query", members, cluster, algorithm, headers, payload) else 1
        if args.mode == "last":
            stream = args.stream or stream_of(nc, leader_subject)
            headers, payload = last_announcement(nc, stream, leader_subject)
            return 0 if judge("last", members, cluster, algorithm, headers, payload) else 1
        nc.sock.settimeout(None if args.count == 0 else args.timeout)
        nc.subscribe(leader_subject)
        nc.flush()
        print(json.dumps({"event": "subscribed", "subject": leader_subject}), flush=True)
        status, seen = 0, 0
        while args.count == 0 or seen < args.count:
            subject, _, headers, payload = nc.next_message()
            if subject != leader_subject:
                continue
            seen += 1
            if not judge("watch", members, cluster, algorithm, headers, payload):
                status = 1
        return status
    except NoResponders:
        report(args.mode, "none", reason="no responders: no node leads")
        return 3
    except Timeout as e:
        report(args.mode, "none", reason=str(e) or "time-out")
        return 3
    except (OSError, ConnectionError, ValueError) as e:
        print("baton_verify: %s" % e, file=sys.stderr)
        return 4


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
