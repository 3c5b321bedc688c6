package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/clusterlist"
	"github.com/baton-election/baton/internal/natsconn"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// Config is the node service's configuration, read from the environment.
// The first six variables are the public contract; the others are the
// team's, each with a default.
type Config struct {
	// NATS is NATS_URL (the server URL, or several separated by commas)
	// and the NATS credentials and TLS files.
	NATS natsconn.Config
	// ID is this node's unique positive integer ID.
	ID uint64 `env:"NODE_ID,required,notEmpty"`
	// Peers are the comma-separated IDs of every member, this node
	// included. Every member must be configured with the same set.
	// Required with static membership; not used with dynamic.
	Peers string `env:"NODE_PEERS"`
	// Algorithm is the election algorithm: bully, ring, paxos or byzantine.
	Algorithm string `env:"ELECTION_ALGORITHM" envDefault:"bully"`
	// Cluster is the cluster name, [A-Za-z0-9_-]+. Clusters with different
	// names share one NATS without seeing each other.
	Cluster string `env:"ELECTION_CLUSTER" envDefault:"default"`
	// HTTPAddr is the listen address of /healthz, /status and /metrics.
	HTTPAddr string `env:"HTTP_ADDR" envDefault:":8080"`
	// DataDir is where the node keeps what must survive a restart (its
	// terms and incarnation). Created if missing; locked while the node
	// runs. Empty means baton-data/<cluster>/node-<id> in the working
	// directory.
	DataDir string `env:"ELECTION_DATA"`

	// Tick is the resolution of every election time-out: the machine's
	// clock advances once per tick.
	Tick time.Duration `env:"ELECTION_TICK" envDefault:"10ms"`
	// HeartbeatInterval is how often the leader broadcasts a heartbeat
	// (rounded down to whole ticks); a Paxos leader renews its lease as
	// often. Empty or 0 means 100 ms for Bully and the ring, 50 ms for
	// Paxos and byzantine.
	HeartbeatInterval time.Duration `env:"ELECTION_HEARTBEAT_INTERVAL"`
	// LeaderTimeout is how long a follower waits without hearing its leader
	// before it starts an election (rounded up to whole ticks). It must
	// exceed the heartbeat interval.
	LeaderTimeout time.Duration `env:"ELECTION_LEADER_TIMEOUT" envDefault:"200ms"`
	// TMax is the largest time a message takes from one node to another.
	TMax time.Duration `env:"ELECTION_T_MAX" envDefault:"20ms"`
	// TProcess is the largest time a node takes to handle a message.
	// T = 2·TMax + TProcess is how long a Bully candidate waits for an
	// Answer and a ring node for an Ack (rounded up to whole ticks).
	TProcess time.Duration `env:"ELECTION_T_PROCESS" envDefault:"10ms"`
	// CoordinatorTimeout is how long a Bully candidate that got an Answer
	// waits for the Coordinator, and a ring participant for the elected
	// round, before it starts again. Zero means (n+1)·T for n members.
	CoordinatorTimeout time.Duration `env:"ELECTION_COORDINATOR_TIMEOUT"`
	// Lease is how long a Paxos acceptor holds the lease it grants: a
	// crashed or cut-off leader is replaced about this long after its last
	// renewal. Empty or 0 means 200 ms for up to 25 members and 8 ms per member
	// in larger clusters (800 ms for 101). Paxos and byzantine only.
	Lease time.Duration `env:"ELECTION_LEASE"`
	// MaxDrift bounds how much the rate of any node's clock may differ
	// from real time, as a fraction (0.05 is 5%): Paxos leaders count on
	// their lease for ELECTION_LEASE·(1-d)/(1+d) less a tick, so that two
	// leases never overlap in real time. Paxos and byzantine only.
	MaxDrift float64 `env:"ELECTION_MAX_DRIFT" envDefault:"0.05"`
	// MaxMessageAge is how far a message's timestamp may be from this
	// node's clock, either way: older messages are dropped as replays. It
	// must exceed the clock skew between nodes.
	MaxMessageAge time.Duration `env:"ELECTION_MAX_MESSAGE_AGE" envDefault:"2s"`
	// ConnectionEvents is auto or off. With auto, the node follows the NATS
	// server's connection events ($SYS.ACCOUNT.*.DISCONNECT, delivered to
	// the application account by the NATS configuration) and notices at
	// once that a member's connection closed; it checks at start that
	// events arrive and logs which mode is in effect. With off, or where
	// the server delivers none, failures are detected by heartbeats alone.
	ConnectionEvents string `env:"ELECTION_CONNECTION_EVENTS" envDefault:"auto"`
	// KeyFile is the path of this node's member key, a user seed (SU…)
	// in the NATS nkeys format. With it, the node signs everything it
	// publishes, drops every message not signed by the member it names,
	// and, unless NATS_USER, NATS_TOKEN or NATS_CREDS is set, connects to
	// NATS as the nkey user of its public key (the server must list it).
	// Unset, the node runs unsigned and logs a warning.
	KeyFile string `env:"ELECTION_KEY_FILE"`
	// KeysFile is the path of the cluster's member keys, one line
	// "<ID> <public key U…>" per member of NODE_PEERS. Required with
	// KeyFile. With byzantine and dynamic membership, it lists instead
	// the configured members (version 0 of the member set), beside the
	// credentials every member holds (CredsFile).
	KeysFile string `env:"ELECTION_KEYS_FILE"`
	// ByzantineSmall allows byzantine with fewer than 4 members. Such a
	// cluster tolerates no liar (f = ⌊(n−1)/3⌋ = 0), so the node refuses
	// it unless this is true: for trying the algorithm out, not for
	// members that may lie.
	ByzantineSmall bool `env:"ELECTION_BYZANTINE_SMALL" envDefault:"false"`
	// Secret is read only to refuse it: the shared secret was replaced
	// by member keys.
	Secret string `env:"ELECTION_SECRET"`
	// Membership is static (the members are NODE_PEERS) or dynamic (the
	// members are the nodes of the cluster that are present).
	Membership string `env:"ELECTION_MEMBERSHIP" envDefault:"static"`
	// KeepLeader, with dynamic membership, keeps the current leader
	// until it leaves: a node that joins with a higher ID follows it
	// instead of taking over.
	KeepLeader bool `env:"ELECTION_KEEP_LEADER" envDefault:"false"`
	// PresenceInterval, with dynamic membership, is how often a member
	// that broadcasts nothing else says it is present (rounded down to
	// whole ticks); a member silent for 4 intervals is no longer counted.
	PresenceInterval time.Duration `env:"ELECTION_PRESENCE_INTERVAL" envDefault:"1s"`
	// Voters, with paxos and dynamic membership, are the comma-separated
	// IDs of the members whose acceptors form the quorums; the other
	// members are candidates that lead but do not vote.
	Voters string `env:"ELECTION_VOTERS"`
	// CredsFile, with dynamic membership, is this member's credential: a
	// NATS creds file (its user JWT, issued by the cluster's authority,
	// and its user seed), as the keys command writes it. The node signs
	// with the seed, adds the JWT to what it signs, and connects to NATS
	// with the file unless NATS_USER, NATS_TOKEN or NATS_CREDS is set.
	CredsFile string `env:"ELECTION_CREDS_FILE"`
	// Authority is the cluster's authority: its public account key (A…),
	// and its signing keys if it issues with them, comma-separated. The
	// node checks every member's credential, and its own, with it alone.
	Authority string `env:"ELECTION_AUTHORITY"`
	// Clusters, instead of Cluster, are the clusters this node takes
	// part in: names separated by commas, each with at most one range
	// {a..b} ("shard-{0..255}" is 256 names). Each is an election of its
	// own over the node's one NATS connection.
	Clusters string `env:"ELECTION_CLUSTERS"`
	// Rank is how the members are ranked in each election: id (the
	// highest ID leads) or spread (a hash of election and member, so
	// that leaders spread over the members). Empty: id with one cluster,
	// spread with several.
	Rank string `env:"ELECTION_RANK"`
	// BatchWindow, with several clusters, is how long the elections'
	// messages wait to leave together, in one message for the broadcasts
	// and one per member addressed; 0 sends each on its own.
	BatchWindow time.Duration `env:"ELECTION_BATCH_WINDOW" envDefault:"1ms"`

	// LogLevel is debug, info, warn or error. Dropped messages are logged
	// at debug.
	LogLevel string `env:"LOG_LEVEL" envDefault:"info"`
	// LogFormat is text or json; logs go to stderr.
	LogFormat string `env:"LOG_FORMAT" envDefault:"text"`

	// Filled by validate.
	signer *signing.Signer
	keys   *signing.MemberKeys
	// memberSet is, with byzantine and dynamic membership, the
	// configured members (ELECTION_KEYS_FILE).
	memberSet *signing.MemberKeys
	members   []uint64
	voters    []uint64
	urls      []string
	// clusters are the elections this node takes part in: Cluster alone,
	// or the names ELECTION_CLUSTERS gives, Cluster being the first.
	clusters []string
	timing   election.Timing
	level    slog.Level
	// nkeyRefused is set once the NATS server refused the member key
	// ("nkeys not supported by the server"): the node then connects, and
	// probes, with its other credentials or none.
	nkeyRefused bool
}

// configError is a problem with one variable.
type configError struct {
	name    string
	problem string
}

func (e *configError) Error() string { return e.name + ": " + e.problem }

func invalid(name, format string, args ...any) error {
	return &configError{name: name, problem: fmt.Sprintf(format, args...)}
}

// loadConfig parses and validates the configuration from environ. Its error
// names the first variable that is missing or invalid, on one line.
func loadConfig(environ map[string]string) (Config, error) {
	cfg, err := env.ParseAsWithOptions[Config](env.Options{Environment: environ})
	if err != nil {
		return Config{}, explain(err, environ)
	}
	if _, both := environ["ELECTION_CLUSTER"]; both && cfg.Clusters != "" {
		return Config{}, invalid("ELECTION_CLUSTERS", "set with ELECTION_CLUSTER: give the clusters in one of them")
	}
	if err := cfg.validate(); err != nil {
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
	var notSet env.VarIsNotSetError
	var empty env.EmptyVarError
	var parse env.ParseError
	switch {
	case errors.As(err, &notSet):
		return invalid(notSet.Key, "required but not set")
	case errors.As(err, &empty):
		return invalid(empty.Key, "required but empty")
	case errors.As(err, &parse):
		field, _ := reflect.TypeFor[Config]().FieldByName(parse.Name)
		name, _, _ := strings.Cut(field.Tag.Get("env"), ",")
		value := environ[name]
		switch parse.Type {
		case reflect.TypeFor[time.Duration]():
			return invalid(name, "%q is not a duration such as 10ms or 1.5s", value)
		case reflect.TypeFor[float64]():
			return invalid(name, "%q is not a number such as 0.05", value)
		case reflect.TypeFor[bool]():
			return invalid(name, "%q is not true or false", value)
		}
		return invalid(name, "%q is not a positive integer", value)
	}
	return fmt.Errorf("environment: %s", strings.ReplaceAll(err.Error(), "\n", " "))
}

// validate checks every variable and fills the derived fields.
func (c *Config) validate() error {
	var err error
	if err := c.NATS.Validate(); err != nil {
		return err
	}
	c.urls, _ = c.NATS.URLs()
	if err := c.checkModes(); err != nil {
		return err
	}
	if c.ID == 0 {
		return invalid("NODE_ID", "must be a positive integer, got 0")
	}
	if c.members, err = c.parseMembers(); err != nil {
		return err
	}
	if c.voters, err = c.parseVoters(); err != nil {
		return err
	}
	if err := c.loadCredentials(); err != nil {
		return err
	}
	if err := c.loadKeys(); err != nil {
		return err
	}
	if !slices.Contains(protocol.Algorithms, protocol.Algorithm(c.Algorithm)) {
		return invalid("ELECTION_ALGORITHM", "%q is not one of %v", c.Algorithm, protocol.Algorithms)
	}
	if c.changingSet() && c.CredsFile == "" {
		return invalid("ELECTION_CREDS_FILE", "required with byzantine and dynamic membership: every member holds a credential of the cluster's authority (and ELECTION_KEYS_FILE lists the configured members)")
	}
	if protocol.Algorithm(c.Algorithm).NeedsKeys() && c.signer == nil {
		return invalid("ELECTION_ALGORITHM", "%s needs member keys: set ELECTION_KEY_FILE and ELECTION_KEYS_FILE (%s)", c.Algorithm, keysDoc)
	}
	if protocol.Algorithm(c.Algorithm) == protocol.Byzantine && !c.changingSet() && len(c.members) < MinByzantineMembers && !c.ByzantineSmall {
		return invalid("ELECTION_ALGORITHM", "a byzantine cluster of %d members tolerates no liar (f = ⌊(n−1)/3⌋ = 0): list at least %d in NODE_PEERS, or set ELECTION_BYZANTINE_SMALL=true to run it anyway",
			len(c.members), MinByzantineMembers)
	}
	if err := c.parseClusters(); err != nil {
		return err
	}
	if err := c.stateKeys(); err != nil {
		return err
	}
	if err := checkListenAddr(c.HTTPAddr); err != nil {
		return err
	}
	if c.DataDir == "" {
		c.DataDir = filepath.Join("baton-data", c.Cluster, fmt.Sprintf("node-%d", c.ID))
		if c.several() {
			c.DataDir = filepath.Join("baton-data", fmt.Sprintf("node-%d", c.ID))
		}
	}
	if err := checkDataDir(c.DataDir); err != nil {
		return err
	}
	if c.ConnectionEvents != node.ConnectionEventsAuto && c.ConnectionEvents != node.ConnectionEventsOff {
		return invalid("ELECTION_CONNECTION_EVENTS", "%q is not auto or off", c.ConnectionEvents)
	}
	if c.MaxMessageAge <= 0 {
		return invalid("ELECTION_MAX_MESSAGE_AGE", "must be positive, got %v", c.MaxMessageAge)
	}
	if c.timing, err = c.ticks(); err != nil {
		return err
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug":
		c.level = slog.LevelDebug
	case "info":
		c.level = slog.LevelInfo
	case "warn":
		c.level = slog.LevelWarn
	case "error":
		c.level = slog.LevelError
	default:
		return invalid("LOG_LEVEL", "%q is not one of debug, info, warn, error", c.LogLevel)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return invalid("LOG_FORMAT", "%q is not one of text, json", c.LogFormat)
	}
	return nil
}

// keysDoc is the section of the documentation on member keys and on
// moving from the shared secret.
const keysDoc = "docs/configuration.md#member-keys"

// MinByzantineMembers is the smallest byzantine cluster that tolerates a
// liar (f = 1); smaller ones need ELECTION_BYZANTINE_SMALL.
const MinByzantineMembers = 4

// checkSeedMode refuses a seed file that the group or others may read or
// write: the seed is the member's identity.
func checkSeedMode(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return invalid("ELECTION_KEY_FILE", "%v", err)
	}
	if mode := info.Mode().Perm(); mode&0o077 != 0 {
		what := "readable"
		if mode&0o044 == 0 {
			what = "writable"
		}
		return invalid("ELECTION_KEY_FILE", "%s is %s by group or others (mode %04o), and the seed is this member's identity: chmod 600 %s", path, what, mode, path)
	}
	return nil
}

// loadKeys reads ELECTION_KEY_FILE and ELECTION_KEYS_FILE and checks them
// against NODE_ID and NODE_PEERS.
func (c *Config) loadKeys() error {
	if c.Secret != "" {
		return invalid("ELECTION_SECRET", "the shared secret was replaced by member keys: unset it and set ELECTION_KEY_FILE and ELECTION_KEYS_FILE (moving: %s)", keysDoc)
	}
	switch {
	case c.KeyFile == "" && c.KeysFile == "", c.memberSet != nil:
		return nil // no keys, or the configured members beside a credential (loadMemberSet)
	case c.KeyFile == "":
		return invalid("ELECTION_KEY_FILE", "required with ELECTION_KEYS_FILE: a node signs what it publishes with its own key")
	case c.KeysFile == "":
		return invalid("ELECTION_KEYS_FILE", "required with ELECTION_KEY_FILE")
	}
	if err := checkSeedMode(c.KeyFile); err != nil {
		return err
	}
	kp, err := signing.ReadSeedFile(c.KeyFile)
	if err != nil {
		return invalid("ELECTION_KEY_FILE", "%v", strings.TrimPrefix(err.Error(), signing.ErrKeys.Error()+": "))
	}
	if c.signer, err = signing.NewSigner(c.ID, kp); err != nil {
		return invalid("ELECTION_KEY_FILE", "%v", strings.TrimPrefix(err.Error(), signing.ErrKeys.Error()+": "))
	}
	if c.keys, err = signing.ReadMemberKeysFile(c.KeysFile); err != nil {
		return invalid("ELECTION_KEYS_FILE", "%s: %v", c.KeysFile, strings.TrimPrefix(err.Error(), signing.ErrKeys.Error()+": "))
	}
	members := c.members
	if c.dynamic() {
		// The members file lists the members that may join; this node
		// must be one of them.
		members = c.keys.IDs()
		if !slices.Contains(members, c.ID) {
			return invalid("ELECTION_KEYS_FILE", "%s: no key for member %d (NODE_ID)", c.KeysFile, c.ID)
		}
	}
	if err := c.keys.Check(members, c.signer); err != nil {
		return invalid("ELECTION_KEYS_FILE", "%s: %v", c.KeysFile, strings.TrimPrefix(err.Error(), signing.ErrKeys.Error()+": "))
	}
	return nil
}

// stateKeys checks what the members file states of its cluster and
// algorithm ("#: cluster", "#: algorithm") against ELECTION_CLUSTER and
// ELECTION_ALGORITHM, and makes the keys state this node's, so that what
// reads announcements for the node knows the cluster from its own
// configuration.
func (c *Config) stateKeys() error {
	if c.keys == nil {
		return nil
	}
	if stated := c.keys.Cluster(); stated != "" && c.several() {
		return invalid("ELECTION_KEYS_FILE", "%s states cluster %q, but the node takes part in several (ELECTION_CLUSTERS): remove the cluster line", c.KeysFile, stated)
	}
	if c.several() {
		return nil // each election states its own (keysOf)
	}
	if stated := c.keys.Cluster(); stated != "" && stated != c.Cluster {
		return invalid("ELECTION_CLUSTER", "%q, but the members file %s states cluster %q", c.Cluster, c.KeysFile, stated)
	}
	if stated := c.keys.Algorithm(); stated != "" && stated != protocol.Algorithm(c.Algorithm) {
		return invalid("ELECTION_ALGORITHM", "%q, but the members file %s states algorithm %q", c.Algorithm, c.KeysFile, stated)
	}
	keys, err := c.keys.State(c.Cluster, protocol.Algorithm(c.Algorithm))
	if err != nil {
		return invalid("ELECTION_KEYS_FILE", "%s: %v", c.KeysFile, strings.TrimPrefix(err.Error(), signing.ErrKeys.Error()+": "))
	}
	c.keys = keys
	return nil
}

// asNkeyUser reports whether the node connects to NATS as the nkey user
// of its member key: it has one, no other NATS credentials are set, and
// the server did not refuse nkeys (nkeyRefused).
func (c *Config) asNkeyUser() bool {
	return c.signer != nil && c.NATS.User == "" && c.NATS.Token == "" && c.NATS.Creds == "" && !c.nkeyRefused
}

// withCredential reports whether the node connects to NATS with its
// member credential (ELECTION_CREDS_FILE): it has one and no other NATS
// credentials are set.
func (c *Config) withCredential() bool {
	return c.CredsFile != "" && c.NATS.User == "" && c.NATS.Token == "" && c.NATS.Creds == ""
}

// keyOptions authenticate to NATS as the nkey user of the member key, if
// the node connects so (asNkeyUser); nil otherwise.
func (c *Config) keyOptions() []nats.Option {
	if c.withCredential() {
		// The server checks the credential itself, against the
		// authority it trusts, and confines the member to its cluster's
		// subjects and the inboxes (internal/natsauth).
		return membercreds.NATSOptions(c.signer.Credential(), c.signer.KeyPair())
	}
	if !c.asNkeyUser() {
		return nil
	}
	// The member user may subscribe only under its own inbox prefix
	// (internal/natsconf): replies come there.
	return []nats.Option{nats.Nkey(c.signer.PublicKey(), c.signer.KeyPair().Sign),
		nats.CustomInboxPrefix(protocol.InboxPrefix(c.Cluster, c.ID))}
}

// authOptions authenticate to NATS: as the nkey user of the member key
// (asNkeyUser), else with the NATS_* credentials; TLS either way.
func (c *Config) authOptions() []nats.Option {
	return append(c.NATS.AuthOptions(), c.keyOptions()...)
}

func parsePeers(s string, id uint64) ([]uint64, error) {
	var members []uint64
	for raw := range strings.SplitSeq(s, ",") {
		raw = strings.TrimSpace(raw)
		peer, err := strconv.ParseUint(raw, 10, 64)
		if err != nil || peer == 0 {
			return nil, invalid("NODE_PEERS", "%q is not a positive integer", raw)
		}
		if slices.Contains(members, peer) {
			return nil, invalid("NODE_PEERS", "%d appears twice", peer)
		}
		members = append(members, peer)
	}
	if !slices.Contains(members, id) {
		return nil, invalid("NODE_PEERS", "does not contain NODE_ID %d", id)
	}
	return members, nil
}

// checkDataDir creates the data directory if needed and checks that the
// node can write there.
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

// ticks converts the durations to the machine's timing. Intervals at which
// something is sent round down, time-outs round up, so no time-out is
// shorter than configured.
func (c *Config) ticks() (election.Timing, error) {
	var t election.Timing
	if c.Tick <= 0 {
		return t, invalid("ELECTION_TICK", "must be positive, got %v", c.Tick)
	}
	atLeastTick := func(name string, d time.Duration) error {
		if d < c.Tick {
			return invalid(name, "%v is shorter than one tick (ELECTION_TICK=%v)", d, c.Tick)
		}
		return nil
	}
	up := func(d time.Duration) int { return int((d + c.Tick - 1) / c.Tick) }
	if c.HeartbeatInterval < 0 {
		return t, invalid("ELECTION_HEARTBEAT_INTERVAL", "must be positive, got %v", c.HeartbeatInterval)
	}
	if c.HeartbeatInterval == 0 {
		ticks := election.DefaultHeartbeatTicks
		if protocol.Algorithm(c.Algorithm).Leases() {
			ticks = election.DefaultRenewalTicks
		}
		c.HeartbeatInterval = time.Duration(ticks) * 10 * time.Millisecond
	}
	if err := atLeastTick("ELECTION_HEARTBEAT_INTERVAL", c.HeartbeatInterval); err != nil {
		return t, err
	}
	if err := atLeastTick("ELECTION_LEADER_TIMEOUT", c.LeaderTimeout); err != nil {
		return t, err
	}
	if c.TMax <= 0 {
		return t, invalid("ELECTION_T_MAX", "must be positive, got %v", c.TMax)
	}
	if c.TProcess < 0 {
		return t, invalid("ELECTION_T_PROCESS", "must not be negative, got %v", c.TProcess)
	}
	answer := 2*c.TMax + c.TProcess
	if err := atLeastTick("ELECTION_T_MAX", answer); err != nil {
		return t, invalid("ELECTION_T_MAX", "T = 2·t_max + t_process = %v is shorter than one tick (ELECTION_TICK=%v)", answer, c.Tick)
	}
	coordinator := c.CoordinatorTimeout
	if coordinator == 0 {
		coordinator = time.Duration(len(c.members)+1) * answer
	}
	if coordinator < answer {
		return t, invalid("ELECTION_COORDINATOR_TIMEOUT", "%v is shorter than T = 2·t_max + t_process = %v", coordinator, answer)
	}
	presence := 0
	if c.dynamic() {
		if c.PresenceInterval < c.Tick {
			return t, invalid("ELECTION_PRESENCE_INTERVAL", "%v is shorter than one tick (ELECTION_TICK=%v)", c.PresenceInterval, c.Tick)
		}
		presence = int(c.PresenceInterval / c.Tick)
	}
	t = election.Timing{
		PresenceTicks:      presence,
		HeartbeatTicks:     int(c.HeartbeatInterval / c.Tick),
		LeaderTimeoutTicks: up(c.LeaderTimeout),
		AnswerTicks:        up(answer),
		CoordinatorTicks:   up(coordinator),
	}
	if t.LeaderTimeoutTicks <= t.HeartbeatTicks {
		return t, invalid("ELECTION_LEADER_TIMEOUT", "%v must exceed ELECTION_HEARTBEAT_INTERVAL (%v) by at least one tick", c.LeaderTimeout, c.HeartbeatInterval)
	}
	if c.MaxDrift < 0 || c.MaxDrift >= 0.5 || c.MaxDrift != c.MaxDrift {
		return t, invalid("ELECTION_MAX_DRIFT", "%v is not a fraction in [0, 0.5)", c.MaxDrift)
	}
	if protocol.Algorithm(c.Algorithm).Leases() {
		if c.Lease < 0 {
			return t, invalid("ELECTION_LEASE", "must be positive, got %v", c.Lease)
		}
		if c.Lease == 0 {
			// The default: 200 ms, and 8 ms per member above 25.
			c.Lease = time.Duration(election.DefaultLease(max(len(c.members), len(c.voters)))) * 10 * time.Millisecond
		}
		t.LeaseTicks = int(c.Lease / c.Tick) // a grant rounded down is still safe: the leader's share comes from it
		t.LeaderLeaseTicks = election.LeaderLease(t.LeaseTicks, c.MaxDrift)
		if t.LeaderLeaseTicks <= t.HeartbeatTicks {
			return t, invalid("ELECTION_LEASE", "%v leaves the leader %d ticks of lease with ELECTION_MAX_DRIFT=%v, not more than the heartbeat interval (%d ticks): raise it", c.Lease, t.LeaderLeaseTicks, c.MaxDrift, t.HeartbeatTicks)
		}
	}
	return t, nil
}

// natsOptions are the connection options but the member key's
// (keyOptions, which natsconn.Dial adds while the server takes them):
// never give up on the server, notice a dead connection within seconds,
// drain quickly on shutdown, log each failed reconnection with its
// reason, and authenticate with the NATS_* credentials. natsconn.Dial
// retries the first connection and logs its failed attempts.
func (c *Config) natsOptions(log *slog.Logger) []nats.Option {
	reconnects := &natsconn.Attempts{Log: log}
	opts := []nats.Option{
		nats.Name(protocol.ConnectionName(c.Cluster, c.ID)),
		nats.NoEcho(),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		// A connection that died without a word (a cut network) is found
		// out after two unanswered pings, in 2-3 s, and replaced.
		nats.PingInterval(time.Second),
		nats.MaxPingsOutstanding(2),
		nats.DrainTimeout(time.Second),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("NATS reconnected", "url", nc.ConnectedUrlRedacted()) }),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { reconnects.Failed(err) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { log.Warn("NATS disconnected", "err", err) }),
		// The server's refusals of a reconnection (its authorization
		// errors) come here too.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { log.Warn("NATS error", "err", err) }),
	}
	return append(opts, c.NATS.AuthOptions()...)
}

// probe opens a connection named name to the node's NATS server and closes
// it: the node checks with it that the server delivers connection events.
func (c *Config) probe(ctx context.Context, name string) error {
	return natsconn.Probe(ctx, strings.Join(c.urls, ","), name, c.authOptions())
}

// newLogger builds the service's logger on w.
func (c *Config) newLogger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.level}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// checkModes checks the values of the variables that choose a mode of
// the contract: the membership, keeping the leader and the rank.
func (c *Config) checkModes() error {
	switch {
	case c.Membership != MembershipStatic && c.Membership != MembershipDynamic:
		return invalid("ELECTION_MEMBERSHIP", "%q is not static or dynamic", c.Membership)
	case c.KeepLeader && !c.dynamic():
		return invalid("ELECTION_KEEP_LEADER", "true needs dynamic membership (ELECTION_MEMBERSHIP=dynamic): a static cluster's highest live ID leads")
	case c.Rank != "" && c.Rank != RankID && c.Rank != RankSpread:
		return invalid("ELECTION_RANK", "%q is not %s or %s", c.Rank, RankID, RankSpread)
	}
	return nil
}

// The values of ELECTION_RANK.
const (
	RankID     = election.RankID
	RankSpread = election.RankSpread
)

// parseClusters fills clusters from ELECTION_CLUSTER or ELECTION_CLUSTERS,
// and the rank's default.
func (c *Config) parseClusters() error {
	if c.Clusters == "" {
		if protocol.ValidateCluster(c.Cluster) != nil {
			return invalid("ELECTION_CLUSTER", "%q does not match [A-Za-z0-9_-]+", c.Cluster)
		}
		c.clusters = []string{c.Cluster}
	} else {
		names, err := clusterlist.Expand(c.Clusters)
		if err != nil {
			return invalid("ELECTION_CLUSTERS", "%s", strings.TrimPrefix(err.Error(), clusterlist.ErrList.Error()+": "))
		}
		c.clusters, c.Cluster = names, names[0]
	}
	if c.Rank == "" {
		c.Rank = RankID
		if len(c.clusters) > 1 {
			c.Rank = RankSpread
		}
	}
	if c.BatchWindow < 0 || c.BatchWindow > time.Second {
		return invalid("ELECTION_BATCH_WINDOW", "%v: want 0 (off) to 1s", c.BatchWindow)
	}
	if len(c.clusters) == 1 {
		return nil
	}
	switch {
	case c.CredsFile != "":
		return invalid("ELECTION_CREDS_FILE", "set with several clusters (ELECTION_CLUSTERS): a credential is issued for one cluster; many elections with credentials are not implemented by this version of the node")
	case c.changingSet():
		return invalid("ELECTION_CLUSTERS", "several clusters with byzantine and dynamic membership are not implemented by this version of the node")
	}
	return nil
}

// several reports whether the node takes part in several elections.
func (c *Config) several() bool { return len(c.clusters) > 1 }

// dataDir is the data directory of the election of cluster: DataDir
// with one election, DataDir/<cluster> with several.
func (c *Config) dataDir(cluster string) string {
	if !c.several() {
		return c.DataDir
	}
	return filepath.Join(c.DataDir, cluster)
}

// keysOf are the member keys as the election of cluster reads them
// (stateKeys): they state its cluster.
func (c *Config) keysOf(cluster string) (*signing.MemberKeys, error) {
	if c.keys == nil || !c.several() {
		return c.keys, nil
	}
	return c.keys.State(cluster, protocol.Algorithm(c.Algorithm))
}

// The values of ELECTION_MEMBERSHIP.
const (
	MembershipStatic  = "static"
	MembershipDynamic = "dynamic"
)

// dynamic reports whether the membership is dynamic.
func (c *Config) dynamic() bool { return c.Membership == MembershipDynamic }

// parseMembers returns the members the node knows at start: NODE_PEERS
// with static membership; with dynamic membership, itself alone (NODE_PEERS
// must not be set: the members are those present).
func (c *Config) parseMembers() ([]uint64, error) {
	if !c.dynamic() {
		if strings.TrimSpace(c.Peers) == "" {
			return nil, invalid("NODE_PEERS", "required with static membership (ELECTION_MEMBERSHIP=static, the default), but not set")
		}
		return parsePeers(c.Peers, c.ID)
	}
	if c.Peers != "" {
		return nil, invalid("NODE_PEERS", "set, but with dynamic membership the members are those present: unset it")
	}
	if !protocol.DynamicMember(c.ID) {
		return nil, invalid("NODE_ID", "%d is above %d, the largest ID of dynamic membership", c.ID, protocol.MaxMemberID)
	}
	return []uint64{c.ID}, nil
}

// parseVoters reads ELECTION_VOTERS: required with paxos and dynamic
// membership, refused otherwise.
func (c *Config) parseVoters() ([]uint64, error) {
	needed := c.dynamic() && c.Algorithm == string(protocol.Paxos)
	switch {
	case !needed && c.Voters != "":
		return nil, invalid("ELECTION_VOTERS", "set, but voters are for paxos with dynamic membership (with static membership every member of NODE_PEERS votes)")
	case !needed:
		return nil, nil
	case strings.TrimSpace(c.Voters) == "":
		return nil, invalid("ELECTION_VOTERS", "required with paxos and dynamic membership: the IDs of the members whose acceptors form the quorums, such as 1,2,3")
	}
	var voters []uint64
	for raw := range strings.SplitSeq(c.Voters, ",") {
		raw = strings.TrimSpace(raw)
		id, err := strconv.ParseUint(raw, 10, 64)
		if err != nil || !protocol.DynamicMember(id) {
			return nil, invalid("ELECTION_VOTERS", "%q is not an ID from 1 to %d", raw, protocol.MaxMemberID)
		}
		if slices.Contains(voters, id) {
			return nil, invalid("ELECTION_VOTERS", "%d appears twice", id)
		}
		voters = append(voters, id)
	}
	if len(voters) > election.MaxVoters {
		return nil, invalid("ELECTION_VOTERS", "%d voters, at most %d", len(voters), election.MaxVoters)
	}
	return voters, nil
}

// loadCredentials reads ELECTION_CREDS_FILE and ELECTION_AUTHORITY: with
// dynamic membership, instead of member keys, this member's credential
// and the authority every member's is checked with.
func (c *Config) loadCredentials() error {
	switch {
	case c.CredsFile == "" && c.Authority == "":
		return nil
	case c.CredsFile != "" && c.KeyFile != "":
		return invalid("ELECTION_CREDS_FILE", "set with ELECTION_KEY_FILE: use the credential or the member keys, not both")
	case c.CredsFile != "" && c.KeysFile != "" && !c.changingSet():
		return invalid("ELECTION_CREDS_FILE", "set with ELECTION_KEYS_FILE: use the credential or the member keys, not both (both only with byzantine and dynamic membership, where ELECTION_KEYS_FILE lists the configured members)")
	case c.CredsFile == "":
		return invalid("ELECTION_CREDS_FILE", "required with ELECTION_AUTHORITY: a member signs what it publishes with its own credential")
	case c.Authority == "":
		return invalid("ELECTION_AUTHORITY", "required with ELECTION_CREDS_FILE: the authority's public key (A…) checks every member's credential")
	case !c.dynamic():
		return invalid("ELECTION_CREDS_FILE", "set, but credentials are for dynamic membership (ELECTION_MEMBERSHIP=dynamic); a static cluster uses ELECTION_KEY_FILE and ELECTION_KEYS_FILE")
	}
	member, err := membercreds.Load(c.CredsFile, c.Authority, c.Cluster, time.Now())
	switch {
	case errors.Is(err, membercreds.ErrAuthority):
		return invalid("ELECTION_AUTHORITY", "%v", err)
	case err != nil:
		return invalid("ELECTION_CREDS_FILE", "%v", err)
	case member.Credential.ID != c.ID:
		return invalid("ELECTION_CREDS_FILE", "%s is the credential of member %d, but NODE_ID is %d", c.CredsFile, member.Credential.ID, c.ID)
	}
	c.signer, c.keys = member.Signer, member.Keys
	if c.changingSet() {
		return c.loadMemberSet()
	}
	return nil
}

// changingSet reports whether the node runs byzantine with dynamic
// membership: its member set changes by the members' certified
// decisions, from the configured set ELECTION_KEYS_FILE lists.
func (c *Config) changingSet() bool {
	return c.dynamic() && c.Algorithm == string(protocol.Byzantine)
}

// loadMemberSet reads ELECTION_KEYS_FILE, with byzantine and dynamic
// membership: the configured members (version 0 of the member set).
func (c *Config) loadMemberSet() error {
	if c.KeysFile == "" {
		return invalid("ELECTION_KEYS_FILE", "required with byzantine and dynamic membership: the configured members and their public keys (version 0 of the member set), at least %d", MinByzantineMembers)
	}
	set, err := signing.ReadMemberKeysFile(c.KeysFile)
	if err != nil {
		return invalid("ELECTION_KEYS_FILE", "%s: %v", c.KeysFile, strings.TrimPrefix(err.Error(), signing.ErrKeys.Error()+": "))
	}
	if set.Len() < MinByzantineMembers && !c.ByzantineSmall {
		return invalid("ELECTION_KEYS_FILE", "%s lists %d members: a byzantine cluster of fewer than %d tolerates no liar (set ELECTION_BYZANTINE_SMALL=true to run it anyway)", c.KeysFile, set.Len(), MinByzantineMembers)
	}
	if public, ok := set.PublicKey(c.ID); ok && public != c.signer.PublicKey() {
		return invalid("ELECTION_KEYS_FILE", "%s lists member %d with key %s, but its credential binds %s", c.KeysFile, c.ID, public, c.signer.PublicKey())
	}
	c.memberSet = set
	return nil
}
