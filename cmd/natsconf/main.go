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
//	go run ./cmd/natsconf -dir .keys -cluster bully=1,2,3,4,5 -cluster prod:paxos=1,2,3
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/pkg/memberkeys"
	"github.com/baton-election/baton/pkg/protocol"
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if len(cs) == 0 {
		return errors.New("no -cluster given")
	}
	members := map[string]*protocol.MemberKeys{}
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
	conf, err := natsconf.Render(members)
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
