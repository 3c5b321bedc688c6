package natsconf

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/baton-election/baton/pkg/protocol"
)

// InboxPrefix is protocol.InboxPrefix: the inbox prefix of member id of
// cluster, under which its member user alone may subscribe.
func InboxPrefix(cluster string, id uint64) string { return protocol.InboxPrefix(cluster, id) }

// memberMarker is the line of Accounts that Render replaces.
const memberMarker = "      # MEMBER USERS\n"

// Render returns Accounts with a user of the application account for each
// member of each cluster (cluster name → its member keys, as
// protocol.ParseMemberKeys reads them): its public nkey, which
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
func Render(clusters map[string]*protocol.MemberKeys) (string, error) {
	if !strings.Contains(Accounts, memberMarker) {
		return "", errors.New("natsconf: accounts.conf has no member marker")
	}
	keys := map[string]string{}
	var b strings.Builder
	for _, cluster := range slices.Sorted(maps.Keys(clusters)) {
		if err := protocol.ValidateCluster(cluster); err != nil {
			return "", fmt.Errorf("natsconf: %w", err)
		}
		members := clusters[cluster]
		if members.Len() == 0 {
			return "", fmt.Errorf("natsconf: cluster %s: no member keys", cluster)
		}
		for _, id := range members.IDs() {
			key, _ := members.PublicKey(id) // a user key, checked by protocol
			if other, ok := keys[key]; ok {
				return "", fmt.Errorf("natsconf: cluster %s: member %d has the key of %s", cluster, id, other)
			}
			keys[key] = fmt.Sprintf("%s/%d", cluster, id)
			fmt.Fprintf(&b, memberUser, cluster, id, key, InboxPrefix(cluster, id))
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
