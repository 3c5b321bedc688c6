package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// votersRequest asks the loop to change the Paxos voters.
type votersRequest struct {
	voters []uint64
	reply  chan error
}

// ErrNoVoters is returned by ChangeVoters on a node whose machine has no
// voters to change: not Paxos with dynamic membership.
var ErrNoVoters = errors.New("node: no voters to change: only Paxos with dynamic membership has them")

// voterChanger is a machine whose voters change through the protocol
// (Paxos with dynamic membership).
type voterChanger interface {
	ChangeVoters(voters []uint64) error
	Voters() *protocol.Voters
}

// ChangeVoters asks this node, which must lead a Paxos cluster with
// dynamic membership, to move the voters to voters through the protocol
// (paxos.Machine.ChangeVoters): it returns once the change has started,
// and /status shows it under way ("voters" with "next") and then done.
// It waits for the node's loop at most until ctx ends.
func (n *Node) ChangeVoters(ctx context.Context, voters []uint64) error {
	req := votersRequest{voters: voters, reply: make(chan error, 1)}
	select {
	case n.requests <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// changeVoters carries out a request in the loop.
func (n *Node) changeVoters(req votersRequest) error {
	vc, ok := n.drv.Machine().(voterChanger)
	if !ok || vc.Voters() == nil {
		req.reply <- ErrNoVoters
		return nil
	}
	n.advance(time.Now())
	err := n.drv.Do(func(election.Machine) error { return vc.ChangeVoters(req.voters) })
	if err == nil {
		n.log.Info("voters changing", "from", vc.Voters().Voters, "to", vc.Voters().Next)
	}
	cerr := n.commit() // stored before the reply says it started
	req.reply <- err
	return cerr
}

// votersTimeout bounds how long POST /voters waits for the loop.
const votersTimeout = 2 * time.Second

// serveVoters answers POST /voters?ids=4,5,6: the leader starts moving
// the voters to those IDs. 202 with the status once started; 400 for bad
// IDs; 409 if this node does not lead or a change is under way, with the
// status, which names the leader; 501 without voters to change.
func (n *Node) serveVoters(w http.ResponseWriter, r *http.Request) {
	var voters []uint64
	for raw := range strings.SplitSeq(r.URL.Query().Get("ids"), ",") {
		id, err := strconv.ParseUint(strings.TrimSpace(raw), 10, 64)
		if err != nil || !protocol.DynamicMember(id) {
			http.Error(w, fmt.Sprintf("ids: %q is not a member ID from 1 to %d; want ?ids=4,5,6", raw, protocol.MaxMemberID), http.StatusBadRequest)
			return
		}
		voters = append(voters, id)
	}
	ctx, cancel := context.WithTimeout(r.Context(), votersTimeout)
	defer cancel()
	err := n.ChangeVoters(ctx, voters)
	code := http.StatusAccepted
	switch {
	case err == nil:
	case errors.Is(err, ErrNoVoters):
		http.Error(w, err.Error(), http.StatusNotImplemented)
		return
	case errors.Is(err, election.ErrVotersRefused):
		code = http.StatusConflict
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		http.Error(w, "the node did not answer in time", http.StatusServiceUnavailable)
		return
	default:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	body := struct {
		Error  string          `json:"error,omitempty"`
		Status protocol.Status `json:"status"`
	}{Status: n.Status()}
	if err != nil {
		body.Error = err.Error()
	}
	json.NewEncoder(w).Encode(body)
}
