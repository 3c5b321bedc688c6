package natsconf

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// InboxPrefix is protocol.InboxPrefix: the inbox prefix of member id of
// cluster, under which its member user alone may subscribe.
func InboxPrefix(cluster string, id uint64) string { return protocol.InboxPrefix(cluster, id) }

// memberMarker is the line of Accounts that Render replaces.
const memberMarker = "      # MEMBER USERS\n"

// Render returns Accounts with a user of the application account for each
// member of each cluster (cluster name → its member keys, as
// signing.ParseMemberKeys reads them): its public nkey, which
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
func Render(clusters map[string]*signing.MemberKeys) (string, error) {
	return RenderWith(clusters, nil)
}

// Callout is the server's check of member credentials (internal/natsauth):
// the public keys of its issuer and of its responder's user.
type Callout struct {
	// Issuer is auth_callout.issuer: the callout issuer's public account
	// key, A….
	Issuer string
	// User is the responder's nkey user, U…, the one user of the account
	// CalloutAccount.
	User string
}

// CalloutAccount is the account of the responder's user, in which the
// server sends its authorization requests.
const CalloutAccount = "CALLOUT"

// MemberAccount is the application account, where the members the
// callout admits are placed.
const MemberAccount = "BATON"

// RenderWith is Render, and with callout (nil: none) the server's check of
// member credentials: the account CalloutAccount with the responder's user
// and the auth_callout block.
//
// The block names CalloutAccount alone in allowed_accounts: the server
// hands the callout only the clients of the accounts listed there and
// those it cannot place in any account, so the password users and the
// member nkey users of this file authenticate as before, without the
// callout (without allowed_accounts the server hands it every client,
// the configured users included, and listing them all in auth_users
// would have to follow every member key). The responder's user is in
// auth_users: it answers the requests and is never handed to itself. It
// is an nkey user also so that the server sends every client a nonce to
// sign, by which a member proves it holds its credential's seed.
func RenderWith(clusters map[string]*signing.MemberKeys, callout *Callout) (string, error) {
	if !strings.Contains(Accounts, memberMarker) || !strings.Contains(Accounts, calloutMarker) {
		return "", errors.New("natsconf: accounts.conf has no member marker")
	}
	accounts := Accounts
	if callout != nil {
		if !nkeys.IsValidPublicAccountKey(callout.Issuer) {
			return "", fmt.Errorf("natsconf: callout issuer %.60q is not a public account key (A…)", callout.Issuer)
		}
		if !nkeys.IsValidPublicUserKey(callout.User) {
			return "", fmt.Errorf("natsconf: callout user %.60q is not a public user key (U…)", callout.User)
		}
		accounts = strings.Replace(accounts, calloutMarker, fmt.Sprintf(calloutAccount, CalloutAccount, callout.User), 1)
		accounts += fmt.Sprintf(calloutBlock, callout.Issuer, CalloutAccount, callout.User)
	}
	rendered, err := renderMembers(accounts, clusters)
	if err != nil {
		return "", err
	}
	return rendered, nil
}

// calloutMarker is the line of Accounts where RenderWith puts the callout
// account.
const calloutMarker = "  # CALLOUT ACCOUNT\n"

// calloutAccount is the callout account: name, responder's user key.
const calloutAccount = `  # The server's check of member credentials (internal/natsauth): its
  # responder answers the server's authorization requests as this user.
  %[1]s {
    users = [ { nkey: %[2]s } ]
  }
`

// calloutBlock hands the clients the configuration does not know to the
// responder: issuer, account, responder's user.
const calloutBlock = `# Clients that are none of the users above are handed to the server's
# check of member credentials (internal/natsauth, run by the server
# process): it admits a member with a valid credential of a cluster it
# trusts into BATON, confined to its cluster's subjects. Only the callout
# account's clients are handed to it besides (allowed_accounts), so the
# users above authenticate as before, without it.
authorization {
  auth_callout {
    issuer: %[1]s
    account: %[2]s
    auth_users: [ %[3]s ]
    allowed_accounts: [ %[2]s ]
  }
}
`

// renderMembers writes the member users of clusters into accounts.
func renderMembers(accounts string, clusters map[string]*signing.MemberKeys) (string, error) {
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
	return strings.Replace(accounts, memberMarker, b.String(), 1), nil
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
