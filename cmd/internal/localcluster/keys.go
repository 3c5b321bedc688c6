package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/memberkeys"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// MakeMemberKeys makes a key for each of ids of cluster, which runs
// algorithm, in dir (memberkeys.Generate: node-<id>.seed and members.keys,
// which states the cluster and algorithm), or reads the keys already
// there, which must be those of ids and may not state another cluster or
// algorithm (memberkeys.Ensure, which adds the statements an older file
// lacks).
func MakeMemberKeys(dir, cluster string, algorithm protocol.Algorithm, ids []uint64) (*signing.MemberKeys, error) {
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
// with their certificates). For a cluster with credentials
// (MakeCredentials) it writes <cluster>.authority, the authority's
// public key.
func ObserverKeys(dir string, keyDirs map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("localcluster: %w", err)
	}
	for cluster, from := range keyDirs {
		if data, err := os.ReadFile(filepath.Join(from, membercreds.AuthorityFile)); err == nil {
			if err := os.WriteFile(filepath.Join(dir, cluster+".authority"), data, 0o644); err != nil {
				return fmt.Errorf("localcluster: %w", err)
			}
			// Beside the authority, the members file of a byzantine
			// cluster with dynamic membership lists its configured
			// members (WriteConfiguredMembers).
			if data, err := os.ReadFile(filepath.Join(from, memberkeys.MembersFile)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, cluster+".keys"), data, 0o644); err != nil {
					return fmt.Errorf("localcluster: %w", err)
				}
			}
			continue
		}
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

// MakeCredentials makes, in dir, the authority of cluster (a dynamic
// cluster's) and a credential for each of ids (node-<id>.creds), or reads
// the authority already there and issues only the credentials missing.
// It returns the authority's public key, ELECTION_AUTHORITY.
func MakeCredentials(dir, cluster string, ids []uint64) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("localcluster: %w", err)
	}
	seedPath := filepath.Join(dir, membercreds.AuthoritySeedFile)
	var authority nkeys.KeyPair
	if seed, err := os.ReadFile(seedPath); err == nil {
		if authority, err = nkeys.FromSeed(bytes.TrimSpace(seed)); err != nil {
			return "", fmt.Errorf("localcluster: %s: %w", seedPath, err)
		}
	} else {
		if authority, err = nkeys.CreateAccount(); err != nil {
			return "", fmt.Errorf("localcluster: %w", err)
		}
		seed, _ := authority.Seed()
		public, _ := authority.PublicKey()
		if err := os.WriteFile(seedPath, append(seed, '\n'), 0o600); err != nil {
			return "", fmt.Errorf("localcluster: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, membercreds.AuthorityFile), []byte(public+"\n"), 0o644); err != nil {
			return "", fmt.Errorf("localcluster: %w", err)
		}
	}
	public, err := authority.PublicKey()
	if err != nil {
		return "", fmt.Errorf("localcluster: %w", err)
	}
	for _, id := range ids {
		path := filepath.Join(dir, membercreds.CredsFile(id))
		if _, err := os.Stat(path); err == nil {
			continue
		}
		user, err := nkeys.CreateUser()
		if err != nil {
			return "", fmt.Errorf("localcluster: %w", err)
		}
		userPublic, _ := user.PublicKey()
		seed, _ := user.Seed()
		token, err := membercreds.Issue(authority, cluster, id, userPublic, 0)
		if err != nil {
			return "", fmt.Errorf("localcluster: %w", err)
		}
		if err := membercreds.WriteCreds(path, token, seed); err != nil {
			return "", fmt.Errorf("localcluster: %w", err)
		}
	}
	return public, nil
}

// WriteConfiguredMembers writes, in dir where MakeCredentials left the
// credentials of ids, the members file of a byzantine cluster with
// dynamic membership: ids and the keys their credentials bind, the
// configured members (version 0 of the member set). It returns the
// file's path, ELECTION_KEYS_FILE.
func WriteConfiguredMembers(dir, cluster string, ids []uint64) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s cluster %s\n%s algorithm %s\n", signing.StatementPrefix, cluster, signing.StatementPrefix, protocol.Byzantine)
	for _, id := range ids {
		_, kp, err := membercreds.ReadCreds(filepath.Join(dir, membercreds.CredsFile(id)))
		if err != nil {
			return "", fmt.Errorf("localcluster: %w", err)
		}
		public, err := kp.PublicKey()
		if err != nil {
			return "", fmt.Errorf("localcluster: %w", err)
		}
		fmt.Fprintf(&b, "%d %s\n", id, public)
	}
	path := filepath.Join(dir, memberkeys.MembersFile)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("localcluster: %w", err)
	}
	return path, nil
}

// CredentialEnv is the environment by which node id of a dynamic cluster
// signs with its credential from dir, as MakeCredentials left it, checked
// with authority: ELECTION_CREDS_FILE and ELECTION_AUTHORITY. The node
// also connects to NATS with the credential, so it is not combined with
// NodeEnv: the server must check credentials, trusting authority
// (natsconf.StartLocalWithCallout).
func CredentialEnv(dir string, id uint64, authority string) []string {
	return []string{
		"ELECTION_CREDS_FILE=" + filepath.Join(dir, membercreds.CredsFile(id)),
		"ELECTION_AUTHORITY=" + authority,
	}
}
