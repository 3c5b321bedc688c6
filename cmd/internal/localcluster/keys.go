package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/baton-election/baton/pkg/memberkeys"
	"github.com/baton-election/baton/pkg/protocol"
)

// MakeMemberKeys makes a key for each of ids of cluster, which runs
// algorithm, in dir (memberkeys.Generate: node-<id>.seed and members.keys,
// which states the cluster and algorithm), or reads the keys already
// there, which must be those of ids and may not state another cluster or
// algorithm (memberkeys.Ensure, which adds the statements an older file
// lacks).
func MakeMemberKeys(dir, cluster string, algorithm protocol.Algorithm, ids []uint64) (*protocol.MemberKeys, error) {
	keys, _, err := memberkeys.Ensure(dir, cluster, algorithm, ids)
	if err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	return keys, nil
}

// MemberEnv is the environment by which node id connects with its member
// key from dir, as MakeMemberKeys left it: ELECTION_KEY_FILE and
// ELECTION_KEYS_FILE (set with Node.Setenv; not combined with NodeEnv, which
// a node with a key refuses).
func MemberEnv(dir string, id uint64) []string {
	return []string{
		"ELECTION_KEY_FILE=" + filepath.Join(dir, memberkeys.SeedFile(id)),
		"ELECTION_KEYS_FILE=" + filepath.Join(dir, memberkeys.MembersFile),
	}
}

// KnowsMemberKeys reports whether the node binary at path reads member
// keys: whether it names ELECTION_KEY_FILE. A binary built before member
// keys ignores the variable and must connect with NodeEnv.
func KnowsMemberKeys(path string) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("localcluster: node binary: %w", err)
	}
	return bytes.Contains(data, []byte("ELECTION_KEY_FILE")), nil
}

// ObserverKeys writes in dir, for each cluster of keyDirs, the file
// <cluster>.keys with the members' public keys that MakeMemberKeys left in
// keyDirs[cluster], with their statements of the cluster and algorithm:
// the observer's OBSERVER_KEYS_DIR, with which it records only what
// members signed, of the cluster's algorithm (and byzantine leaders only
// with their certificates).
func ObserverKeys(dir string, keyDirs map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("localcluster: %w", err)
	}
	for cluster, from := range keyDirs {
		data, err := os.ReadFile(filepath.Join(from, memberkeys.MembersFile))
		if err != nil {
			return fmt.Errorf("localcluster: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, cluster+".keys"), data, 0o644); err != nil {
			return fmt.Errorf("localcluster: %w", err)
		}
	}
	return nil
}
