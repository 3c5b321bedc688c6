package protocol

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestBeatRoundTrip(t *testing.T) {
	for _, b := range []Beat{
		{From: 1, Sent: time.UnixMilli(1_700_000_000_123)},
		{From: 1<<64 - 1, Sent: time.UnixMilli(maxBeatMillis)},
		{From: 7, Sent: time.UnixMilli(0)},
	} {
		payload := AppendBeat(nil, b)
		if len(payload) > MaxBeatPayload {
			t.Fatalf("%+v: %d bytes, above MaxBeatPayload", b, len(payload))
		}
		got, err := ReadBeat(payload)
		if err != nil || got.From != b.From || !got.Sent.Equal(b.Sent) {
			t.Errorf("ReadBeat(AppendBeat(%+v)) = %+v, %v", b, got, err)
		}
	}
	// Before 1970: sent as 0, not as a huge number.
	if got, err := ReadBeat(AppendBeat(nil, Beat{From: 2, Sent: time.UnixMilli(-5)})); err != nil || got.Sent.UnixMilli() != 0 {
		t.Errorf("a beat dated before 1970 reads %+v, %v", got, err)
	}
}

func TestReadBeatRefuses(t *testing.T) {
	good := AppendBeat(nil, Beat{From: 3, Sent: time.UnixMilli(1000)})
	for name, payload := range map[string][]byte{
		"empty":         nil,
		"version":       append([]byte{BeatVersion + 1}, good[1:]...),
		"member 0":      AppendBeat(nil, Beat{From: 0, Sent: time.UnixMilli(1000)}),
		"no time":       good[:2],
		"trailing":      append(bytes.Clone(good), 0),
		"too long":      bytes.Repeat([]byte{0x80}, MaxBeatPayload+1),
		"time too late": append([]byte{BeatVersion, 3}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f),
		"cut member":    {BeatVersion, 0x80},
	} {
		if b, err := ReadBeat(payload); !errors.Is(err, ErrBeat) {
			t.Errorf("%s: ReadBeat = %+v, %v; want ErrBeat", name, b, err)
		}
	}
}

func FuzzReadBeat(f *testing.F) {
	f.Add(AppendBeat(nil, Beat{From: 9, Sent: time.UnixMilli(1_700_000_000_000)}))
	f.Fuzz(func(t *testing.T, payload []byte) {
		b, err := ReadBeat(payload)
		if err != nil {
			return
		}
		again, err := ReadBeat(AppendBeat(nil, b))
		if b.From == 0 || err != nil || again.From != b.From || !again.Sent.Equal(b.Sent) {
			t.Fatalf("%x read as %+v, written and read again as %+v, %v", payload, b, again, err)
		}
	})
}
