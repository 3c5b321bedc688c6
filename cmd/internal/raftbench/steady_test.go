package raftbench

import (
	"context"
	"testing"
	"time"
)

func TestChangeCount(t *testing.T) {
	c := changeCount{current: "p5"}
	for _, l := range []string{"p5", "-", "p4", "p4", "-", "p5", "p5"} {
		c.add(l)
	}
	if c.moves != 2 || c.lost != 2 {
		t.Errorf("got %d moves, %d lost; want 2 and 2", c.moves, c.lost)
	}
}

func TestMeasureSteady(t *testing.T) {
	readied := false
	res, err := MeasureSteady(context.Background(), Config{Binary: peerBinary, N: 3, Timeouts: Timeouts150ms}, 500*time.Millisecond, func() { readied = true })
	if err != nil {
		t.Fatal(err)
	}
	if !readied || res.N != 3 || res.Moves < 0 || res.Lost < 0 {
		t.Errorf("MeasureSteady = %+v, ready %v", res, readied)
	}
	if _, err := MeasureSteady(context.Background(), Config{Binary: peerBinary, N: 3, Timeouts: Timeouts150ms}, 0, nil); err == nil {
		t.Error("a zero window: no error")
	}
}
