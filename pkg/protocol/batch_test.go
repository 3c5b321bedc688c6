package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestBatchRoundTrip(t *testing.T) {
	var batch []byte
	want := map[string]string{}
	var order []string
	for i := range 50 {
		c, m := fmt.Sprintf("shard-%d", i), fmt.Sprintf(`{"v":1,"n":%d}`, i)
		batch = AppendBatchEntry(batch, c, []byte(m))
		want[c], order = m, append(order, c)
	}
	if got := len(batch); got != 1+sumSizes(order, want) {
		t.Fatalf("batch of %d bytes, BatchEntrySize says %d", got, 1+sumSizes(order, want))
	}
	var got []string
	err := ReadBatch(batch, MaxPayload, func(c string, m []byte) bool {
		if want[c] != string(m) {
			t.Errorf("%s: %q, want %q", c, m, want[c])
		}
		got = append(got, c)
		return true
	})
	if err != nil || strings.Join(got, ",") != strings.Join(order, ",") {
		t.Fatalf("ReadBatch: %v, entries %v", err, got)
	}
	n := 0
	ReadBatch(batch, MaxPayload, func(string, []byte) bool { n++; return n < 3 })
	if n != 3 {
		t.Errorf("f returned false at the third entry, and was called %d times", n)
	}
}

func sumSizes(order []string, msgs map[string]string) int {
	total := 0
	for _, c := range order {
		total += BatchEntrySize(c, len(msgs[c]))
	}
	return total
}

// A batch that fails a check is refused whole: f sees none of it.
func TestReadBatchRefuses(t *testing.T) {
	good := AppendBatchEntry(nil, "a", []byte("{}"))
	long := AppendBatchEntry(nil, "a", bytes.Repeat([]byte("x"), MaxPayload+1))
	many := []byte{BatchVersion}
	for range MaxBatchEntries + 1 {
		many = AppendBatchEntry(many, "a", []byte("1"))
	}
	for name, batch := range map[string][]byte{
		"empty":            nil,
		"another version":  append([]byte{2}, good[1:]...),
		"truncated":        good[:len(good)-1],
		"trailing byte":    append(append([]byte{}, good...), 7),
		"bad cluster":      AppendBatchEntry(AppendBatchEntry(nil, "a", []byte("{}")), "a.b", []byte("{}")),
		"message too long": long,
		"empty message":    AppendBatchEntry(nil, "a", nil),
		"too many":         many,
		"too large":        append([]byte{BatchVersion}, make([]byte, MaxBatchPayload)...),
		"huge length":      binary.AppendUvarint([]byte{BatchVersion, 1, 'a'}, 1<<62),
		"bad varint":       []byte{BatchVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	} {
		seen := 0
		err := ReadBatch(batch, MaxPayload, func(string, []byte) bool { seen++; return true })
		if !errors.Is(err, ErrBatch) || seen != 0 {
			t.Errorf("%s: %v, %d entries seen; want ErrBatch and none", name, err, seen)
		}
	}
}

func FuzzReadBatch(f *testing.F) {
	f.Add(AppendBatchEntry(AppendBatchEntry(nil, "a", []byte("{}")), "b-1", []byte(`{"v":1}`)))
	f.Fuzz(func(t *testing.T, batch []byte) {
		total := 0
		if err := ReadBatch(batch, MaxPayload, func(c string, m []byte) bool {
			total += BatchEntrySize(c, len(m))
			return true
		}); err == nil && total+1 != len(batch) {
			t.Fatalf("entries of %d bytes in a batch of %d", total, len(batch))
		}
	})
}
