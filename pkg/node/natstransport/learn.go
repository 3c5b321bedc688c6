package natstransport

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/pkg/leader"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
)

// Cluster is what a starting node can ask its cluster over NATS: the
// current leader (pkg/leader.Current, by query alone) and the last
// announcement kept by a JetStream stream on the leader subject
// (leader.LastAnnounced). With keys, only announcements signed by the
// leader they name count. It implements node.TermSource. Streams, if not
// nil, remembers the stream for the elections that share it
// (Shared.Streams).
type Cluster struct {
	NC      *nats.Conn
	Name    string
	Keys    *signing.MemberKeys
	Streams *leader.Streams
}

func (c Cluster) options(ctx context.Context) []leader.Option {
	opts := []leader.Option{leader.WithKeys(c.Keys)}
	if c.Streams != nil {
		opts = append(opts, leader.WithStreams(c.Streams))
	}
	if d, ok := ctx.Deadline(); ok {
		opts = append(opts, leader.WithQueryTimeout(time.Until(d)))
	}
	return opts
}

// Leader asks the live leader for its announcement.
func (c Cluster) Leader(ctx context.Context) (protocol.Announcement, error) {
	return leader.Current(ctx, c.NC, c.Name, append(c.options(ctx), leader.WithoutStream())...)
}

// LastAnnounced reads the stream's last announcement.
func (c Cluster) LastAnnounced(ctx context.Context) (protocol.Announcement, error) {
	return leader.LastAnnounced(ctx, c.NC, c.Name, c.options(ctx)...)
}
