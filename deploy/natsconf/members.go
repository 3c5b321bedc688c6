package natsconf

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/protocol"
)

// Member is one member of a cluster: its NODE_ID and its public nkey
// (U…), as a line of the cluster's members.keys (ELECTION_KEYS_FILE).
type Member struct {
	ID  uint64
	Key string
}

// MembersFile and SeedFile are the names of a cluster's key files in a
// directory: members.keys (ELECTION_KEYS_FILE) and node-<id>.seed
// (ELECTION_KEY_FILE), as the keys command writes them.
const MembersFile = "members.keys"

// SeedFile is the name of node id's seed file.
func SeedFile(id uint64) string { return fmt.Sprintf("node-%d.seed", id) }

// InboxPrefix is protocol.InboxPrefix: the inbox prefix of member id of
// cluster, under which its member user alone may subscribe.
func InboxPrefix(cluster string, id uint64) string { return protocol.InboxPrefix(cluster, id) }

// maxMembers bounds a members file, so that a wrong file cannot make the
// configuration grow without bound.
const maxMembers = 1024

// ParseMembers reads a members.keys file: one line per member, "<ID>
// <public key U…>"; blank lines and lines starting with # are ignored.
// IDs and keys are unique; at least one member.
func ParseMembers(data []byte) ([]Member, error) {
	var members []Member
	ids, keys := map[uint64]bool{}, map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("natsconf: members line %d: want \"<ID> <public key>\", got %d fields", n, len(fields))
		}
		id, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("natsconf: members line %d: ID %q is not a positive integer", n, fields[0])
		}
		if !nkeys.IsValidPublicUserKey(fields[1]) {
			return nil, fmt.Errorf("natsconf: members line %d: %q is not a public user nkey (U…)", n, fields[1])
		}
		if ids[id] || keys[fields[1]] {
			return nil, fmt.Errorf("natsconf: members line %d: ID %d or its key listed twice", n, id)
		}
		if len(members) == maxMembers {
			return nil, fmt.Errorf("natsconf: more than %d members", maxMembers)
		}
		ids[id], keys[fields[1]] = true, true
		members = append(members, Member{ID: id, Key: fields[1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("natsconf: members: %w", err)
	}
	if len(members) == 0 {
		return nil, errors.New("natsconf: members: no member")
	}
	return members, nil
}

// FormatMembers is the members.keys text of members.
func FormatMembers(members []Member) []byte {
	var b bytes.Buffer
	b.WriteString("# <NODE_ID> <public key>: the cluster's member keys (ELECTION_KEYS_FILE)\n")
	for _, m := range members {
		fmt.Fprintf(&b, "%d %s\n", m.ID, m.Key)
	}
	return b.Bytes()
}

// ReadMembers reads dir/members.keys.
func ReadMembers(dir string) ([]Member, error) {
	data, err := os.ReadFile(filepath.Join(dir, MembersFile))
	if err != nil {
		return nil, fmt.Errorf("natsconf: %w", err)
	}
	members, err := ParseMembers(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, filepath.Join(dir, MembersFile))
	}
	return members, nil
}

// GenerateMembers creates one user key per ID in dir (created if missing,
// mode 0700): node-<id>.seed (mode 0600) and members.keys, each written to
// a temporary file, synced and renamed into place, the members file last.
// It refuses to overwrite an existing members.keys.
func GenerateMembers(dir string, ids []uint64) ([]Member, error) {
	if len(ids) == 0 || len(ids) > maxMembers {
		return nil, fmt.Errorf("natsconf: %d members; want 1 to %d", len(ids), maxMembers)
	}
	if _, err := os.Stat(filepath.Join(dir, MembersFile)); err == nil {
		return nil, fmt.Errorf("natsconf: %s exists; remove it to make new keys", filepath.Join(dir, MembersFile))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("natsconf: %w", err)
	}
	seen := map[uint64]bool{}
	var members []Member
	for _, id := range ids {
		if id == 0 || seen[id] {
			return nil, fmt.Errorf("natsconf: member ID %d is zero or listed twice", id)
		}
		seen[id] = true
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, fmt.Errorf("natsconf: %w", err)
		}
		seed, err := kp.Seed()
		if err != nil {
			return nil, fmt.Errorf("natsconf: %w", err)
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("natsconf: %w", err)
		}
		if err := writeFile(filepath.Join(dir, SeedFile(id)), append(seed, '\n'), 0o600); err != nil {
			return nil, err
		}
		members = append(members, Member{ID: id, Key: pub})
	}
	if err := writeFile(filepath.Join(dir, MembersFile), FormatMembers(members), 0o644); err != nil {
		return nil, err
	}
	return members, nil
}

// writeFile writes data to path atomically: a synced temporary file
// renamed into place, then the directory synced.
func writeFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("natsconf: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // fails harmlessly once renamed
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		if d, derr := os.Open(filepath.Dir(path)); derr == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("natsconf: write %s: %w", path, err)
	}
	return nil
}

// WriteFile is writeFile for the command that renders the configuration.
func WriteFile(path string, data []byte) error { return writeFile(path, data, 0o644) }

// memberMarker is the line of Accounts that Render replaces.
const memberMarker = "      # MEMBER USERS\n"

// Render returns Accounts with a user of the application account for each
// member of each cluster (cluster name → members): its public nkey, which
// may publish only on its own cluster's subjects (election.<cluster>.*,
// the other members' inboxes election.<cluster>.node.*), on the inboxes of
// applications and the observer (_INBOX.>, to answer queries) and of its
// cluster's members (InboxPrefix, to answer their queries), and the
// read-only JetStream requests a node makes (the last announcement); and
// may subscribe only to its cluster's subjects, its own inbox
// election.<cluster>.node.<id>, its own InboxPrefix and the connection
// events. The password users are kept, so that nodes without keys still
// connect.
//
// There is deliberately no allow_responses: the server lets a user with it
// answer on whatever reply subject a request names, so any client could
// have the leader publish on another cluster's subjects or on a JetStream
// API subject (a purge of the stream) with the leader's rights.
func Render(clusters map[string][]Member) (string, error) {
	if !strings.Contains(Accounts, memberMarker) {
		return "", errors.New("natsconf: accounts.conf has no member marker")
	}
	keys := map[string]string{}
	var b strings.Builder
	for _, cluster := range slices.Sorted(maps.Keys(clusters)) {
		if err := protocol.ValidateCluster(cluster); err != nil {
			return "", fmt.Errorf("natsconf: %w", err)
		}
		for _, m := range clusters[cluster] {
			if m.ID == 0 || !nkeys.IsValidPublicUserKey(m.Key) {
				return "", fmt.Errorf("natsconf: cluster %s: member %d has no valid public user key", cluster, m.ID)
			}
			if other, ok := keys[m.Key]; ok {
				return "", fmt.Errorf("natsconf: cluster %s: member %d has the key of %s", cluster, m.ID, other)
			}
			keys[m.Key] = fmt.Sprintf("%s/%d", cluster, m.ID)
			fmt.Fprintf(&b, memberUser, cluster, m.ID, m.Key, InboxPrefix(cluster, m.ID))
		}
	}
	return strings.Replace(Accounts, memberMarker, b.String(), 1), nil
}

// memberUser is one member's user: cluster, ID, key, inbox prefix. The
// cluster name matches [A-Za-z0-9_-]+, so it needs no quoting.
const memberUser = `      {
        # member %[1]s/%[2]d
        nkey: %[3]s
        permissions: {
          publish: {
            allow: [ "election.%[1]s.*", "election.%[1]s.node.*",
                     "_INBOX.>", "` + protocol.InboxRoot + `.%[1]s.>",
                     "$JS.API.STREAM.NAMES", "$JS.API.STREAM.INFO.>",
                     "$JS.API.STREAM.MSG.GET.>", "$JS.API.DIRECT.GET.>" ]
          }
          subscribe: {
            allow: [ "election.%[1]s.*", "election.%[1]s.node.%[2]d", "%[4]s.>",
                     "$SYS.ACCOUNT.*.CONNECT", "$SYS.ACCOUNT.*.DISCONNECT" ]
          }
        }
      }
`
