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
2 for a bad command line or members file, or without PyNaCl, 4 when the server cannot be
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
MAX_MEMBERS = 1024  # protocol.MaxMemberKeys
CLUSTER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
DECIMAL = re.compile(r"^[0-9]+$")
PREFIX_BYTE_USER = 20 << 3  # nkeys: base32-encodes to "U"


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


def raw_user_key(nkey: str) -> bytes:
    """The 32-byte Ed25519 key of a public user nkey ("U..."), checked."""
    if len(nkey) != 56 or not re.fullmatch(r"[A-Z2-7]+", nkey):
        raise ValueError("not 56 characters of base32")
    decoded = base64.b32decode(nkey)  # 56 characters: no padding needed
    body, checksum = decoded[:-2], decoded[-2:]
    if crc16_xmodem(body) != int.from_bytes(checksum, "little"):
        raise ValueError("its CRC16 does not match")
    if body[0] != PREFIX_BYTE_USER:
        raise ValueError("not a user key (prefix byte %#x)" % body[0])
    return body[1:33]


class Members:
    """A members file: ID -> verify key, and what it states."""

    def __init__(self, keys, cluster, algorithm):
        self.keys = keys
        self.cluster = cluster
        self.algorithm = algorithm

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
    if len(signature) != 86 or not re.fullmatch(r"[A-Za-z0-9_-]+", signature):
        raise Refused("the signature is not 86 characters of base64url")
    raw = base64.urlsafe_b64decode(signature + "==")
    try:
        members.keys[int(signer)].verify(subject.encode() + b"\x00" + payload, raw)
    except nacl.exceptions.BadSignatureError:
        raise Refused("the signature is not member %s's" % signer) from None
    return int(signer)


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


def check_announcement(members: Members, cluster: str, algorithm: str, payload: bytes, headers: dict) -> dict:
    """The announcement, if it may be believed; raises Refused otherwise."""
    if len(payload) > MAX_ANNOUNCEMENT:
        raise Refused("%d bytes" % len(payload))
    # 1. The signature, over the leader subject, before anything is decoded.
    signer = check_signature(members, "election.%s.leader" % cluster, payload, headers)
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
    # 3. The algorithm is the one the members file states: a cluster's
    # algorithm is never taken from the message.
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


def main(argv) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=("query", "last", "watch"))
    p.add_argument("--server", default=os.environ.get("NATS_URL", "nats://127.0.0.1:4222"))
    p.add_argument("--user", default=os.environ.get("NATS_USER", ""))
    p.add_argument("--password", default=os.environ.get("NATS_PASSWORD", ""))
    p.add_argument("--keys", required=True, help="the cluster's members file (ELECTION_KEYS_FILE)")
    p.add_argument("--cluster", default="", help="the cluster, if the members file does not state it")
    p.add_argument("--algorithm", default="", help="the algorithm, if the members file does not state it")
    p.add_argument("--stream", default="", help="last: the stream (default: the one that captures the leader subject)")
    p.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for an answer")
    p.add_argument("--count", type=int, default=0, help="watch: stop after this many announcements (0: never)")
    args = p.parse_args(argv)
    try:
        with open(args.keys, encoding="utf-8") as f:
            members = Members.parse(f.read())
        cluster, algorithm = members.cluster, members.algorithm
        for name, given, stated in (("cluster", args.cluster, cluster), ("algorithm", args.algorithm, algorithm)):
            if given and stated and given != stated:
                raise ConfigError("--%s %s, but the members file states %s" % (name, given, stated))
        cluster, algorithm = cluster or args.cluster, algorithm or args.algorithm
        if not CLUSTER_NAME.match(cluster):
            raise ConfigError("the cluster is not known: state it in the members file (#: cluster <name>) or give --cluster")
        if algorithm not in ALGORITHMS:
            raise ConfigError("the algorithm is not known: state it in the members file (#: algorithm <name>) or give --algorithm")
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
