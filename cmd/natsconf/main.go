// Command natsconf makes the member keys of clusters where they are missing and
// renders the NATS accounts configuration that lists them as users
// (natsconf.Render): for each -cluster name:algorithm=ID,ID,…, the
// directory <dir>/<name> holds node-<id>.seed (ELECTION_KEY_FILE) and
// members.keys (ELECTION_KEYS_FILE), made as the keys command makes them,
// stating the cluster's name and algorithm; keys already there (from an
// earlier run or from the keys command) are kept and used, and must be
// those of the members named; a members file that states neither gets the
// statements (memberkeys.Ensure), one that states another cluster or
// algorithm is an error. ":algorithm" may be left out when the name is
// an algorithm's, as in Compose's clusters. The configuration goes to
// <dir>/accounts.conf, where Compose mounts it over the image's copy.
//
// Each -dynamic name is a cluster whose members connect with credentials
// (dynamic membership): the NATS servers then check them (cmd/natsd,
// internal/natsauth). natsconf makes the check's keys where they are
// missing, <dir>/callout/issuer.seed and user.seed, renders the callout
// account and the auth_callout block, and copies each such cluster's
// authority, <dir>/<name>/authority.pub (the keys command makes it), to
// <dir>/callout/authorities/<name>.authority, the directory the servers
// read (NATS_CALLOUT_AUTHORITIES_DIR), where <name>.revoked may list
// revoked keys. Without -dynamic the configuration has no callout.
//
//	go run ./cmd/natsconf -dir .keys -cluster bully=1,2,3,4,5 -cluster prod:paxos=1,2,3 -dynamic fleet
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/baton-election/baton/internal/natsauth"
	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/memberkeys"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// cluster is what a -cluster flag gives: the algorithm and the members.
type cluster struct {
	algorithm protocol.Algorithm
	ids       []uint64
}

type clusters map[string]cluster

func (c clusters) String() string { return fmt.Sprint(map[string]cluster(c)) }

func (c clusters) Set(v string) error {
	spec, list, ok := strings.Cut(v, "=")
	if !ok {
		return errors.New("want name:algorithm=ID,ID,…")
	}
	name, alg, stated := strings.Cut(spec, ":")
	if err := protocol.ValidateCluster(name); err != nil {
		return err
	}
	algorithm := protocol.Algorithm(alg)
	if !stated {
		algorithm = protocol.Algorithm(name)
	}
	if !algorithm.Known() {
		if !stated {
			return fmt.Errorf("cluster %s: name its algorithm, %s:<algorithm>=…, one of %v", name, name, protocol.Algorithms)
		}
		return fmt.Errorf("cluster %s: algorithm %q is not one of %v", name, alg, protocol.Algorithms)
	}
	if _, dup := c[name]; dup {
		return fmt.Errorf("cluster %s given twice", name)
	}
	ids, err := memberkeys.ParseIDs(list)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", name, err)
	}
	c[name] = cluster{algorithm: algorithm, ids: ids}
	return nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0) // -h asked for the usage, which was printed
		}
		fmt.Fprintln(os.Stderr, "natsconf:", err)
		os.Exit(2)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("natsconf", flag.ContinueOnError)
	dir := fs.String("dir", ".keys", "directory of the keys (one subdirectory per cluster) and of accounts.conf")
	cs := clusters{}
	fs.Var(cs, "cluster", "a cluster, its algorithm and its member IDs, name:algorithm=ID,ID,… (name=ID,… when the name is an algorithm's; repeat for each cluster)")
	var dynamic []string
	fs.Func("dynamic", "a cluster whose members connect with credentials, whose authority <dir>/<name>/authority.pub the NATS servers' credential check trusts (repeat for each)", func(v string) error {
		if err := protocol.ValidateCluster(v); err != nil {
			return err
		}
		if slices.Contains(dynamic, v) {
			return fmt.Errorf("cluster %s given twice", v)
		}
		dynamic = append(dynamic, v)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if len(cs) == 0 && len(dynamic) == 0 {
		return errors.New("no -cluster or -dynamic given")
	}
	for _, name := range dynamic {
		if _, ok := cs[name]; ok {
			return fmt.Errorf("cluster %s given as -cluster, with member keys, and as -dynamic, with credentials: one or the other", name)
		}
	}
	members := map[string]*signing.MemberKeys{}
	for name, c := range cs {
		d := filepath.Join(*dir, name)
		keys, made, err := memberkeys.Ensure(d, name, c.algorithm, c.ids)
		if err != nil {
			return fmt.Errorf("cluster %s: %w", name, err)
		}
		members[name] = keys
		if made {
			fmt.Printf("made the keys of cluster %s in %s\n", name, d)
		}
	}
	callout, err := ensureCallout(*dir, dynamic)
	if err != nil {
		return err
	}
	conf, err := natsconf.RenderWith(members, callout)
	if err != nil {
		return err
	}
	out := filepath.Join(*dir, "accounts.conf")
	if err := memberkeys.WriteFile(out, []byte(conf), 0o644); err != nil {
		return err
	}
	fmt.Println("wrote", out)
	return nil
}

// calloutDir is the subdirectory of the credential check's keys and
// authorities.
const calloutDir = "callout"

// ensureCallout makes the credential check's keys in <dir>/callout where
// missing and copies the authorities of the clusters dynamic into
// <dir>/callout/authorities; nil, with no cluster.
func ensureCallout(dir string, dynamic []string) (*natsconf.Callout, error) {
	if len(dynamic) == 0 {
		return nil, nil
	}
	d := filepath.Join(dir, calloutDir)
	keys, made, err := natsauth.EnsureKeys(d)
	if err != nil {
		return nil, err
	}
	if made {
		fmt.Printf("made the keys of the NATS servers' credential check in %s\n", d)
	}
	authorities := filepath.Join(d, "authorities")
	if err := os.MkdirAll(authorities, 0o755); err != nil {
		return nil, err
	}
	for _, name := range dynamic {
		from := filepath.Join(dir, name, membercreds.AuthorityFile)
		data, err := os.ReadFile(from)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w (make its authority first: go run ./cmd/keys -out %s -cluster %s -authority new)", name, err, filepath.Join(dir, name), name)
		}
		if _, err := membercreds.ParseAuthorities(strings.TrimSpace(string(data))); err != nil {
			return nil, fmt.Errorf("cluster %s: %s: %w", name, from, err)
		}
		if err := memberkeys.WriteFile(filepath.Join(authorities, name+natsauth.AuthoritySuffix), data, 0o644); err != nil {
			return nil, err
		}
	}
	return &natsconf.Callout{Issuer: keys.Issuer, User: keys.User}, nil
}
