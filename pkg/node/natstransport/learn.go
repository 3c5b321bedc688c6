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
// leader they name count. It implements node.TermSource.
type Cluster struct {
	NC   *nats.Conn
	Name string
	Keys *signing.MemberKeys
}

func (c Cluster) options(ctx context.Context) []leader.Option {
	opts := []leader.Option{leader.WithKeys(c.Keys)}
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
