// Command keys generates the member keys of a cluster: one Ed25519 user
// key per member in the NATS nkeys format.
//
//	go run ./cmd/keys -out DIR -cluster prod -algorithm paxos -peers 1,2,3,4,5
//
// writes, in DIR (created if missing):
//
//	node-<id>.seed   the member's seed (SU…), one line, mode 0600: its
//	                 ELECTION_KEY_FILE
//	members.keys     "<ID> <public key U…>" per member, after a comment
//	                 line and the lines "#: cluster <name>" and
//	                 "#: algorithm <name>": every node's
//	                 ELECTION_KEYS_FILE, and what applications and the
//	                 observer verify with (they take the cluster's
//	                 algorithm from it, never from a message)
//
// -cluster and -algorithm are required: the node refuses a file that
// states another cluster or algorithm than its ELECTION_CLUSTER and
// ELECTION_ALGORITHM.
//
// It refuses to overwrite: if any of these files exists, it writes
// nothing. The names and the format are stable (docs/configuration.md):
// the NATS configuration lists the same public keys as nkey users
// (cmd/natsconf, which makes keys the same way where they are missing).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/baton-election/baton/pkg/memberkeys"
	"github.com/baton-election/baton/pkg/protocol"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run is the command; it returns the exit status: 0 after -h, 2 for bad
// flags, 1 when the keys cannot be written.
func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("keys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "directory to write the keys into (created if missing)")
	peers := fs.String("peers", "", "comma-separated member IDs, such as 1,2,3,4,5")
	cluster := fs.String("cluster", "", "the cluster's name (its nodes' ELECTION_CLUSTER), stated in members.keys")
	algorithm := fs.String("algorithm", "", fmt.Sprintf("the cluster's algorithm, one of %v (its nodes' ELECTION_ALGORITHM), stated in members.keys", protocol.Algorithms))
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0 // -h asked for the usage, which Parse printed
		}
		return 2
	}
	if *out == "" {
		fmt.Fprintln(stderr, "keys: -out: required")
		return 2
	}
	if err := protocol.ValidateCluster(*cluster); err != nil {
		fmt.Fprintf(stderr, "keys: -cluster: required, a name of [A-Za-z0-9_-]+: %v\n", err)
		return 2
	}
	if !protocol.Algorithm(*algorithm).Known() {
		fmt.Fprintf(stderr, "keys: -algorithm: required, one of %v; got %q\n", protocol.Algorithms, *algorithm)
		return 2
	}
	ids, err := memberkeys.ParseIDs(*peers)
	if err != nil {
		fmt.Fprintf(stderr, "keys: -peers: %v\n", err)
		return 2
	}
	if _, err := memberkeys.Generate(*out, *cluster, protocol.Algorithm(*algorithm), ids); err != nil {
		fmt.Fprintf(stderr, "keys: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "keys: wrote %s and %d seeds in %s\n", memberkeys.MembersFile, len(ids), *out)
	return 0
}
