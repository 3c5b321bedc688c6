// Command keys generates the keys of a cluster's members in the NATS nkeys
// format: either one Ed25519 user key per member, listed in a members file,
// or, for a cluster with dynamic membership, the cluster's authority and
// the credentials it issues to members.
//
// Member keys:
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
// Member credentials (dynamic membership, pkg/membercreds): the authority
// is a NATS account key; each member holds a NATS user JWT that the
// authority signed, naming its cluster and ID, and readers hold only the
// authority's public key.
//
//	go run ./cmd/keys -out DIR -cluster prod -authority new
//
// writes, in DIR (created if missing), the cluster's authority:
//
//	authority.seed   the authority's seed (SA…), one line, mode 0600: what
//	                 issues credentials; keep it off the nodes
//	authority.pub    its public key (A…), one line: what readers verify
//	                 credentials with
//
// and prints the public key on stdout.
//
//	go run ./cmd/keys -out DIR -cluster prod -authority DIR/authority.seed -issue 7,8,9 [-expires 720h]
//
// makes a new user key for each member ID of -issue (the -peers syntax, IDs
// 1 to membercreds.MaxID) and writes, in DIR:
//
//	node-<id>.creds  the NATS credentials file of the member, mode 0600:
//	                 its credential (a user JWT for cluster -cluster and
//	                 the ID, which expires after -expires, never if 0) and
//	                 its user seed
//
// and prints the authority's public key on stdout. -algorithm and -peers
// do not apply to credentials.
//
// It refuses to overwrite: if any of the files it would write exists, it
// writes nothing. The names and the formats are stable
// (docs/configuration.md): the NATS configuration lists the same public
// keys as nkey users (cmd/natsconf, which makes keys the same way where
// they are missing), and a NATS server in operator mode that trusts the
// authority's account accepts the credentials files as they are.
//
// Exit status: 0 when written (or after -h), 2 for bad flags, with one
// line naming the flag, 1 when the files cannot be written.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/memberkeys"
	"github.com/baton-election/baton/pkg/protocol"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// newAuthority is the value of -authority that makes a new authority.
const newAuthority = "new"

// run is the command; it returns the exit status: 0 after -h, 2 for bad
// flags, 1 when the keys cannot be written. Only the authority's public
// key goes to stdout.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("keys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "directory to write the keys into (created if missing)")
	peers := fs.String("peers", "", "comma-separated member IDs, such as 1,2,3,4,5")
	cluster := fs.String("cluster", "", "the cluster's name (its nodes' ELECTION_CLUSTER), stated in members.keys and in credentials")
	algorithm := fs.String("algorithm", "", fmt.Sprintf("the cluster's algorithm, one of %v (its nodes' ELECTION_ALGORITHM), stated in members.keys", protocol.Algorithms))
	authority := fs.String("authority", "", `dynamic membership: "new" to make the cluster's authority (authority.seed, authority.pub), or the authority's seed file to issue credentials with -issue`)
	issue := fs.String("issue", "", fmt.Sprintf("with -authority SEEDFILE: comma-separated member IDs (1 to %d) to issue credentials to, node-<id>.creds", membercreds.MaxID))
	expires := fs.Duration("expires", 0, "with -issue: how long the credentials are valid, such as 720h; 0 for ever")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0 // -h asked for the usage, which Parse printed
		}
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *out == "" {
		fmt.Fprintln(stderr, "keys: -out: required")
		return 2
	}
	if err := protocol.ValidateCluster(*cluster); err != nil {
		fmt.Fprintf(stderr, "keys: -cluster: required, a name of [A-Za-z0-9_-]+: %v\n", err)
		return 2
	}
	if set["authority"] || set["issue"] || set["expires"] {
		return runAuthority(*out, *cluster, *authority, *issue, *expires, set, stdout, stderr)
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

// runAuthority is the command with -authority, -issue or -expires: it
// makes the cluster's authority or issues credentials with it.
func runAuthority(out, cluster, authority, issue string, expires time.Duration, set map[string]bool, stdout, stderr io.Writer) int {
	for _, name := range []string{"peers", "algorithm"} {
		if set[name] {
			fmt.Fprintf(stderr, "keys: -%s: not used with -authority: credentials state the cluster and the member, and -issue lists the members\n", name)
			return 2
		}
	}
	switch {
	case authority == "":
		fmt.Fprintln(stderr, `keys: -authority: required with -issue and -expires: the authority's seed file, or "new" to make one`)
		return 2
	case authority == newAuthority && set["issue"]:
		fmt.Fprintln(stderr, `keys: -issue: needs -authority <the authority's seed file>, not "new"; make the authority first`)
		return 2
	case authority == newAuthority && set["expires"]:
		fmt.Fprintln(stderr, "keys: -expires: only with -issue")
		return 2
	case authority == newAuthority:
		return makeAuthority(out, cluster, stdout, stderr)
	case !set["issue"]:
		fmt.Fprintln(stderr, "keys: -issue: required with -authority <seed file>: the member IDs to issue credentials to, such as 7,8,9")
		return 2
	}
	ids, err := memberkeys.ParseIDs(issue)
	if err != nil {
		fmt.Fprintf(stderr, "keys: -issue: %v\n", err)
		return 2
	}
	for _, id := range ids {
		if id > membercreds.MaxID {
			fmt.Fprintf(stderr, "keys: -issue: member ID %d is above %d, the highest of a cluster with dynamic membership\n", id, membercreds.MaxID)
			return 2
		}
	}
	if expires < 0 {
		fmt.Fprintf(stderr, "keys: -expires: %v is negative; 0 is for ever\n", expires)
		return 2
	}
	kp, err := readAuthority(authority)
	if err != nil {
		fmt.Fprintf(stderr, "keys: -authority: %v\n", err)
		return 2
	}
	public, err := kp.PublicKey()
	if err != nil {
		fmt.Fprintf(stderr, "keys: -authority: %v\n", err)
		return 2
	}
	if err := issueCredentials(out, cluster, kp, ids, expires); err != nil {
		fmt.Fprintf(stderr, "keys: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, public)
	fmt.Fprintf(stderr, "keys: wrote %d credentials of cluster %s in %s, issued by %s\n", len(ids), cluster, out, public)
	return 0
}

// makeAuthority writes a new authority in dir and prints its public key.
func makeAuthority(dir, cluster string, stdout, stderr io.Writer) int {
	seedPath := filepath.Join(dir, membercreds.AuthoritySeedFile)
	publicPath := filepath.Join(dir, membercreds.AuthorityFile)
	if err := refuseExisting(seedPath, publicPath); err != nil {
		fmt.Fprintf(stderr, "keys: %v\n", err)
		return 1
	}
	kp, err := nkeys.CreateAccount()
	if err != nil {
		fmt.Fprintf(stderr, "keys: %v\n", err)
		return 1
	}
	seed, err := kp.Seed()
	if err != nil {
		fmt.Fprintf(stderr, "keys: %v\n", err)
		return 1
	}
	public, err := kp.PublicKey()
	if err != nil {
		fmt.Fprintf(stderr, "keys: %v\n", err)
		return 1
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fmt.Fprintf(stderr, "keys: %v\n", err)
		return 1
	}
	// The seed first: a public key without its seed issues nothing.
	if err := memberkeys.WriteFile(seedPath, append(seed, '\n'), 0o600); err != nil {
		fmt.Fprintf(stderr, "keys: %v\n", err)
		return 1
	}
	if err := memberkeys.WriteFile(publicPath, []byte(public+"\n"), 0o644); err != nil {
		fmt.Fprintf(stderr, "keys: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, public)
	fmt.Fprintf(stderr, "keys: wrote the authority of cluster %s in %s: %s (secret) and %s\n", cluster, dir, membercreds.AuthoritySeedFile, membercreds.AuthorityFile)
	return 0
}

// issueCredentials writes in dir the credentials file of each of ids,
// members of cluster, each with a new user key, issued by authority.
func issueCredentials(dir, cluster string, authority nkeys.KeyPair, ids []uint64, expires time.Duration) error {
	paths := make([]string, len(ids))
	for i, id := range ids {
		paths[i] = filepath.Join(dir, membercreds.CredsFile(id))
	}
	if err := refuseExisting(paths...); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for i, id := range ids {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return err
		}
		public, err := kp.PublicKey()
		if err != nil {
			return err
		}
		seed, err := kp.Seed()
		if err != nil {
			return err
		}
		token, err := membercreds.Issue(authority, cluster, id, public, expires)
		if err != nil {
			return err
		}
		if err := membercreds.WriteCreds(paths[i], token, seed); err != nil {
			return err
		}
	}
	return nil
}

// refuseExisting returns an error if any of paths exists.
func refuseExisting(paths ...string) error {
	for _, path := range paths {
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			if err == nil {
				return fmt.Errorf("%s exists: keys are never overwritten; remove it first or choose another directory", path)
			}
			return err
		}
	}
	return nil
}

// maxSeedFileSize bounds the authority's seed file.
const maxSeedFileSize = 4096

// readAuthority reads the authority's seed (SA…) from path: its first line
// that is not blank and does not start with #.
func readAuthority(path string) (nkeys.KeyPair, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSeedFileSize+1))
	if err != nil {
		return nil, err
	}
	defer clear(data)
	if len(data) > maxSeedFileSize {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a seed file", path, maxSeedFileSize)
	}
	var seed []byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) > 0 && line[0] != '#' {
			seed = line
			break
		}
	}
	if !bytes.HasPrefix(seed, []byte("SA")) {
		what := "no seed"
		if len(seed) >= 2 && seed[0] == 'S' {
			what = "a seed of another kind (" + string(seed[:2]) + "…)"
		}
		return nil, fmt.Errorf("%s holds %s, not an authority's account seed (SA…)", path, what)
	}
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		return nil, fmt.Errorf("%s: not a valid account seed: %v", path, err)
	}
	return kp, nil
}
