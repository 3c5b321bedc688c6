package main

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// Config is the fleet's configuration, read from the environment. Every
// replica of the fleet gets the same: nothing in it is a replica's own.
type Config struct {
	// NATSURL is the NATS server URL, or several separated by commas.
	NATSURL string `env:"NATS_URL" envDefault:"nats://127.0.0.1:4222"`
	// NATSUser and NATSPassword authenticate to NATS with a user and
	// password (the deployment's node user).
	NATSUser     string `env:"NATS_USER"`
	NATSPassword string `env:"NATS_PASSWORD"`
	// NATSCreds is a NATS credentials file to connect with.
	NATSCreds string `env:"NATS_CREDS"`
	// ID is NODE_ID: the member's ID and priority, 1 to 65536. Unset, it
	// is derived from the hostname (IDFromHostname), or read from the
	// member credential (CredsFile) if there is one.
	ID string `env:"NODE_ID"`
	// IDFrom is how a replica without NODE_ID (nor credential) derives its
	// ID from its hostname: hostname, a hash of the whole name
	// (IDFromHostname); or ordinal, the number that ends it, plus 1 (the
	// pod fleet-0 of a StatefulSet is member 1), so that IDs are certain
	// to differ.
	IDFrom string `env:"NODE_ID_FROM" envDefault:"hostname"`
	// Cluster is the election's name, [A-Za-z0-9_-]+.
	Cluster string `env:"ELECTION_CLUSTER" envDefault:"fleet"`
	// Algorithm is bully or ring: the algorithms that run with dynamic
	// membership and need nothing per replica (Paxos needs a fixed set of
	// voters, byzantine configured members).
	Algorithm string `env:"ELECTION_ALGORITHM" envDefault:"bully"`
	// HTTPAddr is the listen address of /healthz, /status, /metrics and
	// /work.
	HTTPAddr string `env:"HTTP_ADDR" envDefault:":8080"`
	// DataDir is where the member keeps its terms. Empty means
	// <temporary directory>/baton-fleet/<cluster>/node-<id>: kept across
	// restarts of the process in one container, lost with the container.
	DataDir string `env:"ELECTION_DATA"`
	// KeepLeader keeps the current leader until it leaves: a replica that
	// joins with a higher ID follows it instead of taking over.
	KeepLeader bool `env:"ELECTION_KEEP_LEADER" envDefault:"false"`
	// CredsFile and Authority: the member's credential (a NATS creds file
	// issued by the cluster's authority, docs/membership.md) and the
	// authority's public key. Both or neither; without them the fleet runs
	// unsigned.
	CredsFile string `env:"ELECTION_CREDS_FILE"`
	Authority string `env:"ELECTION_AUTHORITY"`
	// IssuerSeedFile is, instead of CredsFile, the seed of the cluster's
	// authority (SA…, as the keys command writes authority.seed): the
	// replica issues itself a credential for its ID at start, valid for
	// IssuedFor. Every replica that holds the seed can issue any member's
	// credential: for identical replicas that trust each other, where no
	// per-replica configuration is wanted. Readers still hold only the
	// authority's public key, and no client without the seed can speak
	// for a member. ELECTION_AUTHORITY defaults to the seed's public key.
	IssuerSeedFile string        `env:"FLEET_ISSUER_SEED_FILE"`
	IssuedFor      time.Duration `env:"FLEET_ISSUED_FOR" envDefault:"24h"`
	// WorkInterval is how often the leader does one unit of work.
	WorkInterval time.Duration `env:"FLEET_WORK_INTERVAL" envDefault:"1s"`
	// LogLevel is debug, info, warn or error; logs are text on stderr.
	LogLevel string `env:"LOG_LEVEL" envDefault:"info"`

	// Filled by validate.
	id       uint64
	idSource string // "NODE_ID", "hostname <name>", "ordinal <name>" or "credential"
	urls     []string
	signer   *signing.Signer
	keys     *signing.MemberKeys
	level    slog.Level
}

// configError is a problem with one variable: its message starts with the
// variable's name.
type configError struct{ name, problem string }

func (e *configError) Error() string { return e.name + ": " + e.problem }

func invalid(name, format string, args ...any) error {
	return &configError{name: name, problem: fmt.Sprintf(format, args...)}
}

// IDFromHostname is the member ID of a replica with no NODE_ID: the 32-bit
// FNV-1a hash of its hostname, folded to 16 bits (the high half XORed into
// the low half), plus 1: an ID from 1 to 65536. Two replicas of different
// hostnames get the same ID with probability 1/65536, so n replicas
// present at once all differ with probability about
// exp(-n(n-1)/131072): a collision among 7 is about 1 in 3000, among 50
// about 1 in 54. An operator who needs certainty sets NODE_ID.
func IDFromHostname(hostname string) uint64 {
	h := fnv.New32a()
	h.Write([]byte(hostname))
	sum := h.Sum32()
	return uint64((sum>>16)^(sum&0xffff)) + 1
}

// loadConfig parses and checks the configuration in environ; hostname is
// asked only when the ID must be derived from it. Its error names the
// first variable that is wrong, on one line.
func loadConfig(environ map[string]string, hostname func() (string, error)) (Config, error) {
	cfg, err := env.ParseAsWithOptions[Config](env.Options{Environment: environ})
	if err != nil {
		return Config{}, explain(err, environ)
	}
	if err := cfg.validate(hostname); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// explain turns the first error of env into one that names the variable.
func explain(err error, environ map[string]string) error {
	var agg env.AggregateError
	if errors.As(err, &agg) && len(agg.Errors) > 0 {
		err = agg.Errors[0]
	}
	var parse env.ParseError
	if errors.As(err, &parse) {
		field, _ := reflect.TypeFor[Config]().FieldByName(parse.Name)
		name, _, _ := strings.Cut(field.Tag.Get("env"), ",")
		switch parse.Type {
		case reflect.TypeFor[time.Duration]():
			return invalid(name, "%q is not a duration such as 500ms or 2s", environ[name])
		case reflect.TypeFor[bool]():
			return invalid(name, "%q is not true or false", environ[name])
		}
		return invalid(name, "%q cannot be parsed", environ[name])
	}
	return fmt.Errorf("environment: %s", strings.ReplaceAll(err.Error(), "\n", " "))
}

// validate checks every variable and fills the derived fields.
func (c *Config) validate(hostname func() (string, error)) error {
	var err error
	if c.urls, err = parseURLs(c.NATSURL); err != nil {
		return err
	}
	switch {
	case c.NATSUser != "" && c.NATSPassword == "":
		return invalid("NATS_PASSWORD", "required with NATS_USER")
	case c.NATSPassword != "" && c.NATSUser == "":
		return invalid("NATS_USER", "required with NATS_PASSWORD")
	case c.NATSCreds != "" && c.NATSUser != "":
		return invalid("NATS_CREDS", "set with NATS_USER: use one or the other")
	}
	if c.NATSCreds != "" {
		if _, err := os.Stat(c.NATSCreds); err != nil {
			return invalid("NATS_CREDS", "%v", err)
		}
	}
	if protocol.ValidateCluster(c.Cluster) != nil {
		return invalid("ELECTION_CLUSTER", "%q does not match [A-Za-z0-9_-]+", c.Cluster)
	}
	switch protocol.Algorithm(c.Algorithm) {
	case protocol.Bully, protocol.Ring:
	case protocol.Paxos:
		return invalid("ELECTION_ALGORITHM", "paxos needs a fixed set of voters (ELECTION_VOTERS), which identical replicas do not have: use bully or ring, or run paxos voters as the node service")
	case protocol.Byzantine:
		return invalid("ELECTION_ALGORITHM", "byzantine needs configured members and a member set that changes by certified decisions, which identical replicas do not have: use bully or ring")
	default:
		return invalid("ELECTION_ALGORITHM", "%q is not bully or ring", c.Algorithm)
	}
	if err := c.memberID(hostname); err != nil {
		return err
	}
	if err := c.issueCredential(); err != nil {
		return err
	}
	if err := c.loadCredential(); err != nil {
		return err
	}
	if err := checkListenAddr(c.HTTPAddr); err != nil {
		return err
	}
	if c.DataDir == "" {
		c.DataDir = filepath.Join(os.TempDir(), "baton-fleet", c.Cluster, fmt.Sprintf("node-%d", c.id))
	}
	if err := checkDataDir(c.DataDir); err != nil {
		return err
	}
	if c.WorkInterval <= 0 {
		return invalid("FLEET_WORK_INTERVAL", "must be positive, got %v", c.WorkInterval)
	}
	levels := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}
	level, ok := levels[strings.ToLower(c.LogLevel)]
	if !ok {
		return invalid("LOG_LEVEL", "%q is not one of debug, info, warn, error", c.LogLevel)
	}
	c.level = level
	return nil
}

// memberID reads NODE_ID, or derives the ID from the hostname unless a
// member credential will give it (loadCredential).
func (c *Config) memberID(hostname func() (string, error)) error {
	if c.ID != "" {
		id, err := strconv.ParseUint(strings.TrimSpace(c.ID), 10, 64)
		if err != nil || !protocol.DynamicMember(id) {
			return invalid("NODE_ID", "%q is not an ID from 1 to %d", c.ID, protocol.MaxMemberID)
		}
		c.id, c.idSource = id, "NODE_ID"
		return nil
	}
	if c.IDFrom != idFromHostname && c.IDFrom != idFromOrdinal {
		return invalid("NODE_ID_FROM", "%q is not %s or %s", c.IDFrom, idFromHostname, idFromOrdinal)
	}
	if c.CredsFile != "" {
		return nil // the credential names the member
	}
	name, err := hostname()
	if err == nil && name == "" {
		err = errors.New("empty")
	}
	if err != nil {
		return invalid("NODE_ID", "not set, and the hostname to derive it from cannot be read (%v): set NODE_ID", err)
	}
	if c.IDFrom == idFromOrdinal {
		id, err := IDFromOrdinal(name)
		if err != nil {
			return invalid("NODE_ID_FROM", "%v", err)
		}
		c.id, c.idSource = id, "ordinal "+name
		return nil
	}
	c.id, c.idSource = IDFromHostname(name), "hostname "+name
	return nil
}

// The values of NODE_ID_FROM.
const (
	idFromHostname = "hostname"
	idFromOrdinal  = "ordinal"
)

// IDFromOrdinal is the member ID of a replica whose hostname ends with
// its ordinal, as a StatefulSet's pods are named (fleet-0, fleet-1, …):
// the ordinal plus 1, from 1 to 65536.
func IDFromOrdinal(hostname string) (uint64, error) {
	i := strings.LastIndexByte(hostname, '-')
	ordinal, err := strconv.ParseUint(hostname[i+1:], 10, 64)
	if i < 0 || err != nil {
		return 0, fmt.Errorf("ordinal, but the hostname %q does not end with -<number>", hostname)
	}
	if ordinal >= protocol.MaxMemberID {
		return 0, fmt.Errorf("the ordinal %d of hostname %q is above %d", ordinal, hostname, protocol.MaxMemberID-1)
	}
	return ordinal + 1, nil
}

// loadCredential reads ELECTION_CREDS_FILE and checks it with
// ELECTION_AUTHORITY: the member then signs everything with it, and
// checks every other member's.
func (c *Config) loadCredential() error {
	switch {
	case c.signer != nil:
		return nil // issued by issueCredential
	case c.CredsFile == "" && c.Authority == "":
		return nil
	case c.CredsFile == "":
		return invalid("ELECTION_CREDS_FILE", "required with ELECTION_AUTHORITY")
	case c.Authority == "":
		return invalid("ELECTION_AUTHORITY", "required with ELECTION_CREDS_FILE: the authority's public key (A…) checks every member's credential")
	}
	member, err := membercreds.Load(c.CredsFile, c.Authority, c.Cluster, time.Now())
	switch {
	case errors.Is(err, membercreds.ErrAuthority):
		return invalid("ELECTION_AUTHORITY", "%v", err)
	case err != nil:
		return invalid("ELECTION_CREDS_FILE", "%v", err)
	case c.id == 0:
		c.id, c.idSource = member.Credential.ID, "credential"
	case member.Credential.ID != c.id:
		return invalid("ELECTION_CREDS_FILE", "%s is the credential of member %d, but NODE_ID is %d", c.CredsFile, member.Credential.ID, c.id)
	}
	c.signer, c.keys = member.Signer, member.Keys
	return nil
}

// parseURLs checks NATS_URL: one URL or several, separated by commas.
func parseURLs(s string) ([]string, error) {
	var urls []string
	for raw := range strings.SplitSeq(s, ",") {
		raw = strings.TrimSpace(raw)
		u, err := url.Parse(raw)
		switch {
		case raw == "":
			return nil, invalid("NATS_URL", "empty URL in %q", s)
		case err != nil || u.Host == "":
			return nil, invalid("NATS_URL", "%q is not a URL such as nats://host:4222", raw)
		case !slices.Contains([]string{"nats", "tls", "ws", "wss"}, u.Scheme):
			return nil, invalid("NATS_URL", "%q: the scheme must be nats, tls, ws or wss", raw)
		}
		urls = append(urls, raw)
	}
	return urls, nil
}

func checkListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return invalid("HTTP_ADDR", "%q is not host:port", addr)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return invalid("HTTP_ADDR", "%q: bad port %q", addr, port)
	}
	return nil
}

// checkDataDir creates the data directory if needed and checks that the
// member can write there.
func checkDataDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return invalid("ELECTION_DATA", "cannot create %q: %v", dir, errors.Unwrap(err))
	}
	probe, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return invalid("ELECTION_DATA", "cannot write in %q: %v", dir, errors.Unwrap(err))
	}
	probe.Close()
	return os.Remove(probe.Name())
}

// issueCredential, with FLEET_ISSUER_SEED_FILE, issues this replica a
// credential for its ID with the authority's seed: a new user key, and a
// credential valid for FLEET_ISSUED_FOR.
func (c *Config) issueCredential() error {
	switch {
	case c.IssuerSeedFile == "":
		return nil
	case c.CredsFile != "":
		return invalid("FLEET_ISSUER_SEED_FILE", "set with ELECTION_CREDS_FILE: give the replica its credential or the seed to issue one, not both")
	case c.IssuedFor <= 0:
		return invalid("FLEET_ISSUED_FOR", "must be positive, got %v", c.IssuedFor)
	}
	if info, err := os.Stat(c.IssuerSeedFile); err != nil {
		return invalid("FLEET_ISSUER_SEED_FILE", "%v", err)
	} else if mode := info.Mode().Perm(); mode&0o077 != 0 {
		return invalid("FLEET_ISSUER_SEED_FILE", "%s may be read or written by group or others (mode %04o), and it issues every member's credential: make it 0600 (0400 for a Kubernetes Secret)", c.IssuerSeedFile, mode)
	}
	data, err := os.ReadFile(c.IssuerSeedFile)
	if err != nil {
		return invalid("FLEET_ISSUER_SEED_FILE", "%v", err)
	}
	authority, err := nkeys.FromSeed(bytes.TrimSpace(data))
	if err != nil {
		return invalid("FLEET_ISSUER_SEED_FILE", "%s does not hold an account seed (SA…): %v", c.IssuerSeedFile, err)
	}
	public, err := authority.PublicKey()
	if err != nil || !nkeys.IsValidPublicAccountKey(public) {
		return invalid("FLEET_ISSUER_SEED_FILE", "%s does not hold an account seed (SA…), the authority's", c.IssuerSeedFile)
	}
	if c.Authority == "" {
		c.Authority = public
	}
	checker, err := membercreds.NewChecker(c.Cluster, c.Authority)
	if err != nil {
		return invalid("ELECTION_AUTHORITY", "%v", err)
	}
	if !slices.Contains(checker.Authorities, public) {
		return invalid("FLEET_ISSUER_SEED_FILE", "the seed's key %s is not one of ELECTION_AUTHORITY", public)
	}
	user, err := nkeys.CreateUser()
	if err != nil {
		return invalid("FLEET_ISSUER_SEED_FILE", "%v", err)
	}
	userPublic, _ := user.PublicKey()
	token, err := membercreds.Issue(authority, c.Cluster, c.id, userPublic, c.IssuedFor)
	if err != nil {
		return invalid("FLEET_ISSUER_SEED_FILE", "%v", err)
	}
	signer, err := signing.NewSigner(c.id, user)
	if err != nil {
		return invalid("FLEET_ISSUER_SEED_FILE", "%v", err)
	}
	if c.signer, err = signer.WithCredential(token); err != nil {
		return invalid("FLEET_ISSUER_SEED_FILE", "%v", err)
	}
	c.keys = checker.Keys()
	return nil
}
