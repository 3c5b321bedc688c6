// Command keys generates the member keys of a cluster: one Ed25519 user
// key per member in the NATS nkeys format.
//
//	go run ./cmd/keys -out DIR -peers 1,2,3,4,5
//
// writes, in DIR (created if missing):
//
//	node-<id>.seed   the member's seed (SU…), one line, mode 0600: its
//	                 ELECTION_KEY_FILE
//	members.keys     "<ID> <public key U…>" per member, after a comment
//	                 line: every node's ELECTION_KEYS_FILE, and what
//	                 applications and the observer verify with
//
// It refuses to overwrite: if any of these files exists, it writes
// nothing. The names and the format are stable (docs/configuration.md):
// the NATS configuration lists the same public keys as nkey users.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nkeys"
)

// MembersFile is the name of the member keys file.
const MembersFile = "members.keys"

// SeedFile is the name of member id's seed file.
func SeedFile(id uint64) string { return fmt.Sprintf("node-%d.seed", id) }

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run is the command; it returns the exit status: 2 for bad flags, 1 when
// the keys cannot be written.
func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("keys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "directory to write the keys into (created if missing)")
	peers := fs.String("peers", "", "comma-separated member IDs, such as 1,2,3,4,5")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *out == "" {
		fmt.Fprintln(stderr, "keys: -out: required")
		return 2
	}
	ids, err := parsePeers(*peers)
	if err != nil {
		fmt.Fprintf(stderr, "keys: -peers: %v\n", err)
		return 2
	}
	if err := generate(*out, ids); err != nil {
		fmt.Fprintf(stderr, "keys: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "keys: wrote %s and %d seeds in %s\n", MembersFile, len(ids), *out)
	return 0
}

func parsePeers(s string) ([]uint64, error) {
	if s == "" {
		return nil, errors.New("required")
	}
	var ids []uint64
	for raw := range strings.SplitSeq(s, ",") {
		id, err := strconv.ParseUint(strings.TrimSpace(raw), 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("%q is not a positive integer", raw)
		}
		if slices.Contains(ids, id) {
			return nil, fmt.Errorf("%d appears twice", id)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// generate writes a new key for each of ids, and the members file, into
// dir. It writes nothing if any of the files exists.
func generate(dir string, ids []uint64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := []string{MembersFile}
	for _, id := range ids {
		names = append(names, SeedFile(id))
	}
	for _, name := range names {
		if _, err := os.Lstat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s exists (or cannot be checked: %v): keys are never overwritten; remove them first or choose another -out", filepath.Join(dir, name), err)
		}
	}
	var members strings.Builder
	members.WriteString("# <member ID> <public key>: ELECTION_KEYS_FILE of every node of the cluster\n")
	for _, id := range ids {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return err
		}
		seed, err := kp.Seed()
		if err != nil {
			return err
		}
		public, err := kp.PublicKey()
		if err != nil {
			return err
		}
		if err := writeNew(filepath.Join(dir, SeedFile(id)), append(seed, '\n'), 0o600); err != nil {
			return err
		}
		fmt.Fprintf(&members, "%d %s\n", id, public)
	}
	return writeNew(filepath.Join(dir, MembersFile), []byte(members.String()), 0o644)
}

// writeNew creates path, which must not exist, with data and mode, and
// syncs it.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
