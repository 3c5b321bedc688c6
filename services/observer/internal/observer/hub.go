package observer

import (
	"slices"
	"sync"
)

// hub tells the live page's event streams which clusters changed. notify
// never blocks: each subscriber keeps the set of clusters it has yet to
// send and a one-slot signal, so a slow browser only coalesces updates.
type hub struct {
	mu   sync.Mutex
	subs map[*subscriber]struct{}
}

type subscriber struct {
	signal chan struct{}
	mu     sync.Mutex
	dirty  map[string]bool
}

func newHub() *hub { return &hub{subs: map[*subscriber]struct{}{}} }

func (h *hub) subscribe() *subscriber {
	s := &subscriber{signal: make(chan struct{}, 1), dirty: map[string]bool{}}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

func (h *hub) notify(cluster string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		s.mu.Lock()
		s.dirty[cluster] = true
		s.mu.Unlock()
		select {
		case s.signal <- struct{}{}:
		default:
		}
	}
}

// take returns and clears the changed clusters, sorted.
func (s *subscriber) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.dirty))
	for name := range s.dirty {
		names = append(names, name)
	}
	clear(s.dirty)
	slices.Sort(names)
	return names
}
