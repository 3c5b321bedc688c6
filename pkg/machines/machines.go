// Package machines builds the election machine of each algorithm: the one
// place that knows every algorithm (pkg/bully, pkg/ring, pkg/paxos,
// pkg/byzantine). The node runtime (pkg/node) receives a Factory's New
// through its constructor, as it receives its transport, and builds its
// machine with it when it starts, without knowing which algorithm it runs.
package machines

import (
	"fmt"

	"github.com/baton-election/baton/pkg/bully"
	"github.com/baton-election/baton/pkg/byzantine"
	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/paxos"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/ring"
	"github.com/baton-election/baton/pkg/signing"
)

// Factory builds the machines of one election's algorithm. Its fields are
// what a machine needs beyond its election.Config; the byzantine algorithm
// alone reads the keys.
type Factory struct {
	// Algorithm selects the election algorithm.
	Algorithm protocol.Algorithm
	// Cluster is the election's cluster name: a byzantine certificate
	// names it.
	Cluster string
	// Signer is this node's member key, and Keys the public keys of every
	// member: the byzantine algorithm signs and checks its certificates
	// with them.
	Signer *signing.Signer
	Keys   *signing.MemberKeys
	// MemberSet is, for the byzantine algorithm with dynamic membership,
	// version 0 of the member set: the configured members and their keys
	// (ELECTION_KEYS_FILE). The members it does not list join with their
	// credentials (Keys from NewAuthorityKeys, Signer with its
	// credential), and the set changes by the members' certified
	// decisions (package byzantine).
	MemberSet *signing.MemberKeys
}

// New builds the machine of f's algorithm with ecfg; checked, if not nil,
// is called for each signature the machine checks.
func (f Factory) New(ecfg election.Config, checked func()) (election.Machine, error) {
	switch f.Algorithm {
	case protocol.Bully:
		return bully.New(ecfg)
	case protocol.Ring:
		return ring.New(ecfg)
	case protocol.Paxos:
		return paxos.New(ecfg)
	case protocol.Byzantine:
		if f.Signer == nil || f.Keys == nil {
			return nil, fmt.Errorf("%s needs member keys", f.Algorithm)
		}
		if ecfg.Dynamic {
			return f.changingByzantine(ecfg)
		}
		keys := f.Keys.Members()
		if checked != nil {
			keys = countedMembers{Members: keys, checked: checked}
		}
		return byzantine.New(byzantine.Config{Config: ecfg, Cluster: f.Cluster, Signer: f.Signer.Certify(), Keys: keys})
	}
	return nil, fmt.Errorf("unknown algorithm %q", f.Algorithm)
}

// changingByzantine builds the byzantine machine of a node with dynamic
// membership: version 0 of its member set is f.MemberSet, and a member
// that asks to join is admitted with a credential that the authority of
// f.Keys issued.
func (f Factory) changingByzantine(ecfg election.Config) (election.Machine, error) {
	switch {
	case f.MemberSet == nil:
		return nil, fmt.Errorf("%s with dynamic membership needs the configured member set (ELECTION_KEYS_FILE)", f.Algorithm)
	case !f.Keys.Authority() || f.Signer.Credential() == "":
		return nil, fmt.Errorf("%s with dynamic membership needs member credentials (ELECTION_CREDS_FILE, ELECTION_AUTHORITY)", f.Algorithm)
	}
	genesis, err := f.MemberSet.CertifyKeys()
	if err != nil {
		return nil, err
	}
	ecfg.Members = genesis.IDs()
	keys := f.Keys
	admit := func(id uint64, key, cred string) error {
		got, public, err := keys.CheckCredential(cred)
		switch {
		case err != nil:
			return err
		case got != id || public != key:
			return fmt.Errorf("the credential is member %d's with key %s, not member %d's with key %s", got, public, id, key)
		}
		return nil
	}
	return byzantine.New(byzantine.Config{Config: ecfg, Cluster: f.Cluster, Signer: f.Signer.Certify(), Keys: genesis,
		Changes: &byzantine.Changes{Admit: admit, Key: f.Signer.PublicKey(), Cred: f.Signer.Credential()}})
}

// countedMembers counts each signature checked with its members' keys.
type countedMembers struct {
	certify.Members
	checked func()
}

func (m countedMembers) Verify(member uint64, data, sig []byte) error {
	m.checked()
	return m.Members.Verify(member, data, sig)
}
