// Package memberkeys makes and reads the key files of a cluster's members
// in a directory: node-<id>.seed, each member's user seed (its
// ELECTION_KEY_FILE), and members.keys, the public key of every member
// (every node's ELECTION_KEYS_FILE, in the format signing.ParseMemberKeys
// reads), which states the cluster's name and algorithm ("#: cluster",
// "#: algorithm", signing.StatementPrefix) so that whoever reads
// announcements with it knows the cluster from the file, not from a
// message. The keys command, the NATS configuration generator and the
// local cluster all make their keys here; a deployment of its own can too.
//
// Every file is written atomically and synced (WriteFile), so that a crash
// leaves either no file or a whole one.
package memberkeys

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/internal/atomicfile"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// MembersFile is the name of the member keys file in a directory.
const MembersFile = "members.keys"

// SeedFile is the name of member id's seed file in a directory.
func SeedFile(id uint64) string { return fmt.Sprintf("node-%d.seed", id) }

// header is the first line of a members file that Generate writes.
const header = "# <member ID> <public key>: ELECTION_KEYS_FILE of every node of the cluster\n"

// ErrExists is wrapped by the error of Generate when a file it would write
// is already there.
var ErrExists = errors.New("memberkeys: keys are never overwritten")

// statementsOf returns the statement lines of cluster and algorithm, both
// required.
func statementsOf(cluster string, algorithm protocol.Algorithm) (string, error) {
	if err := protocol.ValidateCluster(cluster); err != nil {
		return "", fmt.Errorf("memberkeys: %w", err)
	}
	if !algorithm.Known() {
		return "", fmt.Errorf("memberkeys: algorithm %q is not one of %v", algorithm, protocol.Algorithms)
	}
	return fmt.Sprintf("%s cluster %s\n%s algorithm %s\n", signing.StatementPrefix, cluster, signing.StatementPrefix, algorithm), nil
}

// Generate makes a user key for each of ids (positive, distinct, in the
// order the members file lists them) in dir, created with mode 0700 if
// missing: node-<id>.seed (mode 0600) for each, then members.keys (mode
// 0644), which states cluster and algorithm, each written atomically and
// synced. It writes nothing if any of these files exists.
func Generate(dir, cluster string, algorithm protocol.Algorithm, ids []uint64) (*signing.MemberKeys, error) {
	statements, err := statementsOf(cluster, algorithm)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 || len(ids) > signing.MaxMemberKeys {
		return nil, fmt.Errorf("memberkeys: %d members; want 1 to %d", len(ids), signing.MaxMemberKeys)
	}
	seen := make(map[uint64]bool, len(ids))
	names := []string{MembersFile}
	for _, id := range ids {
		if id == 0 || seen[id] {
			return nil, fmt.Errorf("memberkeys: member ID %d is zero or listed twice", id)
		}
		seen[id] = true
		names = append(names, SeedFile(id))
	}
	for _, name := range names {
		path := filepath.Join(dir, name)
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			if err == nil {
				return nil, fmt.Errorf("%w: %s exists; remove the cluster's keys first or choose another directory", ErrExists, path)
			}
			return nil, fmt.Errorf("memberkeys: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("memberkeys: %w", err)
	}
	var members strings.Builder
	members.WriteString(header)
	members.WriteString(statements)
	for _, id := range ids {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, fmt.Errorf("memberkeys: %w", err)
		}
		seed, err := kp.Seed()
		if err != nil {
			return nil, fmt.Errorf("memberkeys: %w", err)
		}
		public, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("memberkeys: %w", err)
		}
		if err := atomicfile.Write(filepath.Join(dir, SeedFile(id)), append(seed, '\n'), 0o600); err != nil {
			return nil, fmt.Errorf("memberkeys: %w", err)
		}
		fmt.Fprintf(&members, "%d %s\n", id, public)
	}
	// The members file last: without it, the seeds are used by no one.
	if err := atomicfile.Write(filepath.Join(dir, MembersFile), []byte(members.String()), 0o644); err != nil {
		return nil, fmt.Errorf("memberkeys: %w", err)
	}
	return signing.ParseMemberKeys(strings.NewReader(members.String()))
}

// WriteFile writes data to path as the key files are written: into a
// temporary file that is synced, then renamed over path, and the directory
// synced, so that a crash leaves the old file or the new one, never a part.
// It is for the files made from a cluster's keys, such as the NATS
// configuration that names its members (cmd/natsconf).
func WriteFile(path string, data []byte, perm os.FileMode) error {
	if err := atomicfile.Write(path, data, perm); err != nil {
		return fmt.Errorf("memberkeys: %w", err)
	}
	return nil
}

// Read reads dir/members.keys (signing.ReadMemberKeysFile).
func Read(dir string) (*signing.MemberKeys, error) {
	return signing.ReadMemberKeysFile(filepath.Join(dir, MembersFile))
}

// Ensure returns the keys of the members ids of cluster, which runs
// algorithm, in dir: those of the members.keys already there, which must
// list exactly ids, or, if there is none, new ones (Generate; made is then
// true). A members file already there that states another cluster or
// algorithm is an error; one that states neither or only one (written
// before files stated them) gets the statements it lacks, in a new file
// that replaces it atomically, with its mode.
func Ensure(dir, cluster string, algorithm protocol.Algorithm, ids []uint64) (keys *signing.MemberKeys, made bool, err error) {
	if _, err := statementsOf(cluster, algorithm); err != nil {
		return nil, false, err
	}
	keys, err = Read(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		keys, err = Generate(dir, cluster, algorithm, ids)
		return keys, err == nil, err
	case err != nil:
		return nil, false, err
	}
	path := filepath.Join(dir, MembersFile)
	if err := keys.Check(ids, nil); err != nil {
		return nil, false, fmt.Errorf("%w (in %s; remove it to make new keys)", err, path)
	}
	stated, err := keys.State(cluster, algorithm)
	if err != nil {
		return nil, false, fmt.Errorf("%w (in %s)", err, path)
	}
	if keys.Cluster() == "" || keys.Algorithm() == "" {
		if err := addStatements(path, keys, cluster, algorithm); err != nil {
			return nil, false, err
		}
	}
	return stated, false, nil
}

// addStatements adds to the members file at path, whose keys are keys,
// the statements of cluster and algorithm it lacks, before its first line.
func addStatements(path string, keys *signing.MemberKeys, cluster string, algorithm protocol.Algorithm) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("memberkeys: %w", err)
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("memberkeys: %w", err)
	}
	var lines strings.Builder
	if keys.Cluster() == "" {
		fmt.Fprintf(&lines, "%s cluster %s\n", signing.StatementPrefix, cluster)
	}
	if keys.Algorithm() == "" {
		fmt.Fprintf(&lines, "%s algorithm %s\n", signing.StatementPrefix, algorithm)
	}
	data := append([]byte(lines.String()), old...)
	// What is written must read back as the same keys, stating both.
	check, err := signing.ParseMemberKeys(strings.NewReader(string(data)))
	if err != nil || check.Cluster() != cluster || check.Algorithm() != algorithm || !slices.Equal(check.IDs(), keys.IDs()) {
		return fmt.Errorf("memberkeys: %s: cannot add the statements of cluster %s, algorithm %s: %v", path, cluster, algorithm, err)
	}
	if err := atomicfile.Write(path, data, fi.Mode().Perm()); err != nil {
		return fmt.Errorf("memberkeys: %w", err)
	}
	return nil
}

// ParseIDs reads a comma-separated list of member IDs, such as 1,2,3:
// positive integers, each once.
func ParseIDs(s string) ([]uint64, error) {
	if s == "" {
		return nil, errors.New("no member IDs")
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
		if len(ids) == signing.MaxMemberKeys {
			return nil, fmt.Errorf("more than %d members", signing.MaxMemberKeys)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
