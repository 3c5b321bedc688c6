package leader

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// maxStreams bounds the streams a Streams remembers.
const maxStreams = 16

// Streams remembers the JetStream streams that keep the announcements,
// for the readers that share it (WithStreams): a process that starts
// thousands of elections asks for the stream's name and information once,
// instead of twice for each election before it reads the last
// announcement. A stream is found again when it is gone; one whose
// subjects were edited since it was found is read as it was.
type Streams struct {
	mu      sync.Mutex
	streams []jetstream.Stream
}

// WithStreams makes LastAnnounced, and Current when it reads the stream,
// find the stream through s.
func WithStreams(s *Streams) Option { return func(o *options) { o.streams = s } }

// last reads the last message on subject from the stream that keeps it.
func (s *Streams) last(ctx context.Context, js jetstream.JetStream, subject string) (*jetstream.RawStreamMsg, error) {
	for range 2 {
		stream, err := s.of(ctx, js, subject)
		if err != nil {
			return nil, err
		}
		msg, err := stream.GetLastMsgForSubject(ctx, subject)
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			return msg, err
		}
		s.forget(stream)
	}
	return nil, jetstream.ErrStreamNotFound
}

// of is the stream that keeps subject: one remembered, or the one the
// server names, then remembered.
func (s *Streams) of(ctx context.Context, js jetstream.JetStream, subject string) (jetstream.Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock() // one lookup at a time: the others then find it here
	for _, stream := range s.streams {
		if slices.ContainsFunc(stream.CachedInfo().Config.Subjects, func(filter string) bool { return subjectMatches(filter, subject) }) {
			return stream, nil
		}
	}
	name, err := js.StreamNameBySubject(ctx, subject)
	if err != nil {
		return nil, err
	}
	stream, err := js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(s.streams) == maxStreams {
		s.streams = s.streams[1:]
	}
	s.streams = append(s.streams, stream)
	return stream, nil
}

func (s *Streams) forget(stream jetstream.Stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streams = slices.DeleteFunc(s.streams, func(x jetstream.Stream) bool { return x == stream })
}

// subjectMatches reports whether the subject filter (with the wildcards
// * and >) matches subject.
func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, token := range f {
		switch {
		case token == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case token != "*" && token != s[i]:
			return false
		}
	}
	return len(f) == len(s)
}
