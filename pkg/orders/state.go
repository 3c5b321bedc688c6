package orders

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/baton-election/baton/pkg/internal/atomicfile"
	"github.com/baton-election/baton/pkg/orders/agreement"
	"github.com/baton-election/baton/pkg/protocol"
)

// ErrStorage wraps every failure to read or write Config.StateFile.
var ErrStorage = errors.New("orders: state file")

// stateVersion is the format version of the state file.
const stateVersion = 1

// state is the content of the state file: the greatest order the member
// took part in.
type state struct {
	Version int    `json:"version"`
	Term    uint64 `json:"term"`
	Seq     uint64 `json:"seq"`
}

// readState returns the order kept in path, zero if the file does not
// exist. Temporary files of a write interrupted by a crash are removed.
func readState(path string) (agreement.ID, error) {
	if _, err := atomicfile.Clean(path); err != nil {
		return agreement.ID{}, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return agreement.ID{}, nil
	}
	if err != nil {
		return agreement.ID{}, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	var st state
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return agreement.ID{}, fmt.Errorf("%w: %s is corrupt (%v); move it away to start afresh, knowing that this member may then relay along its paths again in an order it took part in", ErrStorage, path, err)
	}
	switch {
	case st.Version != stateVersion:
		return agreement.ID{}, fmt.Errorf("%w: %s has format version %d, this service reads %d", ErrStorage, path, st.Version, stateVersion)
	case st.Term > protocol.MaxTerm || (st.Term == 0) != (st.Seq == 0):
		return agreement.ID{}, fmt.Errorf("%w: %s: order %d of term %d", ErrStorage, path, st.Seq, st.Term)
	}
	return agreement.ID{Term: st.Term, Seq: st.Seq}, nil
}

// writeState keeps id in path durably: when it returns nil, id survives
// a crash.
func writeState(path string, id agreement.ID) error {
	data, err := json.Marshal(state{Version: stateVersion, Term: id.Term, Seq: id.Seq})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	if err := atomicfile.Write(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return nil
}
