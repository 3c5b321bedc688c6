package observer

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/baton-election/baton/internal/clusterlist"
	"github.com/baton-election/baton/internal/natsconn"
	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// Config is the observer's configuration, read from the environment.
type Config struct {
	// NATS is NATS_URL (the server URL, or several separated by commas)
	// and the NATS credentials and TLS files, as for the nodes.
	NATS natsconn.Config
	// HTTPAddr is the listen address of the API, the page and the metrics.
	HTTPAddr string `env:"HTTP_ADDR" envDefault:":8080"`
	// DataDir is the directory of the history files, one per cluster.
	DataDir string `env:"OBSERVER_DATA" envDefault:"observer-data"`
	// Keep is how many leaderships per cluster the history keeps: once it
	// holds a tenth more, the oldest are dropped from memory and disk. 0
	// keeps every one.
	Keep int `env:"OBSERVER_KEEP" envDefault:"100000"`
	// Stream is the JetStream stream that captures every cluster's
	// announcements. The observer creates or updates it on start.
	Stream string `env:"OBSERVER_STREAM" envDefault:"ELECTION_LEADERS"`
	// StreamMaxAge is how long the stream keeps announcements; 0 keeps
	// them forever. An observer down for longer loses what expired.
	StreamMaxAge time.Duration `env:"OBSERVER_STREAM_MAX_AGE" envDefault:"720h"`
	// StreamReplicas is how many JetStream servers keep a copy of the
	// stream: 1 for a single server, 3 for a three-server cluster.
	StreamReplicas int `env:"OBSERVER_STREAM_REPLICAS" envDefault:"1"`
	// Consumer is the name of the observer's durable consumer. Observers
	// with their own data directories need their own names.
	Consumer string `env:"OBSERVER_CONSUMER" envDefault:"observer"`
	// LeaderTimeout is the failure-detection window: a leader not heard
	// from for this long has gone, and two nodes heard as leader within
	// it act at the same time. It matches the nodes' leader time-out.
	LeaderTimeout time.Duration `env:"OBSERVER_LEADER_TIMEOUT" envDefault:"200ms"`
	// SplitGrace is how long a superseded leader may still be heard
	// before it counts as split brain: its heartbeats in flight. Likewise,
	// a leader not heard for longer than this when its successor is
	// announced ended silent at its last message, leaving a gap.
	SplitGrace time.Duration `env:"OBSERVER_SPLIT_GRACE" envDefault:"100ms"`
	// MemberTimeout is how long a member of a cluster with dynamic
	// membership may go unheard (no presence, no other broadcast) before
	// it counts as gone: four presence intervals of the nodes.
	MemberTimeout time.Duration `env:"OBSERVER_MEMBER_TIMEOUT" envDefault:"4s"`
	// MaxStreams bounds the event streams open at once, GET /api/events
	// and the page's GET /events together; one more is refused with 503
	// and Retry-After until a client leaves. Each costs a connection, a
	// goroutine and a small buffer.
	MaxStreams int `env:"OBSERVER_MAX_STREAMS" envDefault:"256"`
	// MaxClusters bounds the clusters the observer follows: those with a
	// history and those only heard live so far. A message of one more
	// cluster is dropped, counted (observer_clusters_refused_total) and
	// logged. The clusters the history holds at the start stay followed,
	// even beyond it.
	MaxClusters int `env:"OBSERVER_MAX_CLUSTERS" envDefault:"20000"`
	// KeysDir is a directory of member keys files, one per cluster:
	// <cluster>.keys, in the format of the nodes' ELECTION_KEYS_FILE.
	// When set, the observer records only the clusters it has keys for,
	// and of them only announcements, heartbeats, lease renewals and
	// resigns signed by the member they name; it counts what it refuses
	// (result bad_signature). Unset, it believes unsigned messages (a
	// warning is logged). It holds public keys only. A file states its
	// cluster's algorithm ("#: algorithm <name>", as the keys command
	// writes it): announcements of another algorithm are refused, and in
	// a byzantine cluster every announcement needs a certificate that
	// holds, whatever algorithm it names. Of a file that states no
	// algorithm, only certified announcements are recorded (a warning
	// names the file at the start). A file that states a cluster other
	// than its name is an error.
	KeysDir string `env:"OBSERVER_KEYS_DIR"`
	// Keys are the member keys by cluster, read from KeysDir by
	// ParseConfig (or LoadKeys); nil checks nothing.
	Keys map[string]*signing.MemberKeys
	// Secret is read only to refuse it: the shared secret was replaced
	// by member keys.
	Secret string `env:"ELECTION_SECRET"`
	// LogLevel is debug, info, warn or error.
	LogLevel slog.Level `env:"LOG_LEVEL" envDefault:"info"`
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("observer: invalid configuration")

// ParseConfig reads the configuration from the environment and checks it.
// Its errors name the variable at fault.
func ParseConfig() (Config, error) {
	cfg, err := env.ParseAs[Config]()
	if err != nil {
		return Config{}, describeEnvError(err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	if cfg.KeysDir != "" {
		keys, err := LoadKeys(cfg.KeysDir)
		if err != nil {
			return Config{}, err
		}
		cfg.Keys = keys
	}
	return cfg, nil
}

// LoadKeys reads every <cluster>.keys file of dir; the keys state the
// cluster of the file's name. A name may also be a list of clusters with
// a range, as ELECTION_CLUSTERS gives them (shard-{0..255}.keys): the
// keys are then each of these clusters'. Its errors name OBSERVER_KEYS_DIR, the file
// and, for a bad entry, the line; a file that states another cluster is
// one. A <cluster>.authority file instead holds the public keys (A…, on
// one or more lines, or comma-separated) of the authority of a cluster
// with member credentials (dynamic membership): each member's key then
// comes from the credential its messages carry, checked with them. A
// cluster with both is a byzantine cluster with dynamic membership: the
// authority checks the credentials, and the .keys file lists the
// configured members, version 0 of the member set, which the observer
// follows as it changes (signing.MemberSets).
func LoadKeys(dir string) (map[string]*signing.MemberKeys, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: OBSERVER_KEYS_DIR: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, bad("%v", err)
	}
	authorities := make(map[string]*signing.MemberKeys)
	listed := make(map[string]*signing.MemberKeys)
	for _, e := range entries {
		if cluster, ok := strings.CutSuffix(e.Name(), ".authority"); ok && !e.IsDir() {
			k, err := loadAuthority(dir, e.Name(), cluster)
			if err != nil {
				return nil, bad("%v", err)
			}
			authorities[cluster] = k
			continue
		}
		name, ok := strings.CutSuffix(e.Name(), ".keys")
		if !ok || e.IsDir() {
			continue
		}
		// The name is a cluster, or a list of them with a range (a
		// process's ELECTION_CLUSTERS, shard-{0..255}.keys): the keys are
		// each cluster's.
		clusters, err := clusterlist.Expand(name)
		if err != nil {
			return nil, bad("%s: %q is not a cluster name ([A-Za-z0-9_-]+) or a list of them (%v)", e.Name(), name, err)
		}
		k, err := signing.ReadMemberKeysFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, bad("%s: %v", e.Name(), strings.TrimPrefix(err.Error(), signing.ErrKeys.Error()+": "))
		}
		if stated := k.Cluster(); stated != "" && len(clusters) > 1 {
			return nil, bad("%s: states cluster %q, but names %d", e.Name(), stated, len(clusters))
		}
		for _, cluster := range clusters {
			if listed[cluster] != nil {
				return nil, bad("%s: cluster %s has keys in another file too", e.Name(), cluster)
			}
			// The file's name is the cluster: a file that states another
			// is refused.
			stated, err := k.State(cluster, "")
			if err != nil {
				return nil, bad("%s: %v", e.Name(), strings.TrimPrefix(err.Error(), signing.ErrKeys.Error()+": "))
			}
			listed[cluster] = stated
		}
	}
	keys := make(map[string]*signing.MemberKeys, len(authorities)+len(listed))
	for cluster, k := range listed {
		keys[cluster] = k
	}
	for cluster, k := range authorities {
		if configured, ok := listed[cluster]; ok {
			sets, err := signing.NewMemberSets(cluster, configured)
			if err != nil {
				return nil, bad("%s.keys: %v", cluster, strings.TrimPrefix(err.Error(), signing.ErrKeys.Error()+": "))
			}
			k = k.WithMemberSets(sets)
		}
		keys[cluster] = k
	}
	if len(keys) == 0 {
		return nil, bad("%s holds no <cluster>.keys or <cluster>.authority file", dir)
	}
	return keys, nil
}

// loadAuthority reads the authority file name of cluster in dir.
func loadAuthority(dir, name, cluster string) (*signing.MemberKeys, error) {
	if protocol.ValidateCluster(cluster) != nil {
		return nil, fmt.Errorf("%s: %q is not a cluster name ([A-Za-z0-9_-]+)", name, cluster)
	}
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	if len(data) > 64<<10 {
		return nil, fmt.Errorf("%s: %d bytes, more than an authority's keys", name, len(data))
	}
	checker, err := membercreds.NewChecker(cluster, strings.Join(strings.Fields(strings.ReplaceAll(string(data), ",", " ")), ","))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return checker.Keys().State(cluster, "")
}

// Validate checks the values, naming the variable of the first bad one.
func (c Config) Validate() error {
	bad := func(name, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, name, fmt.Sprintf(format, args...))
	}
	if err := c.NATS.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.Secret != "" {
		return bad("ELECTION_SECRET", "the shared secret was replaced by member keys: unset it and give the clusters' public keys in OBSERVER_KEYS_DIR (moving: docs/configuration.md#member-keys)")
	}
	switch {
	case c.HTTPAddr == "":
		return bad("HTTP_ADDR", "empty")
	case c.DataDir == "":
		return bad("OBSERVER_DATA", "empty")
	case c.Keep < 0:
		return bad("OBSERVER_KEEP", "%d is negative", c.Keep)
	case !validName(c.Stream):
		return bad("OBSERVER_STREAM", "%q must be letters, digits, _ or -", c.Stream)
	case c.StreamMaxAge < 0:
		return bad("OBSERVER_STREAM_MAX_AGE", "%v is negative", c.StreamMaxAge)
	case c.StreamReplicas < 1 || c.StreamReplicas > 5:
		return bad("OBSERVER_STREAM_REPLICAS", "%d must be from 1 to 5", c.StreamReplicas)
	case !validName(c.Consumer):
		return bad("OBSERVER_CONSUMER", "%q must be letters, digits, _ or -", c.Consumer)
	case c.LeaderTimeout <= 0:
		return bad("OBSERVER_LEADER_TIMEOUT", "%v must be positive", c.LeaderTimeout)
	case c.SplitGrace <= 0 || c.SplitGrace >= c.LeaderTimeout:
		return bad("OBSERVER_SPLIT_GRACE", "%v must be positive and below OBSERVER_LEADER_TIMEOUT (%v)", c.SplitGrace, c.LeaderTimeout)
	case c.MemberTimeout <= 0:
		return bad("OBSERVER_MEMBER_TIMEOUT", "%v must be positive", c.MemberTimeout)
	case c.MaxStreams < 1:
		return bad("OBSERVER_MAX_STREAMS", "%d must be at least 1", c.MaxStreams)
	case c.MaxClusters < 1:
		return bad("OBSERVER_MAX_CLUSTERS", "%d must be at least 1", c.MaxClusters)
	}
	return nil
}

// validName accepts JetStream stream and consumer names.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// describeEnvError turns a caarlos0/env error into one that names the
// environment variable rather than the Go field.
func describeEnvError(err error) error {
	var parse env.ParseError
	if errors.As(err, &parse) {
		name := parse.Name
		if f, ok := reflect.TypeFor[Config]().FieldByName(parse.Name); ok {
			name = f.Tag.Get("env")
		}
		if num, ok := errors.AsType[*strconv.NumError](parse.Err); ok {
			return fmt.Errorf("%w: %s: %q is not a whole number", ErrConfig, name, num.Num)
		}
		return fmt.Errorf("%w: %s: %v", ErrConfig, name, parse.Err)
	}
	return fmt.Errorf("%w: %v", ErrConfig, err)
}
