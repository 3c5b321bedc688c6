package natstransport

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Shared is what the adapters of one process's elections share when they
// run over one connection (node.Group): the connection, which none of
// them closes, and its connection events, subscribed and decoded once and
// handed to every adapter, so that a peer process's closed connection
// fails over, at once, every election it took part in.
//
// The connection's name is protocol.ConnectionName(Conn, ID): every
// process of one deployment names its connection after the same cluster,
// Conn, and an adapter takes a connection event about Conn's member id for
// one about its own election's member id.
type Shared struct {
	nc  *nats.Conn
	cfg SharedConfig
	log *slog.Logger

	mu       sync.Mutex
	adapters map[*Adapter]struct{}
	subs     []*nats.Subscription
	seen     chan struct{} // closed by the first connection event
	once     sync.Once

	stop context.CancelFunc
	wg   sync.WaitGroup // the probe

	// The rounds of settle: rounds counts those started, settling is
	// set while one runs, and settled is closed when it ends.
	settleMu sync.Mutex
	settling bool
	rounds   uint64
	settled  chan struct{}
}

// SharedConfig configures a Shared.
type SharedConfig struct {
	// Conn is the cluster after which the processes of the deployment
	// name their connections, ID this process's member ID.
	Conn string
	ID   uint64
	// ConnectionEvents: follow the server's connection events.
	ConnectionEvents bool
	// Probe and ProbeTimeout: as in Config, once for the connection.
	Probe        func(ctx context.Context, name string) error
	ProbeTimeout time.Duration
	Logger       *slog.Logger
}

// NewShared returns what the adapters over nc share. It starts nothing.
func NewShared(nc *nats.Conn, cfg SharedConfig) (*Shared, error) {
	if nc == nil {
		return nil, errors.New("natstransport: no NATS connection")
	}
	setDefault(&cfg.ProbeTimeout, DefaultProbeTimeout)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Shared{nc: nc, cfg: cfg, log: cfg.Logger, adapters: make(map[*Adapter]struct{}), seen: make(chan struct{})}, nil
}

// Start subscribes to the connection events, unless they are off, and
// checks beside the elections that the server delivers them (the probe of
// Config.Probe). Stop ends it.
func (s *Shared) Start() error {
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	if !s.cfg.ConnectionEvents {
		s.log.Info("connection events off: failures are detected by heartbeats alone")
		return nil
	}
	for _, subject := range []string{connectSubject, disconnectSubject} {
		connect := subject == connectSubject
		sub, err := s.nc.Subscribe(subject, func(msg *nats.Msg) { s.onConnEvent(msg, connect) })
		if err != nil {
			s.Stop()
			return err
		}
		s.subs = append(s.subs, sub)
	}
	s.wg.Go(func() {
		probeEvents(ctx, s.log, s.seen, s.cfg.Probe, s.cfg.ProbeTimeout, probeName(s.cfg.Conn, s.cfg.ID))
	})
	return nil
}

// Stop unsubscribes from the connection events and waits for the probe.
func (s *Shared) Stop() {
	if s.stop != nil {
		s.stop()
	}
	s.wg.Wait()
	s.mu.Lock()
	subs := s.subs
	s.subs = nil
	s.mu.Unlock()
	for _, sub := range subs {
		sub.Unsubscribe()
	}
}

// add hands the connection events to a, from now on; remove stops.
func (s *Shared) add(a *Adapter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.adapters[a] = struct{}{}
}

func (s *Shared) remove(a *Adapter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.adapters, a)
}

// onConnEvent decodes a connection event once and hands it to every
// adapter.
func (s *Shared) onConnEvent(msg *nats.Msg, connect bool) {
	if len(msg.Data) > maxEventSize {
		return
	}
	var e connEvent
	if err := json.Unmarshal(msg.Data, &e); err != nil {
		s.log.Debug("undecodable connection event", "subject", msg.Subject, "err", err)
		return
	}
	s.once.Do(func() { close(s.seen) })
	s.mu.Lock()
	adapters := make([]*Adapter, 0, len(s.adapters))
	for a := range s.adapters {
		adapters = append(adapters, a)
	}
	s.mu.Unlock()
	for _, a := range adapters {
		a.connEvent(e, msg.Subject, connect)
	}
}

// settle settles the connection (the adapters' Settle) for every election
// that asks at once: a round of flush and barrier started after a call
// covers it, so a caller that finds a round running waits for its end
// and then joins the round another waiter started meanwhile, or starts
// one. A round costs the same whatever the number of callers.
func (s *Shared) settle() {
	s.settleMu.Lock()
	if s.settling {
		asked := s.rounds
		done := s.settled
		s.settleMu.Unlock()
		<-done
		s.settleMu.Lock()
		switch {
		case s.rounds > asked && s.settling:
			done = s.settled // started after the call: join it
			s.settleMu.Unlock()
			<-done
			return
		case s.rounds > asked:
			s.settleMu.Unlock() // started after the call, and over
			return
		}
	}
	s.settling = true
	s.rounds++
	done := make(chan struct{})
	s.settled = done
	s.settleMu.Unlock()
	settle(s.nc, s.log)
	s.settleMu.Lock()
	s.settling = false
	close(done)
	s.settleMu.Unlock()
}
